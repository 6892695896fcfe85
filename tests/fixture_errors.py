"""One failed shared fixture is one failure: the tests that share it then skip, naming it.

pytest builds a session- or module-scoped fixture once and, when that fails,
raises the same exception again in the setup of every test that uses it: a
fresh-process load that failed once (issue 42) read as 67 independent errors.
The first setup that meets an exception fails as usual, with its traceback;
every later setup that meets that same exception object skips with a line
that names the failed test. tests/conftest.py imports the hook.
"""

from __future__ import annotations

import pytest

_first_failure: dict[int, tuple[BaseException, str]] = {}  # id(exception) -> (it, nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when != "setup" or call.excinfo is None or not report.failed:
        return report
    error = call.excinfo.value
    seen = _first_failure.get(id(error))
    if seen is None or seen[0] is not error:
        _first_failure[id(error)] = (error, item.nodeid)  # kept alive: ids stay unique
        return report
    message = str(error).strip().splitlines()
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0,
                       f"Skipped: a shared fixture failed in {seen[1]} (its error is reported "
                       f"there): {type(error).__name__}: {message[0][:200] if message else ''}")
    return report
