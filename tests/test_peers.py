"""core/peers.py: how a multi-process run's processes end together (the meeting
itself, a barrier of TensorFlow's coordination service, is run by two real workers in
tests/training/test_training_distributed.py, slow)."""

import textwrap

from helpers import run_python

SCRIPT = textwrap.dedent("""
    import atexit, sys
    from electra_tf.core import peers
    atexit.register(print, "exit hooks ran")
    asked = []
    def meet(timeout_s):
        asked.append(timeout_s)
        return sys.argv[1] == "leave"
    peers.register(meet)
    print("output before", flush=False)
    peers.end_together(int(sys.argv[2]))
    peers.end_together(int(sys.argv[2]))  # once: the meeting is spent
    print("returned", asked)
""")


def test_a_process_told_to_leave_exits_with_its_status_and_its_output_flushed():
    proc = run_python(["-c", SCRIPT, "leave", "143"], timeout=60)
    assert proc.returncode == 143, proc.stderr
    assert proc.stdout == "output before\n"  # flushed; no exit hook, nothing after


def test_the_chief_or_a_failed_meeting_returns_once_to_the_usual_exit():
    proc = run_python(["-c", SCRIPT, "stay", "0"], timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["output before", "returned [300.0]", "exit hooks ran"]
