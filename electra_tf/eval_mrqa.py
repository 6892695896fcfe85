"""Scores predictions on an MRQA shared-task file with the MRQA official evaluation.

    python -m electra_tf.eval_mrqa --data_file=dev.jsonl.gz --predictions=predictions.json

The data file is one of the shared task's (`.jsonl.gz` as distributed, or
plain `.jsonl`); the predictions are {qid: answer text}, as run_finetuning
writes them (`newsqa_dev_predictions.json`). Prints one JSON line,
{"exact_match": ..., "f1": ...} in percent: each question's maximum over its
`answers` strings after the SQuAD normalization (`tasks/mrqa_eval.py`, a port
of mrqa_official_eval.py). A question without a prediction scores 0, as the
official script scores it (a line on stderr counts them); `--skip_no_answer`
leaves it out, as the original's run_finetuning does. Bad files (missing, damaged gzip, malformed
JSON on a line, a question without answers, predictions for questions the file
does not hold) exit with status 2 and one line on stderr.
"""

from __future__ import annotations

import json
import sys

from absl import app, flags

from electra_tf import cli
from electra_tf.core.errors import InputError
from electra_tf.tasks import mrqa_eval

FLAGS = flags.FLAGS


def define_flags():
    """Flags of this entry point (defined only when it runs as main)."""
    flags.DEFINE_string("data_file", None, "The MRQA file (dev.jsonl.gz, or plain .jsonl).")
    flags.DEFINE_string("predictions", None, "Predictions JSON {qid: answer text}.")
    flags.DEFINE_bool("skip_no_answer", False, "Leave out the questions without a "
                      "prediction (the original's run_finetuning); default: they score 0, "
                      "as the official script scores them.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    for name in ("data_file", "predictions"):
        if not FLAGS[name].value:
            raise InputError(f"--{name} is required")
    answers = mrqa_eval.read_answers(FLAGS.data_file)
    predictions = mrqa_eval.read_predictions(FLAGS.predictions)
    missing = mrqa_eval.check_predictions(answers, predictions, FLAGS.data_file,
                                          FLAGS.predictions)
    if missing:  # the official script printed a line for each
        what = ("left out (--skip_no_answer)" if FLAGS.skip_no_answer else
                "scored 0, as the official script scores them (--skip_no_answer leaves them "
                "out)")
        print(f"[eval_mrqa] {len(missing)} of {len(answers)} questions have no prediction "
              f"(e.g. {missing[0]!r}): {what}", file=sys.stderr)
    cli.write_stdout(json.dumps(mrqa_eval.evaluate(answers, predictions,
                                                   FLAGS.skip_no_answer)) + "\n")


def run():
    """The command line (console script `electra-eval-mrqa`)."""
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
