"""benchmarks/bench_gpu.py: the FLOP formula against hand counts, its TFRecord encoder,
and (slow) the --toy run end to end on CPU through JaxPretraining.train_steps."""

import json
import math
import os
import subprocess
import sys
import types

import pytest
from helpers import patience

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import bench_gpu  # noqa: E402


def enc(e, h, i, layers):
    return types.SimpleNamespace(resolved_embedding_size=e, hidden_size=h, intermediate_size=i,
                                 num_hidden_layers=layers)


def test_flops_of_a_tiny_config_match_a_hand_count():
    # L=8, V=10, N=2. D: E=4, H=6, I=12, 1 layer. G: E=4, H=2, I=8, 1 layer.
    # D per token: projection 2*4*6 = 48; layer 2*(4*36 + 2*6*12) = 576, attention
    #   2*2*8*6 = 192; RTD head 2*(36 + 6) = 84 -> 900; x 8 tokens = 7200.
    # G per token: projection 2*4*2 = 16; layer 2*(4*4 + 2*2*8) = 96, attention
    #   2*2*8*2 = 64 -> 176; x 8 = 1408.
    # MLM head per position: 2*2*4 + 2*4*10 = 96; x 2 = 192.
    # forward 7200 + 1408 + 192 = 8800; training 3 x 8800 = 26400.
    f = bench_gpu.model_flops_per_sequence(enc(4, 6, 12, 1), enc(4, 2, 8, 1), seq_len=8,
                                           num_predictions=2, vocab_size=10)
    assert f == {"discriminator_forward": 7200, "generator_forward": 1408,
                 "mlm_head_forward": 192, "forward": 8800, "train": 26400}
    # No projection when E == H; layers multiply the layer term only.
    g = bench_gpu.model_flops_per_sequence(enc(6, 6, 12, 2), enc(4, 2, 8, 1), seq_len=8,
                                           num_predictions=2, vocab_size=10)
    assert g["discriminator_forward"] == 8 * (2 * 768 + 84)


# The toy config (D: E 32, H 64, I 256, 1 layer; G: E 32, H 16, I 64, 1 layer; L 32,
# N 4, V 512), by hand: D per token 4096 + (98304 + 8192) + 8320 = 118912, x 32 =
# 3805184; G per token 1024 + (6144 + 2048) = 9216, x 32 = 294912; MLM head
# 1024 + 32768 = 33792, x 4 = 135168; forward 4235264; training 12705792.
TOY_TRAIN_FLOPS = 12_705_792


def test_flops_of_the_toy_config_and_small_agree_with_hand_and_cpu_benchmark_counts():
    assert bench_gpu.config_flops("toy")["train"] == TOY_TRAIN_FLOPS
    import bench_pretraining

    small = bench_gpu.pretraining_config("small")
    assert bench_gpu.config_flops("small") == bench_pretraining.model_flops_per_sequence(small)


def test_records_written_without_tensorflow_read_back_through_the_project_reader(tmp_path):
    import numpy as np

    from electra_tf.data.tfrecord_reader import (
        LOCAL_FILES,
        check_records,
        parse_example,
        read_records,
    )

    config = bench_gpu.pretraining_config("toy")
    rows = bench_gpu.synthetic_data(str(tmp_path), config, 5)
    path = str(tmp_path / "pretrain_data.tfrecord-00000-of-00001")
    records = list(read_records(path))  # CRC-checked
    assert len(records) == 5
    keys = ("input_ids", "input_mask", "segment_ids")
    for r, record in enumerate(records):
        example = parse_example(record, keys)
        for k in keys:
            np.testing.assert_array_equal(example[k], rows[k][r])
    assert check_records(path, config.max_seq_length, "--train_data", LOCAL_FILES) == [path]
    ids = rows["input_ids"]
    assert (ids[:, 0] == bench_gpu.SPECIALS.index("[CLS]")).all()
    assert ((ids == bench_gpu.SPECIALS.index("[SEP]")).sum(1) == 2).all()
    assert ((rows["segment_ids"] == 0).sum(1) >= 2).all()


LEASE = os.path.join(REPO, "benchmarks", "gpu_lease.sh")


def lease(mode, **env):
    return subprocess.run(["bash", LEASE, *([mode] if mode else [])], cwd=REPO,
                          env=dict(os.environ, PY=sys.executable, **env),
                          capture_output=True, text=True, timeout=patience(600))


def test_the_lease_scripts_settings_are_the_benchmarks():
    """A misspelt --only key is refused, so the lease script's default settings must all
    exist: the lease would otherwise be spent on an argument error."""
    with open(LEASE) as f:
        only = next(ln for ln in f if ln.startswith("ONLY=")).split(":-", 1)[1].rstrip("}\n")
    args = bench_gpu.parse_args(["--sizes=small,base,base512", f"--only={only}"])
    keys = [bench_gpu.setting_key(s) for s in bench_gpu.settings(args)]
    assert sorted(keys) == sorted(only.split(",")) and len(keys) == 7
    with pytest.raises(SystemExit) as e:
        bench_gpu.parse_args(["--sizes=small", "--only=electra_tf/small/bf16/K100"])
    assert e.value.code == 2


