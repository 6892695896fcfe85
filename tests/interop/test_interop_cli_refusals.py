"""convert's command line refuses, in one line and before any model is read: an
--output folder that already holds files (without --overwrite), and
--model_hparam_overrides that is not a JSON object. Needs neither torch nor a model."""

import pytest
from helpers import error_line, run_module


def test_an_output_folder_holding_files_is_kept(tmp_path):
    out = tmp_path / "mrpc_tf"
    out.mkdir()
    (out / "finetuned.weights.h5").write_bytes(b"a model")
    for direction in (["--from=hf", f"--model_dir={tmp_path / 'hf'}"],
                      ["--to=hf", f"--model_dir={tmp_path / 'model'}"]):
        proc = run_module("electra_tf.convert", *direction, f"--output={out}")
        error_line(proc, f"--output {out} already holds files", "--overwrite")
    assert [p.name for p in out.iterdir()] == ["finetuned.weights.h5"]
    assert (out / "finetuned.weights.h5").read_bytes() == b"a model"


@pytest.mark.parametrize("value,message", [
    ("{bad json", "--model_hparam_overrides is not valid JSON"),
    ('{"hidden_size": 1' + "0" * 5000 + "}", "--model_hparam_overrides is not valid JSON"),
    ("[1]", "--model_hparam_overrides must be a JSON object"),
])
def test_overrides_that_are_not_a_json_object_are_one_line(value, message, tmp_path):
    proc = run_module("electra_tf.convert", "--from=tf1", f"--checkpoint={tmp_path / 'ckpt'}",
                      "--model_size=small", f"--model_hparam_overrides={value}",
                      f"--output={tmp_path / 'out'}")
    error_line(proc, message)
    assert not (tmp_path / "out").exists()


def test_a_flag_of_another_direction_is_refused_not_dropped(tmp_path):
    """--label_names given to --from=hf had been dropped silently (the model recorded
    transformers' id2label instead)."""
    cases = [(["--from=hf", f"--model_dir={tmp_path / 'hf'}", "--label_names=neg,pos"],
              "--label_names is for --from=tf1, not --from=hf"),
             (["--from=tf1", f"--checkpoint={tmp_path / 'ckpt'}", "--generator"],
              "--generator is for --to=hf, not --from=tf1"),
             (["--to=hf", f"--model_dir={tmp_path / 'model'}", "--tf1_task=reviews"],
              "--tf1_task is for --from=tf1, not --to=hf"),
             (["--from=tf1", f"--checkpoint={tmp_path / 'ckpt'}", "--model_size=small",
               f"--model_dir={tmp_path / 'model'}"],
              "--model_dir is for --from=hf or --to=hf, not --from=tf1")]
    for flags, message in cases:
        proc = run_module("electra_tf.convert", *flags, f"--output={tmp_path / 'out'}")
        error_line(proc, message, "leave it out")
        assert not (tmp_path / "out").exists()
