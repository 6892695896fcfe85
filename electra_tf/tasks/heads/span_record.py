"""What a span head's finetuning_config.json must hold, without Keras: opening a
fine-tuned folder (`folders.FinetunedFolder.open`, results_table) checks a record
before any model is built, and had imported Keras and TensorFlow (seconds) to ask
the head's class. `span.SpanHead.record_lacks` is this function."""

from __future__ import annotations

from typing import Any, Mapping

# The FinetuningConfig fields a span head's record holds (squad.null_options).
NULL_FIELDS = ("squad_null_rule", "qa_na_threshold", "no_answer_threshold")
# A question-answering run's windows and decoding (FinetuningConfig's fields), which
# its export serves by default: the original's values, for a record written before
# they were recorded (every run had taken them).
WINDOW_DEFAULTS = {"max_query_length": 64, "doc_stride": 128, "max_answer_length": 30,
                   "n_best_size": 20}


def record_lacks(value: Mapping[str, Any]) -> list[str]:
    """The variant (never read as a default) and SQuAD 2.0's null rule fields a
    record `value` lacks."""
    missing = []
    if "head_options" in value and "span_head" not in value["head_options"]:
        missing.append("head_options.span_head")
    if "finetuning" in value:
        missing += [f"finetuning.{k}" for k in NULL_FIELDS if k not in value["finetuning"]]
    return missing