@pytest.mark.parametrize("mode, env, message", [
    ("", {}, "usage: "),
    ("fly", {}, "usage: "),
    ("toy", {"OUT": ""}, "set OUT"),
])
def test_the_lease_script_refuses_bad_usage_in_one_line(mode, env, message):
    proc = lease(mode, **env)
    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], proc.stderr


@pytest.mark.slow
def test_the_toy_run_writes_every_field(tmp_path):
    """Through benchmarks/gpu_lease.sh, as a lease runs it (toy sizes, no wheels)."""
    proc = lease("toy", OUT=str(tmp_path))
    out = str(tmp_path / "gpu_lease")
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    with open(tmp_path / "device.txt") as f:
        device = f.read()
    assert "| jax " in device and "| keras " in device
    with open(tmp_path / "gpu_lease.log") as f:
        assert "electra_tf/toy/bf16/K10:" in f.read()
    assert "command: python3 benchmarks/bench_gpu.py --toy" in proc.stdout
    assert "device: cpu" in proc.stdout and "date: " in proc.stdout
    with open(out + ".json") as f:
        report = json.load(f)
    assert report["device"]["device_kind"] and report["device"]["platform"] == "cpu"
    assert report["peak_tflops"]["bf16"] > 0 and report["peak_tflops"]["fp32"] > 0
    assert report["flops_per_sequence"]["toy"]["train"] == TOY_TRAIN_FLOPS
    rows = {bench_gpu.setting_key(r): r for r in report["results"]}
    assert set(rows) == set(bench_gpu.TOY_ONLY.split(","))
    # the traced setting's archive: one file, a jax.profiler trace inside, small enough
    trace = rows["electra_tf/toy/bf16/K10"]["profile"]
    assert trace == {"archive": "gpu_lease.electra_tf_toy_bf16_K10.trace.tar.gz",
                     "bytes": os.path.getsize(tmp_path / trace["archive"])}
    import tarfile

    with tarfile.open(tmp_path / trace["archive"]) as tar:
        assert any(n.endswith(".xplane.pb") for n in tar.getnames()), tar.getnames()
    assert len(os.listdir(tmp_path)) <= 8
    for key in ("electra_tf/toy/fp32/K1", "electra_tf/toy/bf16/K10"):
        r = rows[key]
        assert "error" not in r, r.get("error")
        assert r["model_flops_per_sequence"] == TOY_TRAIN_FLOPS
        assert r["sequences_per_second"] == pytest.approx(8 / r["step_s"])
        assert r["model_tflops"] == pytest.approx(
            TOY_TRAIN_FLOPS * r["sequences_per_second"] / 1e12)
        assert r["mfu"] == pytest.approx(r["model_tflops"] / report["peak_tflops"][r["precision"]])
        assert r["compile_s"] >= 0 and r["first_call_s"] > r["step_s"]
        assert len(r["chunk_s"]) == 2 and "peak_memory_bytes" in r  # None on CPU
        assert math.isfinite(r["first_loss"]) and all(map(math.isfinite, r["losses"]))
    # The steps really ran through JaxPretraining.train_steps, with the run's settings:
    # first call K steps, then 1 warmup + 2 timed chunks of 10.
    assert rows["electra_tf/toy/fp32/K1"]["optimizer_steps"] == 1 + 30
    assert rows["electra_tf/toy/bf16/K10"]["optimizer_steps"] == 10 + 30 + 10  # + the traced
    assert rows["electra_tf/toy/bf16/K10"]["dtype_policy"] == "mixed_bfloat16"
    assert rows["electra_tf/toy/fp32/K1"]["dtype_policy"] == "float32"
    assert rows["electra_tf/toy/bf16/K10"]["run_config"] == {"mixed_precision": "bf16",
                                                             "jax_steps_per_call": 10}
    hf_ok, why = bench_gpu.hf_available()
    for key in ("hf/toy/fp32/eager", "hf/toy/bf16/eager"):
        if hf_ok:
            assert "error" not in rows[key], rows[key].get("error")
            assert rows[key]["sequences_per_second"] > 0
            assert rows[key]["model_flops_per_sequence"] == TOY_TRAIN_FLOPS
        else:
            assert rows[key]["skipped"] == why
    with open(out + ".md") as f:
        md = f.read()
    assert report["command"] in md and report["date"] in md
    assert md.count("| toy (1 layer, H 64) b8 s32 |") == 4
