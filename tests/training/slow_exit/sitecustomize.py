"""A slow exit for one worker of test_training_distributed.py's runs: exit hooks that
take ELECTRA_TEST_SLOW_EXIT_S seconds, as a loaded machine's teardown can. (On the
PYTHONPATH of that worker's process alone; its start-up watchdog, which never imports
electra_tf, ends as usual.)"""

import atexit
import os
import sys
import time


def _slow_exit(seconds=float(os.environ.get("ELECTRA_TEST_SLOW_EXIT_S", "0"))):
    if "electra_tf" in sys.modules:
        time.sleep(seconds)


atexit.register(_slow_exit)
