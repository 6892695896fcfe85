"""Bad input to the exported signatures is refused with InvalidArgument naming the input.

Run in a fresh process of its own (load_check.py, both loaders: TF2 and the
server's TF1 session loader): a crash inside an op (a scalar string reaching
TF-Text's normalizer segfaulted) fails these tests through run_fresh's return
code instead of killing pytest. TF Serving checks no input shape, so every
check here must hold in the graph itself.
"""

import numpy as np
import pytest
from export_helpers import run_fresh, text_inputs

TEXT_EXPORTS = ("ner", "mrpc", "stsb", "squad", "rtd")
MATRIX = np.array([[b"alpha", b"beta"], [b"gamma", b"delta"]], object)


def _text_cases(spec):
    """(case, inputs, expected message or None for "accepted")."""
    good = text_inputs(spec, ["hello world"])
    names = list(good)
    cases = []
    for name in names:
        cases.append((f"scalar {name}", {**good, name: np.array(b"hello world", object)},
                      f"input {name} must be a 1-D string tensor of shape [batch]"))
        cases.append((f"matrix {name}", {**good, name: MATRIX},
                      f"input {name} must be a 1-D string tensor of shape [batch]"))
    if len(names) == 2:
        cases.append(("batch mismatch", {names[0]: np.array([b"a", b"b"], object),
                                         names[1]: np.array([b"c"], object)},
                      f"inputs {names[0]} and {names[1]} must have the same batch size"))
    cases.append(("empty batch", {n: np.zeros([0], object) for n in names}, None))
    return cases


def _ids_cases(spec):
    config = spec.model.encoder.config
    V, T, P = config.vocab_size, config.type_vocab_size, config.max_position_embeddings
    ids = np.array([[101, 5, 6, 102], [101, 7, 102, 0]], np.int32)
    mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0]], np.int32)
    types = np.zeros_like(ids)

    def case(name, want, word_ids=ids, input_mask=mask, type_ids=types):
        return (name, {"input_word_ids": word_ids, "input_mask": input_mask,
                       "input_type_ids": type_ids}, want)

    def put(a, value, at=(0, 1)):
        a = a.copy()
        a[at] = value
        return a

    vocab = f"input_word_ids must hold ids in [0, {V}) (the vocab size)"
    type_vocab = f"input_type_ids must hold ids in [0, {T}) (the type vocab size)"
    binary = "input_mask must hold only 0 and 1"
    return [
        case("negative id", vocab, word_ids=put(ids, -1)),
        case("id = vocab size", vocab, word_ids=put(ids, V)),
        case("negative type id", type_vocab, type_ids=put(types, -1)),
        case("type id = type vocab size", type_vocab, type_ids=put(types, T)),
        case("mask 2", binary, input_mask=put(mask, 2)),
        case("mask -1", binary, input_mask=put(mask, -1)),
        case("mask of another batch size",
             "input_mask must have the shape of input_word_ids [batch, seq]",
             input_mask=mask[:1]),
        case("mask of another length",
             "input_mask must have the shape of input_word_ids [batch, seq]",
             input_mask=mask[:, :3]),
        case("type ids of another batch size",
             "input_type_ids must have the shape of input_word_ids [batch, seq]",
             type_ids=np.zeros([3, 4], np.int32)),
        case("1-D ids", "input input_word_ids must be a 2-D int32 tensor of shape [batch, seq]",
             word_ids=ids[0], input_mask=mask[0], type_ids=types[0]),
        case("3-D ids", "input input_word_ids must be a 2-D int32 tensor of shape [batch, seq]",
             word_ids=ids[None], input_mask=mask[None], type_ids=types[None]),
        case("1-D mask", "input input_mask must be a 2-D int32 tensor of shape [batch, seq]",
             input_mask=mask[0]),
        case("too many positions", f"input_word_ids must have at most {P} positions",
             word_ids=np.full([1, P + 1], 5, np.int32), input_mask=np.ones([1, P + 1], np.int32),
             type_ids=np.zeros([1, P + 1], np.int32)),
        case("empty batch", None, word_ids=ids[:0], input_mask=mask[:0], type_ids=types[:0]),
    ]


@pytest.fixture(scope="module")
def bad(exports, tmp_path_factory):
    """[(export, signature, case, inputs, expected message, result)] from one fresh process."""
    rows = []
    for name in TEXT_EXPORTS:
        for case, inputs, want in _text_cases(exports[name][0]):
            rows.append((name, "serving_default", case, inputs, want))
    for name, signature in (("ner", "serving_ids"), ("ner_ids", "serving_default"),
                            ("squad", "serving_ids")):
        for case, inputs, want in _ids_cases(exports[name][0]):
            rows.append((name, signature, case, inputs, want))
    jobs = [{"path": exports[r[0]][1], "signature": r[1], "inputs": r[3]} for r in rows]
    out = run_fresh(jobs, str(tmp_path_factory.mktemp("bad_input")))
    return [r + (res,) for r, res in zip(rows, out["results"])]


def _check(rows):
    assert rows
    for name, signature, case, inputs, want, result in rows:
        for loader in ("tf2", "tf1"):
            out = result[loader]
            where = (name, signature, case, loader)
            if want is None:  # accepted: the outputs have the input's batch size
                assert "error" not in out, (where, out.get("error"))
                batch = len(next(iter(inputs.values())))
                assert all(v.shape[:1] == (batch,) for v in out.values()), where
                continue
            assert "error" in out, (where, "accepted", {k: v.shape for k, v in out.items()})
            assert out["error"].startswith("InvalidArgumentError"), (where, out["error"][:500])
            assert f"{signature}: {want}" in out["error"], (where, out["error"][:800])


@pytest.mark.parametrize("name", TEXT_EXPORTS)
def test_text_signature_takes_only_1d_strings(name, bad):
    """A scalar (which crashed TF-Text's normalizer) or a matrix (which gave one row per
    input row) is refused, naming the input; so is a pair of another batch size."""
    _check([r for r in bad if r[0] == name and r[1] == "serving_default"])


@pytest.mark.parametrize("name,signature", [("ner", "serving_ids"),
                                            ("ner_ids", "serving_default"),
                                            ("squad", "serving_ids")])
def test_ids_signature_refuses_out_of_range_and_misshaped_inputs(name, signature, bad):
    """A negative id (Keras' lookup wrapped it to another row), ids past the vocab or the
    type vocab, mask values other than 0/1 and inputs of other shapes (broadcast before)."""
    _check([r for r in bad if r[0] == name and r[1] == signature])
