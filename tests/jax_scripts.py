"""One KERAS_BACKEND=jax process that runs the tests' scripts one after the other.

    python tests/jax_scripts.py   (helpers.run_jax_script starts it; not a test file)

Each line on stdin is a request {"script": source, "argv": [...]}: the script runs as
`python -c script argv...` would run it (its own globals, `__name__ == "__main__"`,
sys.argv), in this process; the answer is one line on the real stdout, {"stdout": what
the script printed, "returncode": 0, or 1 after an exception (its traceback on
stderr, as Python prints it), or a SystemExit's code}. Output written to file
descriptor 1 by other means goes to stderr. The process ends at the end of stdin.

A JAX process start (imports, backend start-up, the first traces) costs seconds on 2
cores; the suite's JAX scripts (runs, loss parity, initial weights) each used to pay
it. Every script starts as in a fresh process in what it reads: the float32 dtype
policy (a mixed-precision trainer sets its own), and the seeds it sets itself.
"""

import contextlib
import io
import json
import os
import sys
import traceback


def main() -> None:
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray writes to fd 1 (C++ logs, ...) go to stderr, not the channel
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
    import keras  # the backend starts once, here

    for line in sys.stdin:
        request = json.loads(line)
        keras.config.set_dtype_policy("float32")
        sys.argv = ["-c", *request["argv"]]
        out, code = io.StringIO(), 0
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(request["script"], "<string>", "exec"), {"__name__": "__main__"})
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        except BaseException:  # a KeyboardInterrupt a script raises too: the test decides
            traceback.print_exc()
            code = 1
        sys.stderr.flush()
        channel.write(json.dumps({"stdout": out.getvalue(), "returncode": code}) + "\n")
        channel.flush()


if __name__ == "__main__":
    main()
