"""A stop signal to a study driver: its runs save and their last lines reach their logs."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import REPO

# A run as the product behaves: a stop signal is held to the end of the chunk, which
# saves; it exits 128 + the signal after a last line. It counts the signals it got.
RUN = textwrap.dedent("""
    import signal, sys, time
    got = []
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda s, f: got.append(s))
    print("ready", flush=True)
    while not got:
        time.sleep(0.02)
    time.sleep(0.5)  # the chunk finishing
    print(f"saved ckpt-3 after {len(got)} signal(s)", flush=True)
    sys.exit(128 + got[0])
""")

DRIVER = textwrap.dedent("""
    import sys
    from studies.real_data import study
    study.forward_stop_signals()
    run = [sys.executable, "-c", sys.argv[1]]
    first = study.run_logged(run, sys.argv[2], relay_every_s=1e9)[0]
    second = study.run_logged(run, sys.argv[3], relay_every_s=1e9)[0]
    print("codes", first, second, study.stopping(), study.stopped_exit_code(), flush=True)
""")


def _wait_for(path, text, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(path) and text in open(path).read():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never reached {path}")


@pytest.mark.parametrize("how", ["pid", "group", "ctrl_c"])
def test_a_stop_signal_reaches_the_run_once_and_its_last_lines_reach_the_log(tmp_path, how):
    """kill PID, kill -- -PGID (the driver's group: the run has a session of its own)
    and Ctrl-C (SIGINT to the group): the run gets the signal once, saves, and its
    last line is in its log; the next run is not started; the driver exits 128 + it."""
    first, second = str(tmp_path / "first.log"), str(tmp_path / "second.log")
    env = dict(os.environ, PYTHONPATH=REPO)
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, RUN, first, second], cwd=REPO,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        _wait_for(first, "ready")
        signum = signal.SIGINT if how == "ctrl_c" else signal.SIGTERM
        if how == "pid":
            os.kill(driver.pid, signum)
        else:
            os.killpg(driver.pid, signum)
        out, err = driver.communicate(timeout=60)
    finally:
        driver.kill()
    assert "saved ckpt-3 after 1 signal(s)" in open(first).read(), err
    assert not os.path.exists(second)  # not started
    assert out.split() == ["codes", str(128 + signum), str(128 + signum), "True",
                           str(128 + signum)], (out, err)
    name = signal.Signals(signum).name
    assert f"[study] {name}: waiting for 1 run(s) to save and exit" in err
