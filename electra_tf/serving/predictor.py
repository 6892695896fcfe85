"""Predictions on strings from Python: a model folder's serving graph, run in-process.

    from electra_tf import Predictor

    ner = Predictor.open("ner_small")          # a fine-tuned model_dir
    ner.predict(["John lives in Paris."])      # [{"word_texts": ["John", ...], ...}]
    ner.model, ner.tokenizer                   # the Keras model and the tokenizer

A `Predictor` is what the export serves, without TF Serving: `open` builds
the model from the folder as `export_saved_model` does (`export.load_spec`:
the folder opened once, its recorded head, label scale, null rule and
vocabulary), and `outputs` runs the text signature's own function
(`signatures.text_signature`: in-graph tokenization, packing, length
buckets and decoding), so a prediction here is the served one. The function
runs op by op (no tracing to wait for, a fixed cost of a few hundred
milliseconds a call on a CPU), or traced once into one graph as the export's
signature is (a few seconds once, then several times faster a call): by
default a `predict` of at least TRACE_BATCHES batches runs traced, every other
call op by op (`traced=` chooses; benchmarks/bench_predictor.py). The outputs
and their names are the text signature's (docs/serving.md); `predict` hands
them back one dict per input, each cut to that input's words, tokens or
wordpieces.
"""

from __future__ import annotations

import threading
from typing import Sequence

# Rows `predict` runs at once: a long list runs in batches of this many (its memory
# grows with the batch: about 5 MB a row of 512 positions even for a tiny model).
DEFAULT_BATCH_SIZE = 32

# A `predict` of at least this many batches runs the traced text graph by default: its
# few seconds of tracing repay after about that many op-by-op calls' fixed cost.
TRACE_BATCHES = 8


