"""The query command: asks a model on TF Serving, over gRPC (default) or REST.

    python -m export.client --server=localhost:8500 --model_name=mine --text="a fine film"

(`python -m electra_tf.query` and `electra-query` are the same command.) Its
flags, limits and exit statuses: electra_tf/serving/client.py and docs/serving.md.
"""

from __future__ import annotations

import sys

from absl import app, flags

from electra_tf import cli
from electra_tf.serving.client import (
    ClientError,
    answer_json,
    check_timeout,
    predict_grpc,
    predict_rest,
    text_inputs,
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


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if not FLAGS.model_name:
        raise app.UsageError("--model_name is required")
    check_timeout(FLAGS.timeout)
    inputs = text_inputs(FLAGS.text, FLAGS.text_pair, FLAGS.question, FLAGS.context)
    try:
        call = predict_rest if FLAGS.rest else predict_grpc
        outputs = call(FLAGS.server, FLAGS.model_name, inputs, FLAGS.signature_name,
                       FLAGS.model_version, FLAGS.timeout)
    except ClientError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    print(answer_json(outputs))


def run():
    """The command line (`electra-query`); a bad flag: one line, exit 2."""
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
