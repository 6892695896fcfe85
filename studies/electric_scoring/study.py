"""Do Electric's scores mean something? Original sentences against corrupted copies.

    python -m studies.electric_scoring.study --data_dir=demo_output/data \
        --electric_dir=M_ELECTRIC --mlm_dir=M_BERT --output=studies/electric_scoring/results.json

On held-out sentences of the demo corpus (documents d % 10 == 9, the shard the
demo never trains on: data/builder.py), each sentence gets two corrupted copies:
two of its words swapped, and one word replaced by a random whole-word token of
the vocabulary. Each scorer ranks the original against each copy; "accuracy" is
how often the original scores higher (a tie counts half). Scorers:
- electric: -sum_t E(x)_t from one forward pass (serving/scoring.py);
- bert_mlm: the masked pseudo-log-likelihood of Salazar et al. (2020),
  sum_t log p(x_t | x with t masked), one pass per word piece (the n passes
  batched per sentence), with the generator of a BERT-MLM model pre-trained
  for the same FLOPs as the Electric model;
- unigram: sum_t log p(x_t) from the training shards' word-piece counts
  (add-one): blind to word order, so a swap always ties.
Each scorer's time is measured over all the sentences (original and copies),
one after another in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import numpy as np

HELD_OUT_SHARD, NUM_SHARDS = 9, 10


def _encoder_flops_per_token(c, seq_len: int) -> int:
    """Forward matmul FLOPs per token of one encoder (EncoderConfig `c`), by
    benchmarks/bench_common's count."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    from bench_common import encoder_flops_per_token

    return encoder_flops_per_token(c.resolved_embedding_size, c.hidden_size,
                                   c.intermediate_size, c.num_hidden_layers, seq_len)


def electric_flops_per_sequence(config) -> int:
    """Training FLOPs (3 x forward matmuls) of one Electric sequence (PretrainingConfig).

    D and its RTD head on every token (benchmarks/bench_common's count) + the
    two generator towers on every token (each counted as a full encoder; the
    causal masks save no matmul) + the cloze head on EVERY token: dense(2 H_G
    -> E) and the E x V output layer, where ELECTRA's MLM head runs on the
    masked positions only. The log q lookup and the sampling are not matmuls.
    """
    d, g = config.discriminator_config(), config.generator_config()
    L, V = config.max_seq_length, config.vocab_size
    e = g.resolved_embedding_size
    d_tok = _encoder_flops_per_token(d, L) + 2 * (d.hidden_size * d.hidden_size + d.hidden_size)
    cloze = 2 * (2 * g.hidden_size) * e + 2 * e * V
    return 3 * L * (d_tok + 2 * _encoder_flops_per_token(g, L) + cloze)


def bert_mlm_flops_per_sequence(config) -> int:
    """Training FLOPs of one BERT-MLM sequence by the same convention as
    electric_flops_per_sequence (3 x the forward matmuls): D's encoder on every
    token and the MLM head (dense(H -> E), E x V) at the masked positions. The
    recorded 925-step plan was made with this count; the product's count
    (electra_tf.objectives.flops) also counts embedding lookups and would not match
    Electric's count here."""
    d = config.discriminator_config()
    L, V, e = config.max_seq_length, config.vocab_size, d.resolved_embedding_size
    mlm = 2 * d.hidden_size * e + 2 * e * V
    return 3 * (L * _encoder_flops_per_token(d, L)
                + config.resolved_max_predictions_per_seq * mlm)


def equal_flops_steps(electric_steps: int, vocab_size: int, **demo) -> int:
    """BERT-MLM steps with the FLOPs of `electric_steps` Electric steps (same batch)."""
    from electra_tf.core.config import PretrainingConfig

    electric = PretrainingConfig(objective="electric", vocab_size=vocab_size, **demo)
    bert = PretrainingConfig(objective="bert_mlm", vocab_size=vocab_size, **demo)
    return round(electric_steps * electric_flops_per_sequence(electric)
                 / bert_mlm_flops_per_sequence(bert))


def held_out_sentences(corpus: str, n: int, seed: int, min_words=8, max_words=25):
    """n lines of the held-out documents of 8-25 plain words (seeded sample)."""
    from electra_tf.data.builder import iter_documents

    pool = []
    for index, doc in iter_documents([corpus]):
        if index % NUM_SHARDS != HELD_OUT_SHARD:
            continue
        for line in doc:
            words = line.split()
            # (two different words at least: corrupt's swap had looped forever on one)
            if min_words <= len(words) <= max_words and sum(w.isalpha() for w in words) >= \
                    0.8 * len(words) and len(set(words)) >= 2:
                pool.append(" ".join(words))
    pool = sorted(set(pool))
    random.Random(seed).shuffle(pool)
    return pool[:n]


def corrupt(sentence: str, rng: random.Random, words: list[str]) -> dict:
    """{"swap": two different words swapped, "replace": one word -> a random vocab word}.

    Raises:
      ValueError: a sentence without two different words (nothing to swap)."""
    tokens = sentence.split()
    if len(set(tokens)) < 2:
        raise ValueError(f"no two different words to swap in {sentence!r}")
    i, j = rng.sample(range(len(tokens)), 2)
    while tokens[i] == tokens[j]:
        i, j = rng.sample(range(len(tokens)), 2)
    swapped = list(tokens)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    replaced = list(tokens)
    k = rng.randrange(len(tokens))
    new = rng.choice(words)
    while new == tokens[k].lower():
        new = rng.choice(words)
    replaced[k] = new
    return {"swap": " ".join(swapped), "replace": " ".join(replaced)}


