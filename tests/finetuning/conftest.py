"""A tiny 'pre-trained' discriminator folder, as run_pretraining writes it."""

import json
import random

import pytest
from helpers import WORDS, write_pretrained_dir


@pytest.fixture(scope="session")
def pretrained_dir(tiny_vocab, tmp_path_factory):
    """discriminator.weights.h5 + discriminator_config.json + pretraining_config.json of
    the tiny discriminator (helpers.TINY_MODEL), freshly initialized."""
    return write_pretrained_dir(tmp_path_factory.mktemp("pretrained"), tiny_vocab)


def toy_sentence(rng, positive):
    words = [w for w in WORDS if w != "replaced"]
    s = [rng.choice(words) for _ in range(rng.randint(3, 8))]
    if positive:
        s.insert(rng.randint(0, len(s)), "replaced")
    return " ".join(s)


@pytest.fixture(scope="session")
def toy_sst2_dir(tmp_path_factory):
    """SST-2 layout; label 1 iff the sentence contains 'replaced' (separable)."""
    out = tmp_path_factory.mktemp("SST-2")
    rng = random.Random(0)
    for split, n in (("train", 320), ("dev", 64)):
        rows = ["sentence\tlabel"]
        for _ in range(n):
            y = rng.random() < 0.5
            rows.append(f"{toy_sentence(rng, y)}\t{int(y)}")
        (out / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    rows = ["index\tsentence"] + [f"{i}\t{toy_sentence(rng, i % 2 == 0)}" for i in range(10)]
    (out / "test.tsv").write_text("\n".join(rows) + "\n")
    return str(out)


@pytest.fixture(scope="session")
def toy_ner_dir(tmp_path_factory):
    """CoNLL layout; 'replaced' is a one-word MISC entity, 'generator model' a two-word ORG."""
    out = tmp_path_factory.mktemp("ner")
    rng = random.Random(1)
    for split, n in (("train", 240), ("dev", 48)):
        lines = ["-DOCSTART- -X- O", ""]
        for _ in range(n):
            words = toy_sentence(rng, rng.random() < 0.6).split()
            tags, i = [], 0
            while i < len(words):
                if words[i] == "replaced":
                    tags.append("B-MISC")
                elif words[i] == "generator" and i + 1 < len(words) and words[i + 1] == "model":
                    tags += ["B-ORG", "I-ORG"]
                    i += 1
                else:
                    tags.append("O")
                i += 1
            lines += [f"{w} NN {t}" for w, t in zip(words, tags)] + [""]
        (out / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return str(out)


@pytest.fixture(scope="session")
def toy_squad_dir(tmp_path_factory):
    """SQuAD 2.0 layout: the answer is the word 'replaced' where the context has it; a
    quarter of the questions have none (impossible)."""
    out = tmp_path_factory.mktemp("squad")
    rng = random.Random(2)
    words = [w for w in WORDS if w != "replaced"]
    for split, n in (("train", 240), ("dev", 40)):
        qas_list = []
        for i in range(n):
            context = [rng.choice(words) for _ in range(rng.randint(4, 9))]
            possible = rng.random() < 0.75
            if possible:
                k = rng.randint(0, len(context) - 1)
                context.insert(k, "replaced")
            text = " ".join(context)
            qa = {"id": f"{split}-{i}", "question": "which token was replaced ?", "is_impossible": not possible,
                  "answers": []}
            if possible:
                qa["answers"] = [{"text": "replaced", "answer_start": text.index("replaced")}]
            qas_list.append({"context": text, "qas": [qa]})
        data = {"version": "v2.0", "data": [{"title": "toy", "paragraphs": qas_list}]}
        (out / f"{split}-v2.0.json").write_text(json.dumps(data))
    return str(out)
