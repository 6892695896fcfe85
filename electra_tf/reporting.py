"""What a pre-training loop reports, whatever the backend: metric sums -> results -> lines.

A loop sums, over its steps, "loss/<name>" values (means over replicas),
"<name>/num" and "<name>/den" pairs, "grad_norm", and the AUC histograms
"auc/pos" / "auc/neg"; `finish` turns the sums into per-step means, ratios,
disc_auc and disc_all_original_accuracy (the trivial baseline).
`train_line` and `eval_line` are the console lines both the TensorFlow loop
(training.py) and the JAX loop (jax_training.py) print.
"""

from __future__ import annotations

import numpy as np

from electra_tf.objectives.auc import auc_from_histograms


def finish(values: dict, steps: int) -> dict:
    """Summed values of `steps` steps -> per-step means, num/den ratios, disc_auc."""
    values = {k: np.asarray(v) for k, v in values.items()}
    out = {}
    for name, value in values.items():
        if name.startswith("loss/"):
            out[name[5:]] = float(value) / max(steps, 1)
        elif name == "grad_norm":
            out[name] = float(value) / max(steps, 1)
        elif name.endswith("/num"):
            # 0 when nothing was counted (e.g. precision with no positive
            # prediction), as the original's tf.metrics report it.
            den = float(values[name[:-4] + "/den"])
            out[name[:-4]] = float(value) / den if den else 0.0
    if "auc/pos" in values:
        out["disc_auc"] = auc_from_histograms(values["auc/pos"], values["auc/neg"])
        # The trivial baseline disc_accuracy is judged against: every token
        # called "original" (1 - the fraction of real tokens replaced).
        pos, neg = float(values["auc/pos"].sum()), float(values["auc/neg"].sum())
        out["disc_all_original_accuracy"] = neg / (pos + neg) if pos + neg else 0.0
    return out


def train_line(results: dict, step: int, total: int, eta_seconds: float) -> str:
    nan = float("nan")
    return (f"step {step}/{total} | loss {results['loss']:.4f} (mlm "
            f"{results.get('mlm_loss', 0):.3f} disc {results.get('disc_loss', nan):.4f}) | "
            f"mlm_acc {results.get('masked_lm_accuracy', nan):.3f} disc_auc "
            f"{results.get('disc_auc', nan):.3f} | lr {results['learning_rate']:.2e} | "
            f"{results['sequences_per_second']:.0f} seq/s | eta {eta_seconds / 60:.1f} min")


def eval_line(results: dict, step: int) -> str:
    return f"eval at step {step}: " + ", ".join(
        f"{k} {v:.4f}" for k, v in sorted(results.items()))
