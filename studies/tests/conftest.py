"""The studies' tests: run after the library's (`python -m pytest -q -n 2 studies/tests`,
.ci/run's second step), with the library's tiny fixtures (tests/conftest.py), and its
collection order and xdist scheduling (COSTLY_FIRST, SHARED_FIXTURES: the studies' units
are named there too). Run with tests/ (the slow set), tests/conftest.py's hooks are
registered as well; both copies sort and schedule alike."""

from conftest import (  # noqa: F401
    jax_compilation_cache,
    pytest_collection_modifyitems,
    pytest_xdist_make_scheduler,
    tiny_corpus,
    tiny_vocab,
)
