"""Downstream probes built from held-out documents of a pre-training corpus.

Every probe reads only the held-out documents (document index % num_shards
== num_shards - 1: the shard the pre-training records keep for eval, never
trained on), splits them 80/20 by document into train and dev (so no dev
document is seen in the probe's training either), and is written in a GLUE
layout so the regular fine-tuning loop trains it:

* coherence (RTE layout): two consecutive sentences of one document
  ("entailment") or a sentence and a sentence of another held-out document
  ("not_entailment"), half each.
* order (RTE layout): two consecutive sentences of one document, in their
  order ("entailment") or swapped ("not_entailment"), half each.
* package (SST-2 layout, N classes): a chunk of up to three consecutive
  sentences; the label is the package (or top-level module) of the document,
  among the N labels with the most held-out documents. Needs the corpus's
  `.sources.tsv` (install_corpus.py writes it).

None favours an objective by construction: the labels come from the
corpus's structure, not from masking or replacing tokens. Each probe's
`meta.json` records its sizes, labels and majority-class baseline (the dev
accuracy of always answering the train split's most frequent label).
"""

from __future__ import annotations

import collections
import json
import os
import random

PROBES = ("coherence", "order", "package")
PAIR, SINGLE = ("entailment", "not_entailment"), None


def held_out_documents(corpus: str, num_shards: int = 10) -> list[tuple[int, list[str]]]:
    """(document index, sentences) of the held-out shard, documents of >= 2 sentences."""
    from electra_tf.data.builder import iter_documents

    return [(index, doc) for index, doc in iter_documents([corpus])
            if index % num_shards == num_shards - 1 and len(doc) >= 2]


def _clean(text: str) -> str:
    return text.replace("\t", " ").replace("\n", " ")


def _write(path: str, header: str, rows: list[tuple]) -> None:
    lines = [header] + ["\t".join([str(i)] + [_clean(str(c)) for c in row])
                        for i, row in enumerate(rows)]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def majority_baseline(train_labels: list[str], dev_labels: list[str]) -> float:
    """Dev accuracy of always predicting the train split's most frequent label."""
    top = collections.Counter(train_labels).most_common(1)[0][0]
    return sum(label == top for label in dev_labels) / max(1, len(dev_labels))


def _pair_rows(kind: str, docs: list[list[str]], rng: random.Random) -> list[tuple]:
    rows = []
    for doc in docs:
        for i in range(len(doc) - 1):
            positive = rng.random() < 0.5
            if kind == "coherence":
                if positive:
                    rows.append((doc[i], doc[i + 1], PAIR[0]))
                else:
                    other = doc
                    while other is doc:
                        other = docs[rng.randrange(len(docs))]
                    rows.append((doc[i], rng.choice(other), PAIR[1]))
            else:  # order
                pair = (doc[i], doc[i + 1]) if positive else (doc[i + 1], doc[i])
                rows.append((*pair, PAIR[0] if positive else PAIR[1]))
    return rows


def _cap(rows: list[tuple], limit: int, rng: random.Random) -> list[tuple]:
    if limit and len(rows) > limit:
        rows = rng.sample(rows, limit)
    return rows


def build_pair_probe(kind: str, docs: list[list[str]], out_dir: str, seed: int,
                     max_train: int = 0, max_dev: int = 0) -> dict:
    """coherence or order pairs, RTE layout; returns the probe's meta."""
    rng = random.Random(f"{kind}-{seed}")
    docs = list(docs)
    rng.shuffle(docs)
    cut = int(0.8 * len(docs))
    splits = {"train": _cap(_pair_rows(kind, docs[:cut], rng), max_train, rng),
              "dev": _cap(_pair_rows(kind, docs[cut:], rng), max_dev, rng)}
    os.makedirs(out_dir, exist_ok=True)
    for split, rows in splits.items():
        _write(os.path.join(out_dir, f"{split}.tsv"), "index\tsentence1\tsentence2\tlabel", rows)
    return _meta(kind, "rte", list(PAIR), splits, out_dir)


