"""What a pre-training loop reports, whatever the backend: metric sums -> results -> lines.

A loop sums, over its steps, "loss/<name>" values (means over replicas),
"<name>/num" and "<name>/den" pairs, "grad_norm", and the AUC histograms
"auc/pos" / "auc/neg"; `finish` turns the sums into per-step means, ratios,
disc_auc and disc_all_original_accuracy (the trivial baseline).

Two names would measure one thing: the objective's loss terms (`mlm_loss`,
`disc_loss`: means of each step's loss, what is trained) and the original's
eval metrics (`masked_lm_loss`: pooled over every masked slot; `disc_loss`:
the mean of per-sequence losses; ELECTRA-15% reports that one as
`disc_loss_all_tokens`, its term being over the masked positions alone).
Training results keep the objective's
terms; evaluation results keep the original's metrics, under its names, so
each number has one name. TensorBoard gets one tag per quantity across train
and eval (`tensorboard_scalars`: the loss terms under the original's metric
names), so that its curves overlay.
`train_line` and `eval_line` are the console lines of the pre-training loop
(pretraining.py), whatever the backend; `collapse_line` its closing warning
when the evaluation's disc_token_cosine says the discriminator has collapsed.
"""

from __future__ import annotations

import re

import numpy as np

from electra_tf.objectives.auc import auc_from_histograms

# An objective's loss term -> the original's eval metric of the same quantity.
SAME_QUANTITY = {"mlm_loss": "masked_lm_loss", "disc_loss": "disc_loss"}


def finish(values: dict, steps: int, evaluation: bool = False) -> dict:
    """Summed values of `steps` steps -> per-step means, num/den ratios, disc_auc.

    Args:
      values: the sums (see the module docstring).
      steps: how many steps (or eval batches) they sum.
      evaluation: keep the original's eval metric where a loss term measures
        the same quantity (else the loss term).
    """
    values = {k: np.asarray(v) for k, v in values.items()}
    losses, metrics = {}, {}
    for name, value in values.items():
        if name.startswith("loss/"):
            losses[name[5:]] = float(value) / max(steps, 1)
        elif name == "grad_norm":
            losses[name] = float(value) / max(steps, 1)
        elif name.endswith("/num"):
            # 0 when nothing was counted (e.g. precision with no positive
            # prediction), as the original's tf.metrics report it.
            den = float(values[name[:-4] + "/den"])
            metrics[name[:-4]] = float(value) / den if den else 0.0
    for term, metric in SAME_QUANTITY.items():
        if term in losses and metric in metrics:
            if evaluation:
                del losses[term]
            else:
                del metrics[metric]
    out = {**losses, **metrics}
    if "auc/pos" in values:
        out["disc_auc"] = auc_from_histograms(values["auc/pos"], values["auc/neg"])
        # The trivial baseline disc_accuracy is judged against: every token
        # called "original" (1 - the fraction of real tokens replaced).
        pos, neg = float(values["auc/pos"].sum()), float(values["auc/neg"].sum())
        out["disc_all_original_accuracy"] = neg / (pos + neg) if pos + neg else 0.0
    return out


def merge_chunks(chunks: list[tuple[int, float, int, dict]]) -> dict:
    """The chunks of steps since the last console line as one, what the line and the
    training summaries report (a chunk also ends at a save or an evaluation step between
    two lines: the line had reported the last chunk's steps alone).

    Args:
      chunks: (steps, seconds, sequences, results) each, in order; `results` as
        `finish` gives them, with the next step's `learning_rate`.

    Returns:
      each quantity's mean over the steps (each chunk's weighted by its steps: exact for
      the losses and grad_norm, per-step means; for the ratios and disc_auc the weighted
      mean of the chunks' values), the sequences over the seconds as
      `sequences_per_second`, the last chunk's `learning_rate`.
    """
    steps = sum(n for n, _, _, _ in chunks)
    merged = {key: sum(n * float(r[key]) for n, _, _, r in chunks) / max(steps, 1)
              for key in chunks[-1][3]
              if all(key in r and np.ndim(r[key]) == 0 for _, _, _, r in chunks)}
    seconds = sum(t for _, t, _, _ in chunks)
    merged["sequences_per_second"] = sum(q for _, _, q, _ in chunks) / max(seconds, 1e-9)
    if "learning_rate" in chunks[-1][3]:
        merged["learning_rate"] = chunks[-1][3]["learning_rate"]
    return merged


def tensorboard_scalars(results: dict) -> dict:
    """`results` under their TensorBoard tags: one tag per quantity across train and eval.

    An objective's loss term is written under the name of the original's eval metric
    of the same quantity (SAME_QUANTITY: mlm_loss -> masked_lm_loss, the name of
    google-research/electra's run_pretraining.py metric), so that TensorBoard overlays
    the training and evaluation curves. The console lines and the results keep the
    objective's names.
    """
    return {(SAME_QUANTITY.get(k, k) if SAME_QUANTITY.get(k, k) not in results else k): v
            for k, v in results.items()}


