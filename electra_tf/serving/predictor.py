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
buckets and decoding), so a prediction here is the served one. It runs
eagerly: a call costs a second or so on a CPU, where tracing the graph first
would cost half a minute; for a stream of requests, export and serve. The
outputs and their names are the text signature's (docs/serving.md); `predict`
hands them back one dict per input, each cut to that input's words, tokens or
wordpieces.
"""

from __future__ import annotations

from typing import Sequence


class Predictor:
    """A model folder's model, tokenizer and text signature, for prediction on strings.

    Attributes:
      spec: the export's ServingSpec (model, tokenizer and the task's settings).
    """

    def __init__(self, spec):
        self.spec = spec
        self._function = None
        self._names: tuple[str, ...] = ()

    @classmethod
    def open(cls, folder: str, task: str | None = None, vocab_file: str = "", max_seq_length: int = 0,
             max_query_length: int = 64, max_answer_length: int = 30,
             precision: str = "fp32") -> Predictor:
        """Opens a model folder for prediction.

        Args:
          folder: a fine-tuned model_dir (run_finetuning's, or a converted
            transformers task model), or a pre-training model_dir (rtd).
          task: what to serve (export's --task); None: the folder's own (a
            fine-tuned folder's head; a pre-training folder's rtd).
          vocab_file, max_seq_length, max_query_length, max_answer_length, precision:
            as the export's flags of the same names (0 / "": the folder's); "bf16"
            predicts as the --precision=bf16 export does.
        Raises:
          InputError, ConfigError, VocabError: what the export refuses, in the same words.
        """
        import dataclasses

        from electra_tf.serving.export import check_precision, load_spec

        check_precision(precision)  # before the model is built
        spec = load_spec(task, folder, vocab_file, max_seq_length, max_query_length,
                         max_answer_length)
        return cls(dataclasses.replace(spec, precision=precision))

    @property
    def model(self):
        """The Keras model: FinetuningModel, or ElectraDiscriminator for rtd."""
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

        Args:
          *inputs: one list of strings per input name (`input_names`), of one length.
        Returns:
          {output name: array [batch, ...]} (docs/serving.md lists them).
        """
        import numpy as np
        import tensorflow as tf

        if self._function is None:
            from electra_tf.serving import signatures

            names, _, self._function = signatures.text_signature(self.spec)
            self._names = tuple(names)
        if len(inputs) != len(self._names):
            raise TypeError(f"a {self.task} model takes {len(self._names)} inputs "
                            f"({', '.join(self._names)}), got {len(inputs)}")
        for name, x in zip(self._names, inputs):
            if isinstance(x, (str, bytes)):  # had been a batch of its characters
                raise TypeError(f"{name} must be a list of strings, one per row, got a "
                                f"single {type(x).__name__} (predict takes one)")
        tensors = [tf.constant([_utf8(t) for t in x], tf.string) for x in inputs]
        result = {}
        for name, value in self._function(*tensors).items():
            value = value.numpy()
            if value.dtype == object:
                value = np.vectorize(lambda b: b.decode("utf-8", "replace"),
                                     otypes=[object])(value) \
                    if value.size else value.astype(str)
            result[name] = value
        return result

    def predict(self, *inputs: Sequence[str]) -> list[dict]:
        """One dict per input row: the text signature's outputs of that row, as Python
        values, its per-word outputs cut to its words and its per-position outputs
        to its tokens (wordpieces).

        Args:
          *inputs: one list of strings per input name (`input_names`); a single
            string (or bytes) for each input is one row.
        """
        single = [isinstance(x, (str, bytes)) for x in inputs]
        if inputs and all(single):
            return self.predict(*([x] for x in inputs))
        if any(single):  # "a", ["b", "c"]: no row count fits both
            raise TypeError("give every input as a single string (one row) or every one as "
                            "a list of strings, not a mix")
        out = self.outputs(*inputs)
        rows = []
        for i in range(len(inputs[0]) if inputs else 0):
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


def _utf8(text) -> bytes:
    """A str as UTF-8, a lone surrogate (JSON's "\\ud800", which has no UTF-8 form and
    which TensorFlow would not convert) as U+FFFD, one character for one, as the
    graph reads invalid UTF-8; bytes as they are."""
    if not isinstance(text, str):
        return text
    from electra_tf.text.cleaning import without_lone_surrogates

    return without_lone_surrogates(text).encode("utf-8")
