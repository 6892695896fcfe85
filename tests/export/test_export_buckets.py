"""Length buckets: which lengths an export pads to (the outputs of every bucket are
checked against the Keras model in test_export_fresh_load.py)."""

import json
import os

import pytest
from export_helpers import BEAM, BUCKETS, SEQ, SQUAD_SEQ

from electra_tf.core.errors import InputError
from electra_tf.serving.export import parse_length_buckets
from electra_tf.serving.graph import length_buckets


def test_default_buckets_grow_by_at_most_half_up_to_the_window():
    assert length_buckets(128) == (8, 16, 24, 32, 48, 64, 96, 128)
    assert length_buckets(512) == (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
    assert length_buckets(100) == (8, 16, 24, 32, 48, 64, 96, 100)
    assert length_buckets(16) == (8, 16)
    assert length_buckets(8) == (8,)


def test_given_buckets_are_sorted_capped_and_end_at_the_window():
    assert length_buckets(128, [64, 8, 8, 32]) == (8, 32, 64, 128)
    assert length_buckets(128, [128]) == (128,)  # the fixed window
    assert length_buckets(128, [512, 200]) == (128,)
    # the joint span head's beam needs beam_size positions
    assert length_buckets(128, [4, 8, 32], min_length=20) == (32, 128)
    with pytest.raises(ValueError, match="length buckets must be >= 1"):
        length_buckets(128, [0, 16])


@pytest.mark.parametrize("values", [["abc"], ["16", "x"], ["0"], ["-4"], [""], ["1.5"],
                                    ["1_000"], ["+8"], ["\u0668"]])  # (int() reads them)
def test_bad_length_buckets_flag_is_one_input_error(values):
    with pytest.raises(InputError, match="--length_buckets must be whole numbers >= 1"):
        parse_length_buckets(values)


def test_length_buckets_flag_values():
    assert parse_length_buckets(None) is None
    assert parse_length_buckets(["32", "16"]) == (32, 16)


def test_exports_record_their_buckets(exports):
    want = {"ner": (*BUCKETS, SEQ), "mrpc": (*BUCKETS, SEQ), "rtd": (*BUCKETS, SEQ),
            "squad": (*BUCKETS, SQUAD_SEQ),
            "squad_joint": (*(b for b in BUCKETS if b >= BEAM), SQUAD_SEQ)}
    for name, buckets in want.items():
        with open(os.path.join(exports[name][1], "assets.extra", "export_info.json")) as f:
            assert tuple(json.load(f)["length_buckets"]) == buckets, name


@pytest.mark.parametrize("length", [2, 10_000])
def test_a_window_the_model_cannot_take_is_refused(finetuned_dirs, export_pretrained_dir,
                                                   length):
    """Above the model's positions every request would fail in the position embedding."""
    from electra_tf.serving.export import load_spec

    with pytest.raises(InputError, match=rf"--max_seq_length={length}: the model in .* "
                                         r"takes 3 to \d+ positions"):
        load_spec("token_classification", finetuned_dirs["ner"], max_seq_length=length)
    with pytest.raises(InputError, match=rf"--max_seq_length={length}"):
        load_spec("rtd", export_pretrained_dir, max_seq_length=length)


@pytest.mark.parametrize("length", [3, 4])
def test_a_squad_window_without_room_for_question_and_context_is_refused(finetuned_dirs,
                                                                         length):
    """At 3 or 4 positions the question had kept no piece ((L - 3) // 2 = 0), silently."""
    from electra_tf.serving.export import load_spec

    with pytest.raises(InputError, match=rf"--max_seq_length={length}: a squad export of the "
                                         r"model in .* takes 5 to \d+ positions"):
        load_spec("squad", finetuned_dirs["squad"], max_seq_length=length)
    assert load_spec("squad", finetuned_dirs["squad"], max_seq_length=5).max_seq_length == 5


def test_a_recorded_window_the_model_cannot_take_names_the_record(finetuned_dirs, tmp_path):
    """No --max_seq_length given: the message had named that flag at the record's value."""
    import json
    import shutil

    from electra_tf.serving.export import load_spec

    folder = tmp_path / "ner"
    shutil.copytree(finetuned_dirs["ner"], folder)
    path = folder / "finetuning_config.json"
    record = json.loads(path.read_text())
    record["max_seq_length"] = 10_000
    path.write_text(json.dumps(record))
    with pytest.raises(InputError) as raised:
        load_spec("token_classification", str(folder))
    assert str(raised.value) == (
        f"the max_seq_length 10000 that {folder} records: the model in {folder} takes 3 to "
        "512 positions; give --max_seq_length")
