r"""The export command: a fine-tuned (or pre-trained, for rtd) ELECTRA as a TF Serving SavedModel.

    python -m export.export_saved_model --task=sequence_classification \
        --checkpoint=mine --model_base=/models --model_name=mine

(`python -m electra_tf.export_saved_model` and `electra-export` are the same command.)
What is written, and where: electra_tf/serving/export.py and docs/serving.md.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

from absl import app, flags

from electra_tf import cli
from electra_tf.core import fileio
from electra_tf.core.errors import InputError
from electra_tf.serving.export import (
    PRECISIONS,
    TASKS,
    check_model_name,
    check_version,
    emulated_bf16_note,
    export,
    load_spec,
    parse_length_buckets,
)
from electra_tf.tasks import heads

FLAGS = flags.FLAGS


def define_flags():
    """Flags of the command line (defined only when run as a program)."""
    flags.DEFINE_enum("task", None, list(TASKS), "What the endpoint serves.")
    flags.DEFINE_string("checkpoint", None,
                        "Fine-tuning model_dir (pre-training model_dir for rtd and score).")
    flags.DEFINE_string("model_base", None, "TF Serving model base path.")
    flags.DEFINE_string("model_name", None, "Model name: the export goes to MODEL_BASE/NAME/N.")
    flags.DEFINE_integer("version", None, "Version N (default: highest existing + 1, or 1).")
    flags.DEFINE_bool("ids_only", False, "Export only the ids signature (no TF-Text ops).")
    flags.DEFINE_string("vocab_file", "", "The vocabulary (default: the checkpoint folder's "
                        "vocab.txt); it must hold the tokens the folder records.")
    flags.DEFINE_integer("max_seq_length", 0,
                         "Sequence length (default: the fine-tuning run's; for rtd and "
                         "score the length the model was pre-trained at).")
    flags.DEFINE_integer("max_query_length", 0,
                         "squad: question pieces kept (0: the fine-tuning run's).")
    flags.DEFINE_integer("max_answer_length", 0,
                         "squad: longest answer in pieces (0: the fine-tuning run's).")
    flags.DEFINE_integer("doc_stride", 0,
                         "squad: a context longer than the window is read in windows, one "
                         "every doc_stride pieces (0: the fine-tuning run's).")
    flags.DEFINE_bool("warmup", True, "Write assets.extra/tf_serving_warmup_requests.")
    flags.DEFINE_enum("precision", "fp32", list(PRECISIONS),
                      "bf16: the encoder's dense kernels stored and multiplied in bfloat16 "
                      "(half their bytes; faster short requests on CPUs with AVX512-BF16 or "
                      "AMX, slower on CPUs without; outputs differ slightly from fp32's: "
                      "docs/serving.md).")
    flags.DEFINE_list("length_buckets", None,
                      "Lengths a batch is padded to (each batch: the shortest that holds its "
                      "longest row). Default: 8,16,24,32,48,64,96,128,192,... below "
                      "--max_seq_length, then it; "
                      "give only the max_seq_length for a fixed window.")


def ignored_flags(task: str, squad_flags: list[str], buckets, max_seq_length: int,
                  ids_only: bool = False, min_length: int = 1) -> list[str]:
    """A line for each flag given that does nothing here: a question-answering option
    (`squad_flags`, those given) that the task's head does not take, `--doc_stride` of
    an `ids_only` export (its rows are windows as sent), and `--length_buckets` past
    the window or below `min_length` (the joint span head's beam: they had been left
    out without a word)."""
    from electra_tf.tasks import heads

    options = {f.name for f in dataclasses.fields(heads.head_class(task).ServingOptions)}
    notes = [f"--{name} is an option of question answering; a {task} export has no "
             "question or answer" for name in squad_flags if name not in options]
    past = sorted(int(b) for b in buckets or () if int(b) > max_seq_length)
    if past:
        notes.append(f"--length_buckets {','.join(map(str, past))} past the window "
                     f"(max_seq_length {max_seq_length}, the last bucket) left out")
    below = sorted(int(b) for b in buckets or () if int(b) < min(min_length, max_seq_length))
    if below:
        notes.append(f"--length_buckets {','.join(map(str, below))} below the {min_length} "
                     "positions the joint span head's beam needs left out")
    if ids_only and "doc_stride" in squad_flags and "doc_stride" in options:
        notes.append("--doc_stride sets the text signature's windows; an --ids_only export "
                     "takes one window per row, as sent")
    return notes


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    for name in ("task", "checkpoint", "model_base", "model_name"):
        if not getattr(FLAGS, name):
            raise InputError(f"--{name} is required")
    check_model_name(FLAGS.model_name)
    fileio.check_output_folder(os.path.join(FLAGS.model_base, FLAGS.model_name),
                               "--model_base/--model_name")
    if FLAGS.version is not None:  # fail before the (slow) model build
        check_version(os.path.join(FLAGS.model_base, FLAGS.model_name), FLAGS.version)
    buckets = parse_length_buckets(FLAGS.length_buckets)
    t0 = time.monotonic()
    spec = load_spec(FLAGS.task, FLAGS.checkpoint, FLAGS.vocab_file, FLAGS.max_seq_length,
                     FLAGS.max_query_length, FLAGS.max_answer_length,
                     doc_stride=FLAGS.doc_stride)
    spec = dataclasses.replace(spec, length_buckets=buckets, precision=FLAGS.precision)
    if FLAGS.task in heads.PRETRAINED_HEADS and FLAGS.max_seq_length:  # rtd, score
        from electra_tf.folders import PretrainingFolder

        warning = PretrainingFolder.open(FLAGS.checkpoint, what="--checkpoint") \
            .untrained_positions_warning(spec.max_seq_length, "--max_seq_length")
        if warning:
            print(f"[export] {warning}", file=sys.stderr)
    from electra_tf.serving import signatures  # (TensorFlow, loaded with the spec)

    for note in ignored_flags(FLAGS.task, [n for n in ("max_query_length", "max_answer_length",
                                                       "doc_stride") if FLAGS[n].present],
                              buckets, spec.max_seq_length, FLAGS.ids_only,
                              signatures.min_length(spec)):
        print(f"[export] note: {note}", file=sys.stderr)
    path = export(spec, FLAGS.model_base, FLAGS.model_name, FLAGS.version,
                  ids_only=FLAGS.ids_only, warmup=FLAGS.warmup)
    print(f"[export] {FLAGS.task} ({spec.task_name}, L={spec.max_seq_length}"
          f"{', ids only' if FLAGS.ids_only else ''}"
          f"{', bf16 kernels' if spec.precision == 'bf16' else ''}) -> {path} in "
          f"{time.monotonic() - t0:.1f}s", file=sys.stderr)
    note = emulated_bf16_note() if spec.precision == "bf16" else None
    if note:
        print(f"[export] {note}", file=sys.stderr)


def run():
    """The command line (`electra-export`). A SavedModel is TensorFlow's: the command
    runs Keras on TensorFlow whatever KERAS_BACKEND says (a JAX run's folder exports
    alike; under jax the signatures' tracing had failed with a traceback)."""
    cli.tensorflow_backend("export", "an export is built with Keras on TensorFlow")
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
