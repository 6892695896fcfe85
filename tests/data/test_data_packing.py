"""ExampleBuilder: the original's packing rules, as invariants and exact cases."""

import random

import pytest

from electra_tf.data.packing import ExampleBuilder, PackedExample, SpecialIds, to_features

IDS = SpecialIds(cls_id=101, sep_id=102, pad_id=0)


class FixedRandom(random.Random):
    """random() returns the scripted values in order (randint is not used here)."""

    def __init__(self, values):
        super().__init__(0)
        self.values = list(values)

    def random(self):
        return self.values.pop(0)


def build_all(docs, L, seed):
    builder = ExampleBuilder(L, random.Random(seed))
    out = []
    for doc in docs:
        for sentence in doc:
            ex = builder.add_sentence(sentence)
            if ex:
                out.append(ex)
        ex = builder.end_document()
        if ex:
            out.append(ex)
    return out


def random_docs(rng, n_docs, max_sentence=40):
    token = iter(range(1000, 10**9))
    return [[[next(token) for _ in range(rng.randint(0, max_sentence))]
             for _ in range(rng.randint(1, 12))] for _ in range(n_docs)]


@pytest.mark.parametrize("L", [8, 16, 128])
def test_invariants_over_random_documents(L):
    rng = random.Random(L)
    docs = random_docs(rng, 400, max_sentence=L // 2)
    examples = build_all(docs, L, seed=3)
    stream = [t for doc in docs for s in doc for t in s]
    position = {t: i for i, t in enumerate(stream)}
    single = 0
    for ex in examples:
        f = to_features(ex, IDS, L)
        n = sum(f["input_mask"])
        assert all(len(v) == L for v in f.values())
        assert f["input_ids"][0] == IDS.cls_id
        assert f["input_ids"][n - 1] == IDS.sep_id and f["input_ids"][n:] == [0] * (L - n)
        a, b = len(ex.first_segment), len(ex.second_segment)
        assert a >= 1 or b == 0
        assert f["input_ids"][a + 1] == IDS.sep_id
        assert f["segment_ids"][:a + 2] == [0] * (a + 2)
        if b:
            assert f["segment_ids"][a + 2:n] == [1] * (b + 1)
            assert n == a + b + 3
        else:
            single += 1
            assert n == a + 2
        assert f["segment_ids"][n:] == [0] * (L - n)
        # Each segment keeps corpus order (a short sentence may still join A
        # after B has started, as in the original).
        for seg in (ex.first_segment, ex.second_segment):
            assert [position[t] for t in seg] == sorted(position[t] for t in seg)
    assert single / len(examples) > 0.05  # p=0.1 single segment, plus empty-B cases


def test_single_segment_when_first_draw_below_point_one():
    # random() < 0.1 -> one segment: all sentences to A, cut to L - 2.
    builder = ExampleBuilder(16, FixedRandom([0.05, 0.9]))
    assert builder.add_sentence(list(range(10))) is None
    ex = builder.add_sentence(list(range(10, 20)))
    assert ex.first_segment == list(range(14)) and ex.second_segment == []


def test_two_segments_and_b_truncation():
    # random() >= 0.1: A targets (16 - 3) // 2 = 6. s1 (4) fits; s2 (4) overflows
    # A while B is empty -> coin 0.7 >= 0.5 sends it to B; s3 goes to B.
    builder = ExampleBuilder(16, FixedRandom([0.5, 0.7, 0.9]))
    s1, s2, s3 = [1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12, 13, 14, 15, 16]
    assert builder.add_sentence(s1) is None
    assert builder.add_sentence(s2) is None
    ex = builder.add_sentence(s3)
    assert ex.first_segment == s1
    assert ex.second_segment == (s2 + s3)[:16 - 4 - 3]


def test_overflow_coin_below_half_keeps_sentence_in_a():
    builder = ExampleBuilder(16, FixedRandom([0.5, 0.3, 0.9]))
    builder.add_sentence([1, 2, 3, 4])
    ex = builder.end_document() if builder.add_sentence([5, 6, 7]) is None else None
    assert ex == PackedExample([1, 2, 3, 4, 5, 6, 7], [])


def test_blank_line_flushes_and_empty_document_is_nothing():
    builder = ExampleBuilder(128, random.Random(0))
    assert builder.end_document() is None
    builder.add_sentence([7, 8])
    ex = builder.end_document()
    assert ex.first_segment + ex.second_segment == [7, 8]
    assert builder.end_document() is None


def test_random_target_length_happens_about_five_percent():
    rng = random.Random(1)
    docs = [[[1] * 10] * 50 for _ in range(200)]
    examples = build_all(docs, 64, seed=5)
    lengths = [len(e.first_segment) + len(e.second_segment) for e in examples]
    short = sum(1 for n in lengths if n < 59) / len(lengths)
    assert 0.01 < short < 0.25, short
    del rng


def test_too_short_length_rejected():
    with pytest.raises(ValueError, match=">= 8"):
        ExampleBuilder(7, random.Random(0))
