"""The studies' tests: run after the library's (`python -m pytest -q -n 2 studies/tests`,
.ci/run's second step), with the library's tiny fixtures (tests/conftest.py)."""

from conftest import jax_compilation_cache, tiny_corpus, tiny_vocab  # noqa: F401
