"""Bad input to the exported signatures is refused with InvalidArgument naming the input.

Run in conftest.py's fresh process (load_check.py, both loaders: TF2 and the
server's TF1 session loader): a crash inside an op (a scalar string reaching
TF-Text's normalizer segfaulted) fails these tests through run_fresh's return
code instead of killing pytest. TF Serving checks no input shape, so every
check here must hold in the graph itself. The cases: export_helpers.bad_input_rows.
"""

import pytest
from export_helpers import BAD_INPUT_TEXT_EXPORTS

TEXT_EXPORTS = BAD_INPUT_TEXT_EXPORTS


@pytest.fixture(scope="module")
def bad(fresh):
    """[(export, signature, case, inputs, expected message, result)]: conftest.py's fresh
    process ran them (bad_input_rows)."""
    return fresh["bad_input"]


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
