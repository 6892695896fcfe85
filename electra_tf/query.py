"""The query command: asks a model on TF Serving, over gRPC (default) or REST.

    python -m export.client --server=localhost:8500 --model_name=mine --text="a fine film"

(`python -m electra_tf.query` and `electra-query` are the same command.) Its
flags, limits and exit statuses: electra_tf/serving/client.py and docs/serving.md.
"""

from __future__ import annotations

import sys

from absl import app, flags

from electra_tf import cli
from electra_tf.core.errors import InputError
from electra_tf.serving.client import (
    ClientError,
    answer_json,
    check_request,
    check_timeout,
    ids_inputs,
    ids_signature,
    predict_grpc,
    predict_rest,
    text_inputs,
    tokenized_inputs,
)

FLAGS = flags.FLAGS


def define_flags():
    """Flags of the command line (defined only when run as a program)."""
    flags.DEFINE_string("server", "localhost:8500", "HOST:PORT (gRPC 8500, REST 8501 by default).")
    flags.DEFINE_string("model_name", None, "Model name on the server.")
    flags.DEFINE_integer("model_version", None, "A specific version (default: the latest).")
    flags.DEFINE_string("signature_name", "serving_default", "Signature to call.")
    flags.DEFINE_bool("rest", False, "Use the REST API instead of gRPC.")
    flags.DEFINE_multi_string("text", [], "Input text(s) (token/sequence classification, "
                              "rtd, score: one per hypothesis).")
    flags.DEFINE_multi_string("text_pair", [], "Second text(s) for sentence-pair models.")
    flags.DEFINE_multi_string("question", [], "squad: question(s).")
    flags.DEFINE_multi_string("context", [], "squad: context(s).")
    flags.DEFINE_float("timeout", 30.0, "Seconds the whole request may take (> 0).")
    # An ids-only export (--ids_only): ids in, or text tokenized here.
    flags.DEFINE_multi_string("input_word_ids", [], "An ids-only model: one row of "
                              "comma-separated token ids (e.g. 2,1037,3); repeat for a batch.")
    flags.DEFINE_multi_string("input_mask", [], "With --input_word_ids: the row's mask "
                              "(default: 1 for every id).")
    flags.DEFINE_multi_string("input_type_ids", [], "With --input_word_ids: the row's segment "
                              "ids (default: 0 for every id).")
    flags.DEFINE_string("export_dir", None, "The export's version folder (MODEL_BASE/NAME/N): "
                        "--text (and the others) are tokenized here with its assets/vocab.txt "
                        "and casing and sent as ids (to an --ids_only export's serving_default, "
                        "a text export's serving_ids).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    check_request(FLAGS.server, FLAGS.model_name or "", FLAGS.rest, FLAGS.model_version,
                  FLAGS.signature_name)
    check_timeout(FLAGS.timeout)
    texts = FLAGS.text or FLAGS.text_pair or FLAGS.question or FLAGS.context
    if FLAGS.input_word_ids or FLAGS.input_mask or FLAGS.input_type_ids:
        if texts or FLAGS.export_dir:
            raise InputError("give --input_word_ids (an ids-only model's ids) or --text (and "
                             "the other text flags), not both")
        inputs = ids_inputs(FLAGS.input_word_ids, FLAGS.input_mask, FLAGS.input_type_ids)
    elif FLAGS.export_dir:
        notes = []
        inputs = tokenized_inputs(FLAGS.export_dir, FLAGS.text, FLAGS.text_pair,
                                  FLAGS.question, FLAGS.context, notes=notes)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    else:
        inputs = text_inputs(FLAGS.text, FLAGS.text_pair, FLAGS.question, FLAGS.context)
    signature = FLAGS.signature_name
    if FLAGS.export_dir:  # ids go where the export takes them (a text export's serving_ids)
        signature = ids_signature(FLAGS.export_dir, signature)
    try:
        call = predict_rest if FLAGS.rest else predict_grpc
        outputs = call(FLAGS.server, FLAGS.model_name, inputs, signature,
                       FLAGS.model_version, FLAGS.timeout)
    except ClientError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    cli.write_stdout(answer_json(outputs) + "\n")  # (a closed stdout: one line, status 1)


def run():
    """The command line (`electra-query`); a bad flag: one line, exit 2."""
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