def build_package_probe(docs: list[tuple[str, list[str]]], out_dir: str, seed: int,
                        num_classes: int = 8, chunk: int = 3, max_train: int = 0,
                        max_dev: int = 0) -> dict:
    """(label, sentences) documents -> N-class classification, SST-2 layout.

    The classes are the `num_classes` labels with the most held-out documents
    (at least two each, so that both splits have one); each class's documents
    are split 80/20 (at least one in dev). Per class, at most max_train /
    num_classes train and max_dev / num_classes dev examples are kept.
    """
    rng = random.Random(f"package-{seed}")
    by_label: dict[str, list[list[str]]] = collections.defaultdict(list)
    for label, doc in docs:
        by_label[label].append(doc)
    ranked = sorted((lbl for lbl in by_label if len(by_label[lbl]) >= 2),
                    key=lambda lbl: (-len(by_label[lbl]), lbl))
    classes = sorted(ranked[:num_classes])
    if len(classes) < 2:
        raise ValueError(f"the package probe needs 2 labels with >= 2 held-out documents; "
                         f"found {len(classes)}")
    splits: dict[str, list[tuple]] = {"train": [], "dev": []}
    for label in classes:
        group = list(by_label[label])
        rng.shuffle(group)
        n_dev = max(1, int(round(0.2 * len(group))))
        for split, part, limit in (("dev", group[:n_dev], max_dev), ("train", group[n_dev:],
                                                                     max_train)):
            rows = [(" ".join(doc[i:i + chunk]), label)
                    for doc in part for i in range(0, len(doc), chunk)]
            splits[split] += _cap(rows, limit // num_classes if limit else 0, rng)
    for rows in splits.values():
        rng.shuffle(rows)
    os.makedirs(out_dir, exist_ok=True)
    for split, rows in splits.items():
        _write(os.path.join(out_dir, f"{split}.tsv"), "index\tsentence\tlabel", rows)
    return _meta("package", "sst2", classes, splits, out_dir)


def _meta(name: str, layout: str, labels: list[str], splits: dict, out_dir: str) -> dict:
    label_of = [r[-1] for r in splits["train"]], [r[-1] for r in splits["dev"]]
    meta = {"probe": name, "layout": layout, "labels": labels,
            "train_size": len(splits["train"]), "dev_size": len(splits["dev"]),
            "majority_baseline": majority_baseline(*label_of) if all(label_of) else float("nan"),
            "dev_label_counts": dict(collections.Counter(label_of[1]))}
    with open(os.path.join(out_dir, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
    return meta


def build_probes(corpus: str, out_dir: str, seed: int, probes: tuple[str, ...] = PROBES,
                 label_field: str = "package", num_classes: int = 8, max_train: int = 0,
                 max_dev: int = 0, num_shards: int = 10) -> dict[str, dict]:
    """Writes each probe under out_dir/<probe>/; returns {probe: meta}."""
    docs = held_out_documents(corpus, num_shards)
    out = {}
    for name in probes:
        folder = os.path.join(out_dir, name)
        if name in ("coherence", "order"):
            out[name] = build_pair_probe(name, [d for _, d in docs], folder, seed,
                                         max_train, max_dev)
        elif name == "package":
            from studies.efficiency.install_corpus import read_sources

            sources = read_sources(corpus)
            labelled = [(sources[i][label_field], d) for i, d in docs]
            out[name] = build_package_probe(labelled, folder, seed, num_classes,
                                            max_train=max_train, max_dev=max_dev)
        else:
            raise ValueError(f"unknown probe {name!r}; known: {', '.join(PROBES)}")
    return out


def build_probe(corpus: str, out_dir: str, seed: int, num_shards: int = 10) -> dict:
    """The coherence probe alone in out_dir (RTE layout): {"train": n, "dev": n}."""
    docs = [d for _, d in held_out_documents(corpus, num_shards)]
    meta = build_pair_probe("coherence", docs, out_dir, seed)
    return {"train": meta["train_size"], "dev": meta["dev_size"]}
