r"""Scores a GLUE submission-format predictions file against a labelled dev file.

    python -m electra_tf.eval_glue --task=mrpc --predictions=OUT/mrpc_dev_predictions.txt \
        --dev_file=glue_data/MRPC/dev.tsv

(the dev split's predictions a fine-tuning run writes; `MRPC.tsv` is the test
split's submission file, which a dev file cannot score.)

The predictions file is what `GlueTask.write_predictions` writes (header
"index\tprediction"; label names, or floats for STS-B), with one row per
dev example, matched by index (the dev file's index/id column, or its 0-based
row number where it has none). Prints the task's metrics as one JSON object,
primary metric first, e.g. {"f1": 0.89, "accuracy": 0.85}. Bad input (an
unknown task, a missing file, a malformed row, a missing or unknown index)
exits with status 2 and one line naming the file and line. The scoring is
`electra_tf.tasks.glue.evaluate_submission`.
"""

from __future__ import annotations

import json

from absl import app, flags

from electra_tf import cli
from electra_tf.core.errors import InputError
from electra_tf.tasks.glue import evaluate_submission
from electra_tf.tasks.metrics import GLUE_TASK_NAMES

FLAGS = flags.FLAGS


def define_flags():
    """Flags of this entry point (defined only when it runs as main)."""
    flags.DEFINE_string("task", None, f"GLUE task: {', '.join(GLUE_TASK_NAMES[:-1])} or "
                        f"{GLUE_TASK_NAMES[-1]} (SST-2, STS-B spellings work too).")
    flags.DEFINE_string("predictions", None, "Predictions TSV (index<TAB>prediction).")
    flags.DEFINE_string("dev_file", None, "Labelled GLUE file in the official layout, "
                        "e.g. glue_data/MNLI/dev_mismatched.tsv.")
    flags.DEFINE_bool("skip_malformed_rows", False, "Skip --dev_file's rows with too few "
                      "columns, as run_finetuning --skip_malformed_rows does (score the "
                      "predictions of a run trained with it).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    for name in ("task", "predictions", "dev_file"):
        if not FLAGS[name].value:
            raise InputError(f"--{name} is required")
    cli.write_stdout(json.dumps(evaluate_submission(
        FLAGS.task, FLAGS.predictions, FLAGS.dev_file, FLAGS.skip_malformed_rows)) + "\n")


def run():
    """The command line (console script `electra-eval-glue`)."""
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