class Predictor:
    """A model folder's model, tokenizer and text signature, for prediction on strings.

    Attributes:
      spec: the export's ServingSpec (model, tokenizer and the task's settings).
      traced: True: every call runs the text graph traced into one tf.function (the
        first call traces it, a few seconds); False: every call op by op; None (the
        default): a `predict` of at least TRACE_BATCHES batches traced, every other call
        op by op. Tracing needs Keras on TensorFlow (under JAX, None runs op by op).
    """

    def __init__(self, spec, traced: bool | None = None):
        if not hasattr(spec, "model") or not hasattr(spec, "tokenizer"):
            # a folder's path had been taken, and failed at the first call
            raise TypeError(f"Predictor takes an export's ServingSpec, got "
                            f"{type(spec).__name__}: open a model folder with "
                            "Predictor.open(folder)")
        self.spec = spec
        self.traced = _checked_traced(traced)
        self._function = None  # the text function, op by op
        self._bucketed = None  # the BucketedModel it runs
        self._graph = None  # traced once, on the first traced call
        # Threads making their first calls together build these once (two builds had
        # left the function of one and the model of the other: bf16's kernels then
        # refreshed on a model the function did not run, a weight change unseen)
        self._setup = threading.Lock()

    @classmethod
    def open(cls, folder: str, task: str | None = None, vocab_file: str = "", max_seq_length: int = 0,
             max_query_length: int = 0, max_answer_length: int = 0,
             precision: str = "fp32", doc_stride: int = 0,
             traced: bool | None = None) -> Predictor:
        """Opens a model folder for prediction.

        Args:
          folder: a fine-tuned model_dir (run_finetuning's, or a converted
            transformers task model), or a pre-training model_dir (rtd; an
            Electric model's: score).
          task: what to serve (export's --task); None: the folder's own (a
            fine-tuned folder's head; a pre-training folder's rtd, an Electric
            one's score).
          vocab_file, max_seq_length, max_query_length, max_answer_length, precision,
          doc_stride: as the export's flags of the same names (0 / "": the folder's); "bf16"
            predicts as the --precision=bf16 export does.
          traced: whether calls run the text graph traced (see the class).
        Raises:
          InputError, ConfigError, VocabError: what the export refuses, in the same words.
        """
        import dataclasses
        import numbers

        from electra_tf.folders.files import checked_path
        from electra_tf.serving.export import check_precision, load_spec

        folder = checked_path(folder, "folder")
        for name, value in (("max_seq_length", max_seq_length),
                            ("max_query_length", max_query_length),
                            ("max_answer_length", max_answer_length),
                            ("doc_stride", doc_stride)):
            # 16.0 had passed the range check and failed in TensorFlow's indexing
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"{name} must be a whole number, got {value!r}")
        max_seq_length, max_query_length, max_answer_length, doc_stride = (
            int(max_seq_length), int(max_query_length), int(max_answer_length), int(doc_stride))
        check_precision(precision)  # before the model is built
        traced = _checked_traced(traced)
        import keras

        from electra_tf.core.errors import InputError

        if keras.backend.backend() not in ("tensorflow", "jax"):  # (had failed in its call)
            raise InputError(f"a Predictor runs Keras on tensorflow or jax; this Python "
                             f"session runs Keras on {keras.backend.backend()} (KERAS_BACKEND "
                             "or ~/.keras/keras.json)")
        spec = load_spec(task, folder, vocab_file, max_seq_length, max_query_length,
                         max_answer_length, what="folder", doc_stride=doc_stride)
        from electra_tf.tasks import heads

        # (taken and ignored before; the export command says so in a note)
        taken = {f.name for f in dataclasses.fields(heads.head_class(spec.task).ServingOptions)}
        unused = [name for name, value in (("max_query_length", max_query_length),
                                           ("max_answer_length", max_answer_length),
                                           ("doc_stride", doc_stride))
                  if value and name not in taken]
        if unused:
            raise ValueError(f"{', '.join(unused)}: option(s) of question answering; a "
                             f"{spec.task} model has no question or answer")
        return cls(dataclasses.replace(spec, precision=precision), traced=traced)

    @property
    def model(self):
        """The Keras model: FinetuningModel, or ElectraDiscriminator for rtd and score."""
        return self.spec.model

    @property
    def tokenizer(self):
        """The folder's tokenizer (electra_tf.text.tokenizer.Tokenizer)."""
        return self.spec.tokenizer

    @property
    def task(self) -> str:
        """What it predicts: its head's name (tasks/heads/, the export's --task)."""
        return self.spec.task

    @property
    def input_names(self) -> tuple[str, ...]:
        """The inputs `predict` takes, in order (text; text, text_pair; question, context)."""
        return tuple(self.spec.head.text_inputs(self.spec.pair))

    def outputs(self, *inputs: Sequence[str]) -> dict:
        """The text signature's outputs for a batch, as NumPy arrays (strings as str).

        The inputs run as one batch, as one request to the export does (`predict`
        runs a long list in batches).

        Args:
          *inputs: one list of strings per input name (`input_names`), of one length.
        Returns:
          {output name: array [batch, ...]} (docs/serving.md lists them).
        Raises:
          TypeError, ValueError: inputs that are not that (one line naming the input).
        """
        return self._run(self._checked(inputs), traced=bool(self.traced))

    def predict(self, *inputs: Sequence[str], batch_size: int = DEFAULT_BATCH_SIZE) -> list[dict]:
        """One dict per input row: the text signature's outputs of that row, as Python
        values, its per-word outputs cut to its words and its per-position outputs
        to its tokens (wordpieces).

        Args:
          *inputs: one list of strings per input name (`input_names`); a single
            string (or bytes) for each input is one row.
          batch_size: rows run at once (a long list runs in batches of this many, so
            that memory stays bounded; each row's outputs do not depend on it, to float32
            rounding). A list of at least TRACE_BATCHES batches runs the traced graph
            unless the Predictor's `traced` is False.
        Raises:
          TypeError, ValueError: inputs that are not that, or a batch_size below 1.
        """
        import numbers

        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) \
                or batch_size < 1:
            raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}")
        single = [isinstance(x, _TEXT) for x in inputs]
        if inputs and all(single):
            return self.predict(*([x] for x in inputs), batch_size=batch_size)
        if any(single):  # "a", ["b", "c"]: no row count fits both
            for name, x in zip(self.input_names, inputs):
                if x is None or isinstance(x, numbers.Number):  # not a list at all
                    raise TypeError(f"{name} must be a string or a list of strings, got "
                                    f"{type(x).__name__}")
            raise TypeError("give every input as a single string (one row) or every one as "
                            "a list of strings, not a mix")
        columns, batch_size = self._checked(inputs), int(batch_size)
        count = len(columns[0])
        traced = self.traced
        if traced is None:
            import keras

            traced = (-(-count // batch_size) >= TRACE_BATCHES
                      and keras.backend.backend() == "tensorflow")
        rows = []
        for start in range(0, count, batch_size):
            out = self._run([c[start:start + batch_size] for c in columns], traced)
            rows += self._rows(out, min(batch_size, len(columns[0]) - start))
        return rows

    def _checked(self, inputs) -> list[list]:
        """`inputs` as one list of str/bytes per input name, of one length.

        Raises:
          TypeError: the wrong number of inputs, or one that is not a sequence of strings.
          ValueError: inputs of different lengths.
        """
        from collections.abc import Mapping, Set

        names = self.input_names
        if len(inputs) != len(names):
            raise TypeError(f"a {self.task} model takes {len(names)} inputs "
                            f"({', '.join(names)}), got {len(inputs)}")
        columns = []
        for name, x in zip(names, inputs):
            if isinstance(x, _TEXT):  # had been a batch of its characters (of ints: bytes)
                raise TypeError(f"{name} must be a list of strings, one per row, got a "
                                f"single {type(x).__name__} (predict takes one)")
            if hasattr(x, "columns") or getattr(x, "ndim", 1) != 1:
                # a DataFrame had given its column names as the rows, a 2-D array its rows
                raise TypeError(f"{name} must be a list of strings, one per row, got "
                                f"{type(x).__name__} of {getattr(x, 'ndim', 2)} dimensions"
                                + (" (give one of its columns, df['text'])"
                                   if hasattr(x, "columns") else ""))
            try:  # a dict had given its keys, a set its rows in no order
                column = None if isinstance(x, (Mapping, Set)) else list(x)
            except TypeError:  # None, a number, a 0-d array
                column = None
            if column is None:
                raise TypeError(f"{name} must be a list of strings, one per row, got "
                                f"{type(x).__name__}")
            for i, text in enumerate(column):
                if not isinstance(text, _TEXT):
                    raise TypeError(f"{name}[{i}] must be a string (str or UTF-8 bytes), got "
                                    f"{type(text).__name__}")
            columns.append(column)
        lengths = {len(c) for c in columns}
        if len(lengths) > 1:
            raise ValueError("the inputs must be of one length (one string each per row), got "
                             + ", ".join(f"{len(c)} {n}" for n, c in zip(names, columns)))
        return columns

    def _run(self, columns: list[list], traced: bool) -> dict:
        """The text signature's outputs for checked columns (`_checked`), as NumPy arrays,
        from its function op by op or `traced`."""
        import numpy as np
        import tensorflow as tf

        from electra_tf.core.tracing import OwnTraceCount

        if self._function is None:
            from electra_tf.serving import signatures

            with self._setup:
                if self._function is None:
                    bucketed = signatures.bucketed_model(self.spec)
                    _, _, function = signatures.text_signature(self.spec, bucketed)
                    self._bucketed, self._function = bucketed, function  # (read unlocked:
                    # _function last)
        if self._bucketed.kernels is not None:  # bf16: the model's kernels as they are now
            self._bucketed.kernels.refresh()  # (made once, a weight changed after the first
            # call had gone unseen in the products and been read everywhere else)
        function = self._function
        if traced:
            with self._setup:
                if self._graph is None:  # one graph for every batch size (the export's specs)
                    self._graph = tf.function(OwnTraceCount(self._function), input_signature=[
                        tf.TensorSpec([None], tf.string) for _ in columns])
            function = self._graph
        tensors = [tf.constant([_utf8(t) for t in c], tf.string) for c in columns]
        result = {}
        for name, value in function(*tensors).items():
            value = value.numpy()
            if value.dtype == object and value.size:  # (an empty batch's stay object too)
                value = np.vectorize(lambda b: b.decode("utf-8", "replace"),
                                     otypes=[object])(value)
            result[name] = value
        return result

    def _rows(self, out: dict, count: int) -> list[dict]:
        """`predict`'s dicts of the first `count` rows of a batch's outputs."""
        rows = []
        for i in range(count):
            words = int(out["num_words"][i]) if "num_words" in out else None
            tokens = None
            for key in ("wordpiece_tokens", "tokens"):
                if key in out:
                    tokens = sum(1 for t in out[key][i] if t != "")
            row = {}
            for name, value in out.items():
                value = value[i]
                if name.startswith("word_"):
                    value = value[:words]
                elif name in self.spec.head.text_fills:
                    value = value[:tokens]
                row[name] = value.tolist() if hasattr(value, "tolist") else value
            rows.append(row)
        return rows


def _checked_traced(traced) -> bool | None:
    """`traced` as a bool or None (numpy's bool too).

    Raises:
      TypeError: another value. ValueError: True where Keras runs on another backend.
    """
    import numpy as np

    if traced is not None and not isinstance(traced, (bool, np.bool_)):
        raise TypeError(f"traced must be True, False or None, got {traced!r}")
    if traced:
        import keras

        if keras.backend.backend() != "tensorflow":
            raise ValueError("traced=True needs Keras on TensorFlow (the text graph with "
                             f"the model in it), not {keras.backend.backend()}: give "
                             "traced=None or False")
    return None if traced is None else bool(traced)


# What a text may be: a str, or UTF-8 bytes (a bytearray's too).
_TEXT = (str, bytes, bytearray)


def _utf8(text) -> bytes:
    """A str as UTF-8, a lone surrogate (JSON's "\\ud800", which has no UTF-8 form and
    which TensorFlow would not convert) as U+FFFD, one character for one, as the
    graph reads invalid UTF-8; bytes (and a bytearray's) as they are."""
    if not isinstance(text, str):
        return bytes(text)
    from electra_tf.text.cleaning import without_lone_surrogates

    return without_lone_surrogates(text).encode("utf-8")
