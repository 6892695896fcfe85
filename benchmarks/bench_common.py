"""What the benchmark scripts share: recorded results name no path of the machine."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def repo_relative(path: str) -> str:
    """`path` relative to the repository root (its file name when outside it).

    What the results record, so that they carry no path of the machine.
    """
    full = os.path.abspath(path)
    if os.path.commonpath([full, ROOT]) == ROOT:
        return os.path.relpath(full, ROOT)
    return os.path.basename(full)


def relative_flag(arg: str) -> str:
    """`--flag=PATH` with PATH made repo_relative when it is an absolute path."""
    name, eq, value = arg.partition("=")
    if eq and os.path.isabs(value):
        return f"{name}={repo_relative(value)}"
    return arg
