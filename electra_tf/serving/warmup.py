"""assets.extra/tf_serving_warmup_requests: a TFRecord of PredictionLog protos.

TF Serving replays these requests when it loads a version, so the first real
request does not pay for graph warmup. Each record is a
tensorflow_serving.apis.prediction_log_pb2.PredictionLog holding a
PredictLog.request (a PredictRequest): batch 1 and batch 4 requests to
serving_default, with a non-ASCII text among them, and then, for each length
bucket (info["length_buckets"]), a batch-1 request that fills it, to every
signature (serving_default and, in a text export, serving_ids).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

WARMUP_FILE = "tf_serving_warmup_requests"

_TEXTS = ["The discriminator learns which token was replaced.",
          "Zoë visited Zürich and 東京 in 2020.",
          "", "A short one."]
_QUESTIONS = ["Which token was replaced?", "Who visited Zürich?", "", "What?"]


def example_inputs(info: dict, max_seq_length: int, batch: int) -> dict[str, np.ndarray]:
    """Inputs of the serving_default signature for a warmup request of `batch` rows."""
    names = info["signatures"]["serving_default"]
    if names[0] == "input_word_ids":
        # [CLS] [UNK]... [SEP], with the vocab's own special ids.
        length = min(8, max_seq_length)
        ids = np.zeros([batch, length], np.int32)
        ids[:, 0], ids[:, 1:length - 1], ids[:, length - 1] = (
            info["cls_id"], info["unk_id"], info["sep_id"])
        return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
                "input_type_ids": np.zeros_like(ids)}
    texts = np.array([(_TEXTS * batch)[i].encode() for i in range(batch)], object)
    if names == ["question", "context"]:
        questions = np.array([(_QUESTIONS * batch)[i].encode() for i in range(batch)], object)
        return {"question": questions, "context": texts}
    out = {"text": texts}
    if "text_pair" in names:
        out["text_pair"] = texts[::-1].copy()
    return out


def bucket_inputs(info: dict, signature: str, length: int) -> dict[str, np.ndarray]:
    """A batch-1 request to `signature` whose packed sequence is `length` positions.

    Texts are single letters, each one piece whatever the vocabulary (a letter
    is in it, or it is [UNK]); ids are [CLS] [UNK]... [SEP].
    """
    names = info["signatures"][signature]
    if names[0] == "input_word_ids":
        ids = np.full([1, length], info["unk_id"], np.int32)
        ids[0, 0], ids[0, -1] = info["cls_id"], info["sep_id"]
        return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
                "input_type_ids": np.zeros_like(ids)}

    def words(n):
        return np.array([" ".join(["x"] * max(n, 0)).encode()], object)

    if names == ["question", "context"]:  # [CLS] q [SEP] context [SEP]
        return {"question": words(1), "context": words(length - 4)}
    if "text_pair" in names:  # [CLS] a [SEP] b [SEP]; an empty b packs a alone
        if length >= 4:
            return {"text": words(length - 4), "text_pair": words(1)}
        return {"text": words(length - 2), "text_pair": words(0)}
    return {"text": words(length - 2)}


def prediction_log(model_name: str, inputs: dict[str, np.ndarray],
                   signature_name: str = "serving_default") -> prediction_log_pb2.PredictionLog:
    request = predict_pb2.PredictRequest(
        model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature_name))
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request))


def build_logs(model_name: str, info: dict, max_seq_length: int):
    """The warmup records (see the module docstring)."""
    logs = [prediction_log(model_name, example_inputs(info, max_seq_length, b)) for b in (1, 4)]
    for length in info["length_buckets"]:
        for signature in info["signatures"]:
            logs.append(prediction_log(model_name, bucket_inputs(info, signature, length),
                                       signature))
    return logs


def write(path: str, logs) -> None:
    with tf.io.TFRecordWriter(path) as writer:
        for log in logs:
            writer.write(log.SerializeToString())


def read(path: str) -> list[prediction_log_pb2.PredictionLog]:
    """Parses the warmup file (raises on a record that is not a PredictionLog)."""
    logs = []
    for record in tf.data.TFRecordDataset(path):
        log = prediction_log_pb2.PredictionLog()
        log.ParseFromString(record.numpy())
        if not log.HasField("predict_log"):
            raise ValueError(f"{path}: a warmup record without a predict_log")
        logs.append(log)
    return logs


def request_inputs(log) -> dict[str, np.ndarray]:
    """A PredictionLog's request inputs as numpy arrays."""
    return {k: tf.make_ndarray(v) for k, v in log.predict_log.request.inputs.items()}
