"""The Electric scoring study (studies/electric_scoring/study.py): its corruptions, its
FLOPs counts and the scorers' ranking rule."""

import random

import pytest

from electra_tf.core.config import PretrainingConfig
from studies.electric_scoring import study

DEMO = dict(model_size="tiny", max_seq_length=128, generator_hidden_size=0.25,
            generator_layers=0.5)


def test_corruptions_swap_two_different_words_and_replace_one():
    rng = random.Random(0)
    sentence = "the quick brown fox jumps over the lazy dog"
    for _ in range(50):
        c = study.corrupt(sentence, rng, ["cat", "the", "tree"])
        a, s, r = sentence.split(), c["swap"].split(), c["replace"].split()
        assert sorted(a) == sorted(s) and a != s
        assert len(r) == len(a) and sum(x != y for x, y in zip(a, r)) == 1
    # a sentence of one word repeated: refused (the swap had looped forever), and the
    # held-out pool never holds one
    with pytest.raises(ValueError, match="no two different words to swap"):
        study.corrupt("la la la la la la la la", rng, ["x", "y"])


def test_held_out_sentences_hold_two_different_words(tmp_path):
    corpus = tmp_path / "corpus.txt"
    docs = ["la la la la la la la la\nthe model reads every word of this line\n"] * 40
    corpus.write_text("\n".join(docs))
    pool = study.held_out_sentences(str(corpus), 10, 0)
    assert pool == ["the model reads every word of this line"]


def test_electric_flops_count_both_towers_and_the_cloze_head_on_every_token():
    c = PretrainingConfig(objective="electric", vocab_size=4000, **DEMO)
    d, g = c.discriminator_config(), c.generator_config()
    L, e = 128, g.resolved_embedding_size
    electric = study.electric_flops_per_sequence(c)
    # one more cloze position costs 3 x (dense(2 H_G -> E) + E x V) per token
    bigger = PretrainingConfig(objective="electric", vocab_size=4001, **DEMO)
    assert study.electric_flops_per_sequence(bigger) - electric == 3 * L * 2 * e
    assert g.hidden_size == 32 and d.hidden_size == 128
    bert = study.bert_mlm_flops_per_sequence(
        PretrainingConfig(objective="bert_mlm", vocab_size=4000, **DEMO))
    assert electric > bert
    assert study.equal_flops_steps(600, 4000, **DEMO) == round(600 * electric / bert)


def test_accuracy_counts_ties_half():
    assert study.accuracy([1.0, 2.0, 3.0, 0.0], [0.0, 2.0, 4.0, -1.0]) == 0.625