def models_line(config, discriminator, generator) -> str:
    """The start line's sizes: D's and G's parameters and what they share; BERT's
    (objective bert_mlm) one masked LM and its encoder, the model kept.

    Args:
      config: the run's PretrainingConfig.
      discriminator, generator: the pre-training models (count_params).
    """
    d_params = discriminator.count_params()
    sharing = {"embeddings": "shared embeddings counted in both",
               "encoder": "shared encoder counted in both",
               "none": "nothing shared", "uniform": "no generator network: uniform "
                                                    "sampling"}.get(config.encoders.sharing, "")
    if config.gradient_disentangled_embeddings:  # D also tracks G's tables; count them in G
        d_params -= discriminator.encoder.embeddings.residual_of.count_params()
        sharing = "D's embedding tables are residuals over G's, gradient-disentangled"
    if config.objective == "bert_mlm":  # one model: the encoder kept, under an MLM head
        return (f"BERT masked LM {generator.count_params():,} params (its encoder, the "
                f"model kept, {discriminator.encoder.count_params():,})")
    return (f"discriminator {d_params:,} params, generator {generator.count_params():,} "
            f"({sharing})")


# The terms a training phase (training/phases.py) reports but does not train: the
# generator's MLM loss under adversarial training (G learns by REINFORCE) and while
# two-stage training's discriminator trains (G frozen).
UNTRAINED_TERMS = {"adversarial": ("mlm",), "two_stage_discriminator": ("mlm",)}


def train_line(results: dict, step: int, total: int, eta_seconds: float,
               phase: str = "joint") -> str:
    """The console line of a chunk of steps: only the metrics its objective has.

    BERT-MLM has no discriminator, so no disc columns; an objective without a
    generator MLM loss has no mlm columns. Electric's loss sums its cloze loss (what its
    generator trains, over every token) and the disc loss: "cloze" stands in for "mlm"
    (the cloze loss at the masked positions, which nothing trains), so that the terms
    shown add up to the loss. Replace-MLM and All-Tokens MLM add their main model's MLM
    ("main"), adversarial training its REINFORCE and baseline losses. A term the
    `phase` reports but does not train (UNTRAINED_TERMS) follows, apart: `(disc 0.6918;
    not trained: mlm 5.353)`.
    """
    first = ("cloze", "cloze_loss", 3) if "cloze_loss" in results else ("mlm", "mlm_loss", 3)
    terms = [(name, f"{name} {results[key]:.{digits}f}") for name, key, digits in (
        first, ("main", "main_mlm_loss", 3), ("disc", "disc_loss", 4),
        ("reinforce", "reinforce_loss", 4), ("baseline", "baseline_loss", 4))
        if key in results]
    untrained = UNTRAINED_TERMS.get(phase, ())
    losses = " ".join(text for name, text in terms if name not in untrained)
    reported = " ".join(text for name, text in terms if name in untrained)
    if reported:  # (every term shown untrained: no "(; not trained: ...)")
        losses += f"; not trained: {reported}" if losses else f"not trained: {reported}"
    metrics = [f"{name} {results[key]:.3f}" for name, key in (
        ("mlm_acc", "masked_lm_accuracy"), ("disc_auc", "disc_auc")) if key in results]
    return (f"step {step}/{total} | loss {results['loss']:.4f}"
            + (f" ({losses})" if losses else "")
            + (f" | {' '.join(metrics)}" if metrics else "")
            + f" | lr {results['learning_rate']:.2e} | "
            f"{_rate(results['sequences_per_second'])} seq/s | eta {eta_seconds / 60:.1f} min")


def _rate(per_second: float) -> str:
    """Whole numbers from 10 up, 2 significant figures below ("0.48", not "0")."""
    return f"{per_second:.0f}" if per_second >= 10 else f"{per_second:.2g}"


def eval_line(results: dict, step: int) -> str:
    return f"eval at step {step}: " + ", ".join(
        f"{k} {v:.4f}" for k, v in sorted(results.items()))


_EVAL_LINE = re.compile(r"eval at step (\d+): (.*)$")


def parse_eval_line(line: str) -> tuple[int, dict[str, float]] | None:
    """(step, metrics) of a line `eval_line` wrote (anywhere in `line`), else None.

    What scripts that read a run's console (the studies) use, so that the
    format has one owner.
    """
    m = _EVAL_LINE.search(line)
    if not m:
        return None
    values = {}
    for part in m.group(2).split(", "):
        name, _, value = part.rpartition(" ")
        try:
            values[name] = float(value)
        except ValueError:
            pass
    return int(m.group(1)), values


# === A collapsed discriminator ===
# disc_token_cosine at or above this is "collapsed": studies/real_data/FINDINGS.md
# measured 0.38 at random initialization and 0.84-0.91 after 100-500 steps of
# pre-training on real text, where fine-tuning from the model was 3-15 points
# below fine-tuning from random weights. 0.8 sits below every collapsed value measured
# and well above the random initialization's 0.38.
COLLAPSED_TOKEN_COSINE = 0.8


def collapsed_cosine(results: dict) -> float | None:
    """results' disc_token_cosine where it is in the collapsed range, else None."""
    cosine = results.get("disc_token_cosine")
    if isinstance(cosine, (int, float)) and cosine >= COLLAPSED_TOKEN_COSINE:
        return float(cosine)
    return None


def collapse_line(results: dict) -> str | None:
    """The pre-training run's closing warning where its final eval is collapsed."""
    cosine = collapsed_cosine(results)
    if cosine is None:
        return None
    return (f"warning: disc_token_cosine {cosine:.3f} (>= {COLLAPSED_TOKEN_COSINE}): the "
            "discriminator's token states are nearly collinear, as after a short "
            "pre-training; fine-tuning from this model may do worse than from random "
            "weights, so compare with run_finetuning --from_scratch (docs/pretraining.md)")
