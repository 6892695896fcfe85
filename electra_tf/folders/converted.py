"""The folder a conversion writes (`convert --from=tf1|hf`, electra_tf/interop/).

A converted folder is a pre-training folder (`pretraining.py`; a transformers
task model: a fine-tuned folder too, `finetuned.py`, beside the
discriminator's files), read as one, plus

    conversion_report.json    what was assigned, skipped and left at its
                              initial value (one key per import when several
                              imports share the folder: pretraining, masked_lm, ...)

`ConvertedFolder` writes it, one call per part; interop/ names no file of it.
"""

from __future__ import annotations

import dataclasses
import os

from electra_tf.folders import finetuned, pretraining
from electra_tf.folders.files import CHECKPOINTS, CONVERSION_REPORT, read_json, write_json
from electra_tf.folders.vocabulary import copy_vocab, copy_vocab_file, write_vocab_tokens


@dataclasses.dataclass(frozen=True)
class ConvertedFolder:
    """The output folder of a conversion (made when the first part is written)."""

    path: str

    def __post_init__(self):
        os.makedirs(self.path, exist_ok=True)

    # === The vocabulary (each returns the kept copy's path, or "") ===
    def keep_vocab_file(self, vocab_file: str) -> str:
        """Copies `vocab_file` in as its vocab.txt."""
        return copy_vocab_file(vocab_file, self.path)

    def keep_vocab_beside(self, source_dir: str) -> str:
        """Copies source_dir's vocab.txt in, where there is one ("" where not)."""
        return copy_vocab(source_dir, self.path)

    def keep_vocab_tokens(self, tokens: list[str]) -> str:
        """Writes `tokens` (in id order) as its vocab.txt."""
        return write_vocab_tokens(self.path, tokens)

    # === The models ===
    def save_discriminator(self, discriminator) -> None:
        """discriminator.weights.h5 + discriminator_config.json."""
        pretraining.save_discriminator(self.path, discriminator)

    def save_generator(self, generator, standalone: bool = False) -> None:
        """generator.weights.h5 (+ generator_config.json for a stand-alone one)."""
        pretraining.save_generator(self.path, generator, standalone)

    def write_pretraining_config(self, config, vocab: str, converted_from: str) -> None:
        """The pre-training config that sizes G and D (what run_pretraining resumes
        from, with a checkpoint in `checkpoint_dir`)."""
        pretraining.write_pretraining_config(self.path, config, {"vocab_file": vocab},
                                             converted_from=converted_from)

    def record_vocab(self, vocab: str, do_lower_case: bool | None = None) -> None:
        """Records `vocab`, and the casing where known, where fine-tuning reads them,
        unless a pre-training config does."""
        pretraining.record_vocab(self.path, vocab, do_lower_case)

    def save_finetuned(self, model, **record) -> None:
        """A task model: finetuned.weights.h5 + finetuning_config.json
        (`finetuned.write_finetuning_config`'s arguments)."""
        finetuned.save_finetuned(self.path, model)
        finetuned.write_finetuning_config(self.path, **record)

    @property
    def checkpoint_dir(self) -> str:
        """Where a checkpoint for run_pretraining to resume from goes."""
        return os.path.join(self.path, CHECKPOINTS)

    # === The report ===
    def write_report(self, report: dict, kind: str | None = None) -> None:
        """conversion_report.json; with `kind`, merged under that key (several imports)."""
        path = os.path.join(self.path, CONVERSION_REPORT)
        if kind is None:
            write_json(path, report)
            return
        merged = read_json(path) if os.path.exists(path) else {}
        merged[kind] = report
        write_json(path, merged)

    def report(self) -> dict:
        """Its conversion_report.json."""
        return read_json(os.path.join(self.path, CONVERSION_REPORT))

    def left_at_init(self) -> list[str]:
        """The variables its conversions left at their initial values (every merged
        import's); [] for a folder without a report."""
        if not os.path.isfile(os.path.join(self.path, CONVERSION_REPORT)):
            return []
        report = self.report()
        parts = [report] + [v for v in report.values() if isinstance(v, dict)]
        return sorted({n for part in parts for n in part.get("left_at_init", ())
                       if isinstance(n, str)})


def write_conversion_report(folder: str, report: dict, kind: str | None = None) -> None:
    """`ConvertedFolder.write_report` of `folder`."""
    ConvertedFolder(folder).write_report(report, kind)
