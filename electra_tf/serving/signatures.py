"""The exported endpoints: one keras.export.ExportArchive per SavedModel.

`build_archive(spec)` keeps the vocab file in the SavedModel (an asset, copied
to assets/vocab.txt) and adds two endpoints; the model's variables and the
tokenizer's constants are saved as what the endpoints use:

  serving_default  text in (the head's inputs: Head.text_inputs), decoded outputs
  serving_ids      input_word_ids / input_mask / input_type_ids int32 [B, L] in

Output names: each head's own (its class in tasks/heads/, whose docstring
lists them; docs/serving.md has the table). The text signature adds
truncated (bool [B]): the input did not fit max_seq_length. The head packs
the text signature's rows (`Head.pack_texts`): one per request, or, for the
span head, one per window of a long context (every doc_stride pieces), which
its text outputs decode back to one answer per request.

Length buckets: each row runs the model on only the positions it needs. The
text signature packs a batch to the shortest length bucket that holds its
longest row (info["length_buckets"], by default 8, 16, 24, 32, 48, 64, 96, 128, 192, ...
below L, then L: graph.length_buckets); then, in both signatures, BucketedModel runs each
row on the shortest bucket that holds the last position its input_mask marks,
the rows of one bucket together. Per-position outputs keep the widths above
(L, or the request's seq). Past a row's bucket (padding only) the raw logits
are MODEL_FILLS (0; span logits MASK_LOGIT, as the model gives padding) and
the text outputs their padding values. At every position a request holds, the
outputs are those of the full window. tag_probabilities and tag_scores are 0
at padding.

Bad input is refused in-graph with an InvalidArgument error whose message
names the signature and the input (check_text_inputs, check_ids_inputs): TF
Serving checks no input shape (only names and dtypes), and grappler drops
checks that a declared shape makes look redundant, so the graph's inputs have
an unknown shape and their rank is asserted before any op reads them (a
scalar string would crash TF-Text's normalizer, and a [B, K] one would be
tokenized as B ragged rows). The signature defs declare the shapes all the
same (`declare_input_shapes`, which export() runs on what it writes): texts
[batch] strings, ids [batch, seq] int32, as `saved_model_cli show` and the
server's model metadata list them.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.core.errors import InputError
from electra_tf.serving import encoder as serving_encoder
from electra_tf.serving import graph
from electra_tf.tasks import heads
from electra_tf.tasks.model import output_layout
from electra_tf.text.vocab import tokens_sha256

IDS_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


class _Assets(tf.Module):
    """Holds the vocab as a SavedModel asset (copied to assets/)."""

    def __init__(self, vocab_file: str):
        super().__init__(name="assets")
        self.vocab_file = tf.saved_model.Asset(vocab_file)


def _save_with(archive, name: str, trackable) -> None:
    """Saves `trackable` in the archive's SavedModel, as the root's attribute `name`.

    `archive.track()` keeps only the Keras variables and the TrackableResources
    (lookup tables) found under what it is given, and a tf.saved_model.Asset is
    neither: a tracked module holding one is left out at write_out, and no
    assets/vocab.txt is written. Keras 3 has no public call that adds an object
    to the SavedModel's root, so this sets it on the archive's private root
    object (`_tf_trackable`, what write_out passes to tf.saved_model.save).
    """
    setattr(archive._tf_trackable, name, trackable)


def _add_endpoint(archive, name: str, fn, input_signature) -> None:
    """archive.add_endpoint(name, fn, input_signature), traced once.

    add_endpoint wraps `fn` in a tf.function. write_out traces it to list the
    variables it uses, and tf.saved_model.save traces it again: a trace's cache
    key holds the save context's variable policy, so the first trace is not
    reused. Tracing the text signature is most of an export's time. The root's
    attribute is replaced by the first trace's ConcreteFunction, which write_out
    lists and tf.saved_model.save writes as it is (its signature and the
    function both). Like _save_with, this sets the archive's private root object.
    """
    traced = archive.add_endpoint(name, fn, input_signature).get_concrete_function()
    setattr(archive._tf_trackable, name, traced)


def _checked_rank(tensor, name: str, rank: int, signature: str, what: str):
    """`tensor` after a run-time check of its rank.

    A reshape to its own shape (a no-op) after the check records the rank in
    the graph itself, for grappler and the ops downstream (Tensor.set_shape is
    not saved). Not tf.ensure_shape: grappler lets that run before the check,
    which turns the message into "Shape of tensor ... is not compatible".
    """
    check = tf.debugging.assert_rank(
        tensor, rank, message=f"{signature}: input {name} must be {what}")
    with tf.control_dependencies([check] if check is not None else []):
        shape = tf.shape(tensor)
        return tf.reshape(tensor, tf.stack([shape[i] for i in range(rank)]))


def check_text_inputs(names, texts, signature: str = "serving_default") -> list:
    """The text inputs after in-graph checks: each is 1-D, and a pair has one batch size.

    Raises (when the signature runs) InvalidArgument naming the input. Every op
    that reads a text depends on the checks (none sees a scalar or a matrix).
    """
    what = "a 1-D string tensor of shape [batch] (one string per example)"
    texts = [_checked_rank(t, n, 1, signature, what) for n, t in zip(names, texts)]
    if len(texts) == 2:
        check = tf.debugging.assert_equal(
            tf.shape(texts[0])[0], tf.shape(texts[1])[0],
            message=f"{signature}: inputs {names[0]} and {names[1]} must have the same "
                    "batch size")
        with tf.control_dependencies([check]):
            texts = [tf.identity(t) for t in texts]
    return texts


def check_ids_inputs(spec, word_ids, mask, type_ids, signature: str = "serving_ids"):
    """The ids inputs after in-graph checks (InvalidArgument naming the input otherwise).

    input_word_ids [B, S] int32 with 0 <= id < vocab_size (a negative id would
    read another row: Keras' embedding lookup wraps it); input_mask and
    input_type_ids of the same shape (they would be broadcast); mask values
    0 or 1; 0 <= type id < type_vocab_size; S <= max_position_embeddings.
    """
    config = spec.model.encoder.config
    what = "a 2-D int32 tensor of shape [batch, seq]"
    names = IDS_INPUTS
    word_ids, mask, type_ids = (_checked_rank(t, n, 2, signature, what)
                                for n, t in zip(names, (word_ids, mask, type_ids)))
    shape = tf.shape(word_ids)
    v, t, p = config.vocab_size, config.type_vocab_size, config.max_position_embeddings

    def msg(text):
        return f"{signature}: {text}"

    checks = [
        tf.debugging.assert_equal(tf.shape(mask), shape, message=msg(
            "input_mask must have the shape of input_word_ids [batch, seq]")),
        tf.debugging.assert_equal(tf.shape(type_ids), shape, message=msg(
            "input_type_ids must have the shape of input_word_ids [batch, seq]")),
        tf.debugging.assert_less_equal(shape[1], p, message=msg(
            f"input_word_ids must have at most {p} positions (seq)")),
        tf.debugging.assert_positive(shape[1], message=msg(
            "input_word_ids must have at least 1 position (seq), the [CLS] token")),
        tf.debugging.assert_non_negative(word_ids, message=msg(
            f"input_word_ids must hold ids in [0, {v}) (the vocab size)")),
        tf.debugging.assert_less(word_ids, v, message=msg(
            f"input_word_ids must hold ids in [0, {v}) (the vocab size)")),
        tf.debugging.assert_non_negative(type_ids, message=msg(
            f"input_type_ids must hold ids in [0, {t}) (the type vocab size)")),
        tf.debugging.assert_less(type_ids, t, message=msg(
            f"input_type_ids must hold ids in [0, {t}) (the type vocab size)")),
        tf.debugging.assert_non_negative(mask, message=msg(
            "input_mask must hold only 0 and 1")),
        tf.debugging.assert_less_equal(mask, 1, message=msg(
            "input_mask must hold only 0 and 1")),
    ]
    with tf.control_dependencies(checks):
        return tuple(tf.identity(x) for x in (word_ids, mask, type_ids))


def _model_outputs(spec, word_ids, mask, type_ids, model=None):
    """The model's outputs: `model` (a BucketedModel), or spec.model on the whole window."""
    if model is not None:
        return model(word_ids, mask, type_ids)
    inputs = {"input_ids": word_ids, "input_mask": mask, "segment_ids": type_ids}
    return spec.model(inputs, training=False)


def ids_outputs(spec, word_ids, mask, type_ids, model=None) -> dict:
    """The ids signature's outputs (the head's, `Head.ids_outputs`); model: _model_outputs'."""
    out = _model_outputs(spec, word_ids, mask, type_ids, model)
    return spec.head.ids_outputs(spec, out, word_ids, mask, type_ids, graph)


# The model's per-position outputs past a row's bucket (BucketedModel), every head's.
MODEL_FILLS = {k: v for cls in heads.head_classes() for k, v in cls.model_fills.items()}
_UNSERVED = ("sequence_output", "pooled_output")  # the discriminator's, unused here


def min_length(spec) -> int:
    """The fewest positions the model takes (the head's: a beam needs beam_size)."""
    return spec.head.min_length(spec)


def _bfloat16_kernels(spec):
    """The Bfloat16Kernels of spec.model's encoder for spec.precision "bf16", else None.

    Raises:
      InputError: bf16 for a model the serving encoder does not run (one whose
        mixed-precision policy sets its own casts, or of another kind).
    """
    if spec.precision != "bf16":
        return None
    if not serving_encoder.runs_serving_encoder(spec.model):
        raise InputError(f"--precision=bf16 is for a float32 fine-tuned or rtd model; the "
                         f"{spec.task} export of this one runs its Keras layers (give "
                         "--precision=fp32)")
    return serving_encoder.Bfloat16Kernels(spec.model.encoder)


class BucketedModel:
    """spec.model run on each row's length bucket, rows of one bucket in one call.

    A row's bucket is the shortest of `buckets` that holds the last position its
    input_mask marks, at least min_length(spec), and at most the batch's width W
    (the ids signature may send fewer or more positions than max_seq_length;
    rows longer than every bucket run at W). The buckets present in the batch
    run one after another in a tf.while_loop (one copy of the model in the
    graph), and the outputs come back in row order: those with a position axis
    are [B, W, ...], with MODEL_FILLS past each row's bucket. The encoder runs
    as serving_encoder's graph.
    """

    def __init__(self, spec, buckets: tuple[int, ...]):
        self.model = spec.model
        self.kernels = _bfloat16_kernels(spec)
        self.buckets = tuple(buckets)
        self.min_length = min_length(spec)
        self.fills = spec.head.model_fills
        self.outputs = output_layout(spec.model, _UNSERVED)  # name: (dtype, rank, positional)

    def __call__(self, word_ids, mask, type_ids) -> dict:
        seq = tf.shape(word_ids)[1]
        used = tf.reduce_max(tf.where(mask > 0, tf.range(1, seq + 1)[None, :], 0), axis=1)
        width = tf.maximum(graph.bucket_width(self.buckets, used, seq), self.min_length)
        widths, group = tf.unique(width)
        # An empty batch still runs once (on no rows), so that every output has a value.
        widths = tf.concat([widths, [tf.maximum(seq, self.min_length)]], 0)
        steps = tf.maximum(tf.size(widths) - 1, 1)
        arrays = {k: tf.TensorArray(dtype, size=steps, infer_shape=False,
                                    element_shape=tf.TensorShape([None] * rank))
                  for k, (dtype, rank, _) in self.outputs.items()}
        rows_array = tf.TensorArray(tf.int32, size=steps, infer_shape=False,
                                    element_shape=tf.TensorShape([None]))

        def step(i, rows_array, arrays):
            rows = tf.cast(tf.where(tf.equal(group, i))[:, 0], tf.int32)
            w = widths[i]
            inputs = {name: graph.pad_positions(tf.gather(x, rows), w, 0)
                      for name, x in (("input_ids", word_ids), ("input_mask", mask),
                                      ("segment_ids", type_ids))}
            out = serving_encoder.model_outputs(self.model, inputs, self.kernels)
            for k, (_, _, positional) in self.outputs.items():
                value = out[k]
                if positional:
                    value = graph.pad_positions(value, seq, self.fills.get(k, 0))
                arrays[k] = arrays[k].write(i, value)
            return i + 1, rows_array.write(i, rows), arrays

        _, rows_array, arrays = tf.while_loop(lambda i, *_: i < steps, step,
                                              (tf.constant(0), rows_array, arrays))
        inverse = tf.math.invert_permutation(rows_array.concat())
        result = {}
        for k, array in arrays.items():
            value = tf.gather(array.concat(), inverse)
            value.set_shape([None] * self.outputs[k][1])
            result[k] = value
        return result


def text_outputs(spec, packer: graph.Packer, *texts, model=None) -> dict:
    """The text signature's outputs (the head's, `Head.text_outputs`, and truncated);
    texts: checked [B] strings; model: _model_outputs'."""
    if len(texts) == 2:  # one tokenizer call for both (half the graph)
        batch = tf.shape(texts[0])[0]
        both = packer.tokenize(tf.concat(texts, axis=0))
        tokenized = [list(x) for x in zip(*(graph.split_rows(x, batch) for x in both))]
    else:
        tokenized = [packer.tokenize(texts[0])]
    packed = spec.head.pack_texts(spec, packer, tokenized, graph)
    word_ids, mask, type_ids = (packed[k] for k in IDS_INPUTS)
    out = _model_outputs(spec, word_ids, mask, type_ids, model)
    result = spec.head.text_outputs(spec, packer, tokenized, packed, out, graph)
    return {**result, "truncated": packed["truncated"]}


def bucketed_model(spec) -> BucketedModel:
    """A BucketedModel on spec's length buckets (what the text signature runs)."""
    return BucketedModel(spec, graph.length_buckets(spec.max_seq_length, spec.length_buckets,
                                                    min_length(spec)))


def text_signature(spec, model=None):
    """The text signature, as `build_archive` serves it (and the Python API's
    `Predictor` runs it): its input names, the Packer its graph tokenizes with,
    and function(*texts) -> outputs (inputs checked, then `text_outputs`).

    Args:
      model: the BucketedModel to run (default: `bucketed_model(spec)`).
    """
    if model is None:
        model = bucketed_model(spec)
    names = spec.head.text_inputs(spec.pair)
    packer = graph.Packer(spec.tokenizer, spec.max_seq_length, spec.length_buckets,
                          min_length(spec))

    def checked(*texts):
        return text_outputs(spec, packer, *check_text_inputs(names, texts), model=model)

    return names, packer, checked


def build_archive(spec, ids_only: bool = False, vocab_file: str | None = None):
    """An ExportArchive with the endpoints (see the module docstring) and an info dict.

    Args:
      vocab_file: the file the SavedModel keeps as its vocabulary asset (default:
        the tokenizer's); an asset keeps its file's name, and clients read
        assets/vocab.txt, so export() passes a copy named vocab.txt.

    Both signatures check their inputs in-graph (check_text_inputs,
    check_ids_inputs) and pad each batch to its length bucket
    (spec.length_buckets, see graph.length_buckets); info["length_buckets"]
    lists them.
    """
    archive = keras.export.ExportArchive()
    # Not archive.track(spec.model): that saves every weight twice (the Keras
    # variables and, as the endpoints' captures, their tf.Variables: 2x the
    # size). The endpoints' variables are tracked without it.
    if not spec.model.built:
        raise ValueError("the model must be built before export")
    _save_with(archive, "vocab_assets", _Assets(vocab_file or spec.tokenizer.vocab_file))
    # Unknown shapes: see the module docstring (the checks assert the ranks).
    ids_spec = [tf.TensorSpec(None, tf.int32, name=n) for n in IDS_INPUTS]
    ids_signature = "serving_default" if ids_only else "serving_ids"

    def ids_fn(input_word_ids, input_mask, input_type_ids):
        inputs = check_ids_inputs(spec, input_word_ids, input_mask, input_type_ids,
                                  signature=ids_signature)
        return ids_outputs(spec, *inputs, model=model)

    buckets = graph.length_buckets(spec.max_seq_length, spec.length_buckets, min_length(spec))
    model = BucketedModel(spec, buckets)
    if model.kernels is not None:  # kept by the root (the endpoints hold them weakly)
        _save_with(archive, "bf16_kernels", model.kernels)
    info = {"task": spec.task, "task_name": spec.task_name, "max_seq_length": spec.max_seq_length,
            "label_names": list(spec.label_names),
            "do_lower_case": spec.tokenizer.do_lower_case,
            "strip_accents": spec.tokenizer.strip_accents, "ids_only": ids_only,
            "cls_id": spec.tokenizer.cls_id, "sep_id": spec.tokenizer.sep_id,
            "unk_id": spec.tokenizer.unk_id, "pad_id": spec.tokenizer.pad_id,
            "length_buckets": list(buckets), "precision": spec.precision, "signatures": {},
            # assets/vocab.txt's identity, which a client tokenizing with it checks
            "vocab_sha256": tokens_sha256(spec.tokenizer.vocab),
            # the texts the model reads (also of an ids-only export, whose client packs
            # them: client.tokenized_inputs)
            "text_inputs": list(spec.head.text_inputs(spec.pair))}
    info.update(spec.head.export_info(spec))
    if ids_only:  # the text signature's windows: an ids-only export answers each row as sent
        info.pop("doc_stride", None)
    if not ids_only:
        names, packer, checked = text_signature(spec, model)
        archive.track(packer)  # saves any lookup table under it (FastBertTokenizer has none)
        text_spec = [tf.TensorSpec(None, tf.string, name=n) for n in names]

        if len(names) == 1:
            def text_fn(text):
                return checked(text)
        elif names[0] == "question":
            def text_fn(question, context):
                return checked(question, context)
        else:
            def text_fn(text, text_pair):
                return checked(text, text_pair)
        _add_endpoint(archive, "serving_default", text_fn, text_spec)
        _add_endpoint(archive, "serving_ids", ids_fn, ids_spec)
        info["signatures"]["serving_default"] = list(names)
        info["signatures"]["serving_ids"] = list(IDS_INPUTS)
    else:
        _add_endpoint(archive, "serving_default", ids_fn, ids_spec)
        info["signatures"]["serving_default"] = list(IDS_INPUTS)
    return archive, info


# === The declared input shapes ===
def declare_input_shapes(export_dir: str) -> dict:
    """Declares every signature input's shape in the written SavedModel's signature defs
    (what `saved_model_cli show` and the server's model metadata list): the texts
    [batch] strings, input_word_ids / input_mask / input_type_ids [batch, seq] int32
    (seq at most the model's positions, which the graph checks). The dtypes are the
    endpoints' own; the outputs are left as they are.

    Only the signature defs' TensorInfo changes: the graph's placeholders keep an
    unknown shape (build_archive), because grappler takes a placeholder's declared
    shape as given and would drop the in-graph rank checks, and neither TF Serving
    nor a Session checks a fed tensor's shape against it (see the module docstring).

    Returns:
      {signature: {input: (dtype name, shape)}} as declared.
    """
    import os

    from tensorflow.core.protobuf import saved_model_pb2

    from electra_tf.core.fileio import write_bytes

    path = os.path.join(export_dir, "saved_model.pb")
    saved = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        saved.ParseFromString(f.read())
    declared = {}
    for meta in saved.meta_graphs:
        for name, signature in meta.signature_def.items():
            if name.startswith("__"):  # __saved_model_init_op
                continue
            for key, info in signature.inputs.items():
                rank = 2 if key in IDS_INPUTS else 1
                want = tf.int32 if key in IDS_INPUTS else tf.string
                if info.dtype != want.as_datatype_enum:
                    raise ValueError(f"{name}: input {key} is {tf.as_dtype(info.dtype).name}, "
                                     f"not {want.name}")
                info.tensor_shape.Clear()
                for _ in range(rank):
                    info.tensor_shape.dim.add().size = -1
                declared.setdefault(name, {})[key] = (want.name, [-1] * rank)
    write_bytes(path, saved.SerializeToString())
    return declared
