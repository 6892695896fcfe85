"""The original README's results table, from your fine-tuned folders.

    python -m electra_tf.results_table cola_small sst2_small mrpc_small squad_small ...
    python -m electra_tf.results_table --format=json --output=table.json FOLDER ...

Each FOLDER is a fine-tuning model_dir (its final dev results) or a trial group
(`run_finetuning --num_trials=N --model_dir=FOLDER`: the median over its
trials). Prints google-research/electra's "Expected Results" layout (CoLA MCC,
SST, MRPC accuracy, STS Spearman, QQP, MNLI, QNLI, RTE accuracy, SQuAD 1.1
and 2.0 EM, chunking F1), a row per model size of yours, and the README's rows
of the released models of that size beside it, as Markdown (the default) or
JSON; `--output` also writes it to a file.
"""

from __future__ import annotations

import json
import os

from absl import flags

from electra_tf import cli
from electra_tf.core.errors import InputError

FLAGS = flags.FLAGS


def define_flags():
    """Flags of this entry point (defined only when it runs as main)."""
    flags.DEFINE_enum("format", "markdown", ["markdown", "json"], "What to print.")
    flags.DEFINE_string("output", "", "Also write the table (in --format) to this file.")


def main(argv):
    folders = argv[1:]
    if not folders:
        raise InputError("give one or more fine-tuning folders or trial groups")
    from electra_tf.core.fileio import check_output_file, write_output_text
    from electra_tf.training.results_table import markdown, results_table

    if FLAGS.output:  # before anything is read or printed
        check_output_file(FLAGS.output, "--output")
        _check_not_a_folder_file(FLAGS.output, folders)

    table = results_table(folders)
    text = markdown(table) if FLAGS.format == "markdown" else json.dumps(table, indent=2) + "\n"
    cli.write_stdout(text)
    if FLAGS.output:
        write_output_text(FLAGS.output, text)


def _a_table(path: str) -> bool:
    """Whether the file at `path` holds a table this command writes (Markdown or JSON)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(1 << 20)
    except (OSError, UnicodeDecodeError):
        return False
    if text.startswith("|  | "):
        return True
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and (
        {"columns", "rows", "skipped"} <= set(value)
        <= {"columns", "rows", "skipped", "pending", "unscored"})


def _shown(folder: str) -> str:
    """A folder as a user names it: relative to the current directory where it lies under
    it (GROUP_1), else absolute (the check resolves every path)."""
    relative = os.path.relpath(folder)
    if relative == os.curdir:
        return "the current directory"
    return folder if relative == os.pardir or relative.startswith(os.pardir + os.sep) \
        else relative


def _check_not_a_folder_file(output: str, folders: list[str]) -> None:
    """Refuses an --output that is one of the given folders' own files, or one of the
    files of another folder electra_tf wrote (a group's trial folder): their
    trials.json or results.json had been replaced with the table; so had their
    prediction files, files in their checkpoints/, and a folder of records'
    pretrain_data_stats.json. Any other file that holds something but a table
    (a task's dev.tsv) is refused too. A new file, an empty one, or a table an
    earlier run wrote, may be written.

    Raises:
      InputError: naming the file.
    """
    from electra_tf.data.features import STATS_FILE
    from electra_tf.folders import files
    from electra_tf.training import trials

    own = {*files.FOLDER_FILES, trials.TRIALS, trials.RESULTS_TXT}
    # what marks a folder electra_tf wrote: a run's record, a trial group's, the
    # pretrain_data_stats.json of a folder of records (it had been replaced with the
    # table), an export's saved_model.pb
    records = (files.FINETUNING_CONFIG, files.PRETRAINING_CONFIG, trials.TRIALS, STATS_FILE,
               "saved_model.pb")
    where = os.path.realpath(output)
    name, parent = os.path.basename(where), os.path.dirname(where)
    if name not in own:
        # any other file of a folder (its predictions, its checkpoints/ ...), but a table
        # an earlier run of this command wrote there
        if os.path.isfile(where) and os.path.getsize(where) and not _a_table(where):
            given = {os.path.realpath(f) for f in folders}
            folder = parent
            while True:
                if folder in given or any(os.path.exists(os.path.join(folder, record))
                                          for record in records):
                    raise InputError(f"--output {output} is a file of {_shown(folder)}, a "
                                     "folder electra_tf wrote (not a table this command "
                                     "wrote); write the table elsewhere")
                if os.path.dirname(folder) == folder:
                    break
                folder = os.path.dirname(folder)
            # any other file that holds something (a task's dev.tsv had been replaced
            # with the table, silently)
            raise InputError(f"--output {output} holds something other than a table this "
                             "command wrote; remove it first, or write the table elsewhere")
        return
    for folder in folders:
        if os.path.realpath(folder) == parent:
            raise InputError(f"--output {output} is {folder}'s own {name}; write the table "
                             "elsewhere")
    # another folder electra_tf wrote: a group's trial folder (GROUP_k), any model_dir
    if any(os.path.exists(os.path.join(parent, record)) for record in records):
        raise InputError(f"--output {output} is the {name} of {_shown(parent)}, a folder "
                         "electra_tf wrote; write the table elsewhere")


def run():
    """The command line (console script `electra-results-table`)."""
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
