"""A shared fixture that fails is one error; the other tests that use it skip, naming it
(tests/fixture_errors.py). It used to be one error per test: 67 for one slow load."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import REPO, patience

CONFTEST = "from fixture_errors import pytest_runtest_makereport  # noqa: F401\n"
TESTS = '''
import pytest

@pytest.fixture(scope="session")
def costly():
    raise RuntimeError("the fresh process was killed")

@pytest.fixture(scope="session")
def fine():
    return 1

@pytest.mark.parametrize("i", range(3))
def test_uses_it(costly, i):
    pass

def test_fails_on_its_own(fine):
    assert fine == 2

def test_passes(fine):
    assert fine == 1

@pytest.fixture
def broken_each_time():
    raise ValueError("a function fixture fails afresh")

@pytest.mark.parametrize("i", range(2))
def test_function_fixture(broken_each_time, i):
    pass
'''


def test_a_failed_shared_fixture_is_one_error_and_skips_naming_it(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_shared.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "tests"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsfE", "-p", "no:cacheprovider",
                           "-p", "no:xdist", str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=patience(60))
    out = proc.stdout
    assert proc.returncode == 1, out
    # The session fixture: one error with its traceback, two skips that point at it;
    # a test's own failure and a function fixture's errors stay what they are.
    assert "1 failed, 1 passed, 2 skipped, 3 errors" in out, out
    assert out.count("E       RuntimeError: the fresh process was killed") == 1, out
    assert ("SKIPPED [2] test_shared.py:11: a shared fixture failed in "
            "test_shared.py::test_uses_it[0] (its error is reported there): RuntimeError: the "
            "fresh process was killed") in out, out
    assert "ERROR test_shared.py::test_uses_it[0]" in out, out
    assert "ERROR test_shared.py::test_function_fixture[1]" in out, out