def vocab_words(vocab_file: str) -> list[str]:
    """The vocabulary's whole-word, alphabetic tokens (no ## piece, no [X])."""
    with open(vocab_file, encoding="utf-8") as f:
        return [t for t in (line.rstrip("\n") for line in f) if t.isalpha() and len(t) > 1]


class MlmPll:
    """Masked pseudo-log-likelihood with a BERT-MLM generator: n passes per sentence."""

    def __init__(self, model_dir: str, tokenizer):
        import tensorflow as tf

        from electra_tf.folders import PretrainingFolder

        self.generator = PretrainingFolder.open(model_dir, discriminator=False).load_generator()
        self.tokenizer = tokenizer
        self._run = tf.function(lambda inputs: self.generator(inputs)["mlm_logits"],
                                reduce_retracing=True)

    def score(self, texts) -> list[float]:
        import tensorflow as tf

        tok, out = self.tokenizer, []
        for ids in tok.encode(texts):
            row = np.array([tok.cls_id, *ids, tok.sep_id], np.int32)
            n = len(ids)
            if n == 0:
                out.append(0.0)
                continue
            batch = np.tile(row, (n, 1))
            positions = np.arange(1, n + 1, dtype=np.int32)[:, None]
            batch[np.arange(n), positions[:, 0]] = tok.mask_id
            logits = self._run({"input_ids": tf.constant(batch),
                                "input_mask": tf.ones_like(batch),
                                "segment_ids": tf.zeros_like(batch),
                                "masked_lm_positions": tf.constant(positions)}).numpy()[:, 0]
            logits = logits.astype(np.float64)
            log_z = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + \
                logits.max(-1)
            out.append(float((logits[np.arange(n), ids] - log_z).sum()))
        return out


class Unigram:
    """sum_t log p(x_t), p from the training records' word-piece counts (add-one)."""

    def __init__(self, train_files: list[str], vocab_size: int, tokenizer):
        from electra_tf.data.unigram import unigram_counts

        counts, _ = unigram_counts(train_files, vocab_size)
        counts = np.asarray(counts, np.float64) + 1.0
        self.log_p = np.log(counts / counts.sum())
        self.tokenizer = tokenizer

    def score(self, texts) -> list[float]:
        return [float(self.log_p[ids].sum()) for ids in self.tokenizer.encode(texts)]


def accuracy(original, corrupted, tie=1e-6) -> float:
    """How often the original scores higher; a tie (within `tie`: sums of the same terms
    in another order differ in the last bits) counts half."""
    o, c = np.asarray(original, np.float64), np.asarray(corrupted, np.float64)
    same = np.abs(o - c) <= tie * np.maximum(1.0, np.abs(o))
    return float(np.where(same, 0.5, o > c).mean())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--electric_dir", required=True)
    parser.add_argument("--mlm_dir", required=True)
    parser.add_argument("--num_sentences", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="")
    args = parser.parse_args(argv)

    from electra_tf.serving.scoring import load_scorer

    sentences = held_out_sentences(os.path.join(args.data_dir, "corpus.txt"),
                                   args.num_sentences, args.seed)
    rng = random.Random(args.seed + 1)
    words = vocab_words(os.path.join(args.data_dir, "vocab.txt"))
    copies = [corrupt(s, rng, words) for s in sentences]
    texts = sentences + [c["swap"] for c in copies] + [c["replace"] for c in copies]
    n = len(sentences)
    electric = load_scorer(args.electric_dir)
    tokenizer = electric.tokenizer
    records = os.path.join(args.data_dir, "records_128")
    train = sorted(os.path.join(records, f) for f in os.listdir(records)
                   if f.startswith("pretrain_data") and not f.endswith(
                       f"{HELD_OUT_SHARD:05d}-of-{NUM_SHARDS:05d}") and "stats" not in f)
    scorers = {
        "electric": lambda t: [s.score for s in electric.score(t)],
        "bert_mlm": MlmPll(args.mlm_dir, tokenizer).score,
        "unigram": Unigram(train, tokenizer.vocab_size, tokenizer).score,
    }
    pieces = sum(len(ids) for ids in tokenizer.encode(texts))
    results = {"sentences": n, "texts_scored": len(texts), "word_pieces": pieces,
               "examples": [{"original": sentences[i], **copies[i]} for i in range(3)],
               "scorers": {}}
    for name, score in scorers.items():
        score(texts[:4])  # trace / warm up
        t0 = time.perf_counter()
        values = score(texts)
        seconds = time.perf_counter() - t0
        results["scorers"][name] = {
            "swap_accuracy": accuracy(values[:n], values[n:2 * n]),
            "replace_accuracy": accuracy(values[:n], values[2 * n:]),
            "seconds": round(seconds, 2),
            "ms_per_text": round(1000 * seconds / len(texts), 2)}
        print(f"[study] {name}: {results['scorers'][name]}", file=sys.stderr, flush=True)
    text = json.dumps(results, indent=2, ensure_ascii=False)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
