r"""Scores SQuAD predictions with the official v1.1 / v2.0 evaluators.

    python -m electra_tf.eval_squad --version=2.0 --data_file=dev-v2.0.json \
        --predictions=predictions.json [--null_odds=null_odds.json]

Prints, as one JSON line, the scores of tf-models-official's copies of the
official scripts, as the official scripts print them: v1.1's "exact_match"
and "f1" (percentages), v2.0's under the official evaluate-v2.0.py's names,
with the best-threshold "best_*" keys only when --null_odds is given (and then,
as that script's -n, "exact"/"f1" count an answer as no answer where its null
odds are above --na_prob_thresh, its -t). `tasks.squad_eval`, which does the
reading, checking and scoring, describes the keys and scales. Bad files
(missing, malformed JSON, wrong structure, predictions or null odds that do not
fit the data) exit with status 2 and one line on stderr.
"""

from __future__ import annotations

import json
import math
import sys

from absl import app, flags

from electra_tf import cli
from electra_tf.core.errors import InputError
from electra_tf.tasks.squad_eval import evaluate_files

FLAGS = flags.FLAGS


def define_flags():
    """Flags of this entry point (defined only when it runs as main)."""
    flags.DEFINE_enum("version", None, ["1.1", "2.0"], "SQuAD version of the data file.")
    flags.DEFINE_string("data_file", None, "The official dev JSON (dev-v1.1.json, dev-v2.0.json).")
    flags.DEFINE_string("predictions", None, "Predictions JSON {question id: answer text}.")
    flags.DEFINE_string("null_odds", None, "2.0 only: JSON {question id: null odds}, "
                        "the official script's na_prob file.")
    flags.DEFINE_float("na_prob_thresh", 1.0, "With --null_odds: an answer whose null odds "
                       "are above this is scored as no answer in exact/f1 (the official "
                       "script's -t and its default; inf: none, as a run's own results.json "
                       "scores its submitted answers).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    for name in ("version", "data_file", "predictions"):
        if not FLAGS[name].value:
            raise InputError(f"--{name} is required")
    if FLAGS["na_prob_thresh"].present and not FLAGS.null_odds \
            and not math.isnan(FLAGS.na_prob_thresh):  # (nan: refused, that line alone)
        print(f"note: --na_prob_thresh={FLAGS.na_prob_thresh:g} applies with --null_odds only "
              "(every answer as submitted is scored)", file=sys.stderr)
    result = evaluate_files(FLAGS.version, FLAGS.data_file, FLAGS.predictions, FLAGS.null_odds,
                            FLAGS.na_prob_thresh)
    cli.write_stdout(json.dumps(result) + "\n")


def run():
    """The command line (console script `electra-eval-squad`)."""
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
