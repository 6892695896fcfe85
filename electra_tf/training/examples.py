"""One pre-training sequence as the objective sees it, printed at an evaluation.

`--log_examples` (pre-training): at each evaluation the first held-out sequence,
masked as the evaluation masks it, goes through the generator and the
discriminator (dropout off, the evaluation's seed), and the console shows what
each did: `[original->sample p=0.93]` at a masked position whose sample replaced
the token, `[original=sample p=0.12]` where the sample is the original (it counts
as original), and a token the discriminator takes for replaced where nothing was
masked, `token(p=0.71)`. p is the discriminator's probability of "replaced"; an
objective without one (BERT's MLM) or with an MLM-style head shows the
generator's samples alone.
"""

from __future__ import annotations

import numpy as np

MAX_SHOWN = 128  # positions printed of a longer sequence


def masked_example_lines(batch: dict, outputs: dict, vocab: list[str], rtd_logits=None,
                  max_shown: int = MAX_SHOWN) -> list[str]:
    """The lines for row 0 of `batch` (NumPy arrays) and the model's `outputs` for it.

    Args:
      batch: the masked batch (input_ids, input_mask, masked_lm_positions,
        masked_lm_ids, masked_lm_weights).
      outputs: ElectraPretrainer outputs for the batch, as NumPy: `fake` (with
        `sampled_ids`) where the objective samples, else `mlm_logits` alone.
      vocab: id -> token.
      rtd_logits: float [B, L], the discriminator's "replaced" logits, or None.
    """
    def token(i) -> str:
        i = int(i)
        return vocab[i] if 0 <= i < len(vocab) else f"<{i}>"

    mask = np.asarray(batch["input_mask"][0])
    length = int(np.nonzero(mask)[0][-1]) + 1 if mask.any() else 0
    weights = np.asarray(batch["masked_lm_weights"][0]) > 0
    positions = np.asarray(batch["masked_lm_positions"][0])[weights]
    originals = np.asarray(batch["masked_lm_ids"][0])[weights]
    fake = outputs.get("fake")
    if fake is not None:
        samples = np.asarray(fake["sampled_ids"][0])[weights]
        what = "sampled"
    else:  # only the generator: its most likely token
        samples = np.asarray(outputs["mlm_logits"][0]).argmax(-1)[weights]
        what = "predicted"
    p = None if rtd_logits is None else 1.0 / (1.0 + np.exp(-np.asarray(rtd_logits[0],
                                                                           np.float64)))
    ids = np.asarray(fake["original_ids"][0] if fake is not None else batch["input_ids"][0])
    at = {int(pos): (int(o), int(s)) for pos, o, s in zip(positions, originals, samples)}
    shown = min(length, max_shown)
    words = []
    for i in range(shown):
        score = "" if p is None else f" p={_probability(p[i])}"
        if i in at:
            o, s = at[i]
            words.append(f"[{token(o)}{'=' if o == s else '->'}{token(s)}{score}]")
        elif p is not None and p[i] > 0.5:
            words.append(f"{token(ids[i])}(p={_probability(p[i])})")
        else:
            words.append(token(ids[i]))
    replaced = [i for i, (o, s) in at.items() if o != s]
    head = (f"{len(at)} masked, {len(replaced)} replaced by the generator's {what} tokens"
            if fake is not None else f"{len(at)} masked; the generator's {what} tokens")
    if p is not None:
        flagged = sum(p[i] > 0.5 for i in replaced)
        others = sum(p[i] > 0.5 for i in range(length) if i not in replaced)
        head += (f"; the discriminator flags {flagged} of them and {others} other "
                 f"position{'' if others == 1 else 's'} (p > 0.5)")
    more = f" ... ({length - shown} more)" if shown < length else ""
    return [f"example (the first eval sequence, {length} positions): {head}",
            "  " + " ".join(words) + more]


def _probability(p: float) -> str:
    """p to 2 decimals, or as many more as tell it from the 0.5 that flags a position
    (near the start of a run every p is about 0.5: flagged and unflagged had both read
    p=0.50)."""
    for digits in range(2, 17):
        text = f"{p:.{digits}f}"
        if (float(text) > 0.5) == (p > 0.5):
            return text
    return repr(float(p))
