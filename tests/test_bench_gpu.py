"""benchmarks/bench_gpu.py: the FLOP formula against hand counts, its TFRecord encoder,
and (slow) the --toy run end to end on CPU through JaxPretraining.train_steps."""

import json
import math
import os
import subprocess
import sys
import types

import pytest
from helpers import bench_leftovers, patience

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


def lease_lists() -> dict:
    """The lease script's lists of setting keys (TARGETS=..., AB_FIRST_PROFILE=...)."""
    lists = {}
    with open(LEASE) as f:
        for line in f:
            name, _, value = line.rstrip("\n").partition("=")
            if name.startswith(("TARGETS", "AB")) and name.isupper():
                lists[name] = value.split(",")
    return lists


def test_the_lease_scripts_settings_are_the_benchmarks():
    """A misspelt key is refused, so the lease script's settings must all exist: the lease
    would otherwise be spent on an argument error. They run in the script's order."""
    lists = lease_lists()
    assert lists["TARGETS"] == [
        "electra_tf/small/bf16/K10", "electra_tf/base/bf16/K10", "hf/small/bf16/compile",
        "electra_tf/base512/bf16/K10", "hf/base/bf16/compile", "electra_tf/small/bf16/K1",
        "hf/base512/bf16/compile"]
    for plan, name in ((lists["TARGETS"] + lists["AB"], "TARGETS"),
                       (lists["AB_FIRST"], "AB_FIRST")):
        args = bench_gpu.parse_args(["--sizes=small,base,base512", f"--only={','.join(plan)}",
                                     f"--profile={','.join(lists[name + '_PROFILE'])}",
                                     f"--ab_prefetch={','.join(lists[name + '_AB_PREFETCH'])}"])
        assert [bench_gpu.setting_key(s) for s in bench_gpu.settings(args)] == plan
        # every A/B row has its A in the plan before it (the ad0 rows are the fused rows'
        # A: fused attention is measured without attention dropout on both sides)
        for i, key in enumerate(plan):
            variant = bench_gpu.parse_key(key).get("variant")
            if variant and not variant.endswith("ad0"):
                a = key.rsplit("/", 1)[0] + ("/" + variant.rsplit("+", 1)[0] if "+" in variant
                                             else "")
                assert a in plan[:i], key
    # the toy run's stand-ins: each variant and steps per call once, HF eager
    toy = bench_gpu.parse_args(["--toy", f"--only={','.join(lists['TARGETS'] + lists['AB'])}",
                                f"--profile={','.join(lists['TARGETS_PROFILE'])}",
                                f"--ab_prefetch={','.join(lists['TARGETS_AB_PREFETCH'])}"])
    assert toy.only.split(",") == TOY_LEASE
    assert toy.profile == ["electra_tf/toy/bf16/K10"]
    assert toy.ab_prefetch == ["electra_tf/toy/bf16/K1", "electra_tf/toy/bf16/K10"]
    with pytest.raises(SystemExit) as e:
        bench_gpu.parse_args(["--sizes=small", "--only=electra_tf/base/bf16/K10"])
    assert e.value.code == 2


TOY_LEASE = ["electra_tf/toy/bf16/K10", "hf/toy/bf16/eager", "electra_tf/toy/bf16/K1",
             "electra_tf/toy/bf16/K50", "electra_tf/toy/bf16/K10/nocb",
             "electra_tf/toy/bf16/K10/ad0", "electra_tf/toy/bf16/K10/ad0+fused",
             "electra_tf/toy/bf16/K10/nodonate"]


def test_a_timed_chunk_is_whole_calls_of_the_settings_steps():
    assert [bench_gpu.whole_calls(20, k) for k in (1, 10, 20, 3, 50)] == [20, 20, 20, 21, 50]
    args = bench_gpu.parse_args(["--sizes=small", "--only=electra_tf/small/bf16/K50"])
    assert [bench_gpu.setting_key(s) for s in bench_gpu.settings(args)] == [
        "electra_tf/small/bf16/K50"]


def test_nocb_runs_its_setting_without_cuda_graphs_and_the_others_as_they_were(monkeypatch):
    seen = []

    def fake(cmd, env, result_file, timeout_s):
        os.remove(result_file)
        seen.append(env.get("XLA_FLAGS"))
        return {}

    monkeypatch.setattr(bench_gpu, "run_worker_process", fake)
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=DIR")
    args = bench_gpu.parse_args(["--sizes=small", "--only=electra_tf/small/bf16/K10/nocb"])
    for variant in ("nocb", "ad0+nocb", "ad0"):
        bench_gpu.run_worker("electra_tf", args, 10, size="small", precision="bf16",
                             steps_per_call=10, variant=variant)
    bench_gpu.run_worker("electra_tf", args, 10, size="small", precision="bf16",
                         steps_per_call=10)
    nocb = "--xla_dump_to=DIR --xla_gpu_enable_command_buffer="
    assert seen == [nocb, nocb, "--xla_dump_to=DIR", "--xla_dump_to=DIR"]


@pytest.mark.parametrize("key, message", [
    ("electra_tf/small/bf16/K10/fused", "put ad0 before it"),
    ("electra_tf/small/bf16/K10/ad0+ad0", "each once"),
    ("electra_tf/small/bf16/K10/flash", "options are ad0, fused, prefetch, nodonate"),
    ("electra_tf/small/bf16/K0", "K<number>"),
    ("electra_tf/small/fp16/K1", "precision is one of fp32, bf16"),
    ("hf/small/bf16/jit", "eager, compile"),
    ("electra_tf/huge/bf16/K1", "unknown size"),
    ("electra_tf/small/bf16/K01", "write it electra_tf/small/bf16/K1"),
])
def test_a_malformed_setting_key_is_refused_by_what_is_wrong(key, message):
    with pytest.raises(ValueError, match=message):
        bench_gpu.parse_key(key)


def test_the_budget_guard_runs_in_order_and_skips_what_its_scaled_estimate_does_not_fit(
        tmp_path, monkeypatch):
    """Fake workers on a fake clock: each setting takes twice its estimate, so once the
    first has run the guard doubles the estimates; results are written after every
    setting; the A/B table pairs each variant with its A."""
    now = [0.0]
    writes = []
    monkeypatch.setattr(bench_gpu, "_clock", lambda: now[0])
    monkeypatch.setattr(bench_gpu, "ESTIMATE_S", {("electra_tf", "small"): 60,
                                                  ("hf", "small", "compile"): 75})
    monkeypatch.setattr(bench_gpu, "AB_PREFETCH_EXTRA_S", {"small": 3})
    monkeypatch.setattr(bench_gpu, "hf_available", lambda: (True, ""))
    write = bench_gpu.write_report
    monkeypatch.setattr(bench_gpu, "write_report", lambda report, output: (
        writes.append([r.get("skipped", "ran") for r in report["results"]]),
        write(report, output)))

    def worker(kind, args, timeout_s, **extra):
        if kind == "matmul":
            now[0] += 20
            return {"device": {"device_kind": "fake", "platform": "gpu", "jax": "0"},
                    "peak_tflops": {"bf16": 800.0, "fp32": 400.0}, "matmul": []}
        s = {"impl": kind, "size": extra["size"], "precision": extra["precision"],
             **({"steps_per_call": extra["steps_per_call"], "variant": extra.get("variant", "")}
                if kind == "electra_tf" else {"hf_mode": extra["hf_mode"]})}
        wall = 2 * bench_gpu.estimate_s(s, args)
        assert timeout_s <= args.budget_s - now[0]
        now[0] += wall
        out = {"step_s": 0.01, "first_loss": 10.0, "losses": [9.0], "compile_s": 30.0,
               "process_wall_s": wall, "chunk_steps": 20}
        if extra.get("ab_prefetch_chunks"):
            out["ab_prefetch"] = {"off_median_chunk_s": 0.2, "on_median_chunk_s": 0.25}
        return out

    monkeypatch.setattr(bench_gpu, "run_worker", worker)
    plan = ["electra_tf/small/bf16/K10", "electra_tf/small/bf16/K10/ad0",
            "electra_tf/small/bf16/K10/ad0+fused", "hf/small/bf16/compile"]
    argv = ["--sizes=small", f"--only={','.join(plan)}", "--budget_s=300",
            "--ab_prefetch=electra_tf/small/bf16/K10", f"--output={tmp_path / 'r'}"]
    report = bench_gpu.main_orchestrate(bench_gpu.parse_args(argv), argv)
    rows = report["results"]
    assert [bench_gpu.setting_key(r) for r in rows] == plan
    # 20 s matmul; K10: estimate 60 + 3 (its prefetch A/B), ran 126 s; ad0: 60 x 2 = 120
    # of 154 left, ran; then 34 s left: neither 120 nor 150 fits
    assert [r["estimate_s"] for r in rows] == [63, 60, 60, 75]
    assert "skipped" not in rows[0] and "skipped" not in rows[1]
    assert rows[2]["skipped"] == ("needs about 120 s (estimate 60 s x 2.00, measured / "
                                  "estimated so far), 34 s of --budget_s left")
    assert rows[3]["skipped"].startswith("needs about 150 s")
    assert writes == [[], ["ran"], ["ran"] * 2, ["ran"] * 2 + [rows[2]["skipped"]],
                      ["ran"] * 2 + [rows[2]["skipped"], rows[3]["skipped"]]] + [writes[-1]]
    with open(tmp_path / "r.md") as f:
        md = f.read()
    assert ("| electra_tf/small/bf16/K10/ad0 | attention dropout 0 | electra_tf/small/bf16/K10 "
            "| 12,800.0 | 12,800.0 | 1.000 | 10.0000, 10.0000 |") in md
    assert ("| electra_tf/small/bf16/K10 | device prefetch, interleaved in one process | "
            "electra_tf/small/bf16/K10 | 12,800.0 | 10,240.0 | 0.800 | - |") in md
    assert "skipped: needs about 120 s" in md and "| 126 (63) |" in md


@pytest.mark.parametrize("mode, env, message", [
    ("", {}, "usage: "),
    ("fly", {}, "usage: "),
    ("toy", {"OUT": ""}, "set OUT"),
    ("toy", {"OUT": "x", "PLAN": "fast"}, "PLAN is targets or ab"),
])
def test_the_lease_script_refuses_bad_usage_in_one_line(mode, env, message):
    proc = lease(mode, **env)
    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], proc.stderr


# As on the GPU machine, which has no TensorFlow: every process of the toy run (the
# script's, the orchestrator, each worker, HF's included) finds it missing.
HIDE_TENSORFLOW = """import sys
for name in ("tensorflow", "tensorflow_text", "tf_keras"):
    sys.modules[name] = None  # as if not installed: import fails, find_spec gives None
"""


# The toy run's plan (the slow test): each variant option, the trace and the interleaved
# device-prefetch A/B once, as the lease's keys' toy stand-ins, each variant row with its
# A before it. The A is the attention-dropout-0 row, so that fused attention (which needs
# it) and the undonated state share one A: three electra_tf processes where the lease's
# plan (TOY_LEASE) has five. What the plan has besides: the plain row, whose only
# difference is the default attention dropout (pretraining_config, checked in-process);
# and the steps-per-call-1 row, the same worker and jax.lax.scan at K=1, the trainer's
# default that every JAX training test runs.
TOY_RUN = ["electra_tf/toy/bf16/K10/ad0", "hf/toy/bf16/eager", "electra_tf/toy/bf16/K10/ad0+fused",
           "electra_tf/toy/bf16/K10/ad0+nodonate"]


@pytest.mark.slow
def test_the_toy_run_writes_every_field(tmp_path):
    """Through benchmarks/gpu_lease.sh, as a lease runs it (toy size, no wheels), with
    TensorFlow hidden from every process; the plan is TOY_RUN, given through the lease
    script's ONLY, PROFILE and AB_PREFETCH (its own plan's keys are the fast test's)."""
    hide = tmp_path / "hide_tensorflow"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE_TENSORFLOW)
    out_dir = tmp_path / "out"
    # a budget no slow machine runs out of: the guard itself is the fast test's
    scratch = tmp_path / "TMPDIR"
    scratch.mkdir()
    base = TOY_RUN[0]
    plan = [k.replace("/toy/", "/small/") for k in TOY_RUN]  # as a lease names them
    proc = lease("toy", OUT=str(out_dir), BUDGET_S="3600", PYTHONPATH=str(hide),
                 TMPDIR=str(scratch), ONLY=",".join(plan), PROFILE=plan[0], AB_PREFETCH=plan[0])
    out = str(out_dir / "gpu_lease")
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    # each worker's data and model folder, the traces' folders, the result files: removed
    assert not bench_leftovers(scratch), os.listdir(scratch)
    with open(out_dir / "device.txt") as f:
        device = f.read()
    assert "| jax " in device and "| keras " in device
    with open(out_dir / "gpu_lease.log") as f:
        assert f"{base}:" in f.read()
    assert "command: python3 benchmarks/bench_gpu.py --only=" in proc.stdout
    assert "device: cpu" in proc.stdout and "date: " in proc.stdout
    with open(out + ".json") as f:
        report = json.load(f)
    assert report["device"]["device_kind"] and report["device"]["platform"] == "cpu"
    assert report["peak_tflops"]["bf16"] > 0 and report["peak_tflops"]["fp32"] > 0
    assert report["flops_per_sequence"]["toy"]["train"] == TOY_TRAIN_FLOPS
    assert [bench_gpu.setting_key(r) for r in report["results"]] == TOY_RUN
    rows = {bench_gpu.setting_key(r): r for r in report["results"]}
    # the traced setting's archive: one file, a jax.profiler trace inside, small enough
    trace = rows[base]["profile"]
    assert trace["archive"] == "gpu_lease.electra_tf_toy_bf16_K10_ad0.trace.tar.gz"
    assert trace["bytes"] == os.path.getsize(out_dir / trace["archive"]) <= 15 * 2 ** 20
    import tarfile

    with tarfile.open(out_dir / trace["archive"]) as tar:
        assert any(n.endswith(".xplane.pb") for n in tar.getnames()), tar.getnames()
    assert len(os.listdir(out_dir)) <= 8  # what a lease brings back
    electra = [k for k in TOY_RUN if k.startswith("electra_tf/")]
    for key in electra:
        r = rows[key]
        assert "error" not in r and "skipped" not in r, r.get("error") or r.get("skipped")
        assert r["model_flops_per_sequence"] == TOY_TRAIN_FLOPS
        assert r["sequences_per_second"] == pytest.approx(8 / r["step_s"])
        assert r["model_tflops"] == pytest.approx(
            TOY_TRAIN_FLOPS * r["sequences_per_second"] / 1e12)
        assert r["mfu"] == pytest.approx(r["model_tflops"] / report["peak_tflops"]["bf16"])
        assert r["compile_s"] >= 0 and r["first_call_s"] > r["step_s"]
        assert len(r["chunk_s"]) == 2 and "peak_memory_bytes" in r  # None on CPU
        assert math.isfinite(r["first_loss"]) and all(map(math.isfinite, r["losses"]))
        assert r["dtype_policy"] == "mixed_bfloat16"
        assert r["process_wall_s"] > 0 and r["estimate_s"] > 0
        # every row of the plan runs without attention dropout (the default's 0.1 is
        # what the key without ad0 gets: bench_gpu.pretraining_config, checked below)
        assert r["attention_probs_dropout_prob"] == {"discriminator": 0.0, "generator": 0.0}
    default = bench_gpu.pretraining_config("toy")
    assert (default.discriminator_config().attention_probs_dropout_prob
            == default.generator_config().attention_probs_dropout_prob == 0.1)
    # The steps really ran through JaxPretraining.train_steps, with the run's settings:
    # first call K steps, then 1 warmup + 2 timed chunks of 10, then the A/B's 4 chunks
    # and the traced call (K steps) where asked.
    assert rows[base]["optimizer_steps"] == 10 + 30 + 40 + 10
    assert rows["electra_tf/toy/bf16/K10/ad0+fused"]["optimizer_steps"] == 10 + 30
    ab = rows[base]["ab_prefetch"]
    assert len(ab["off_chunk_s"]) == len(ab["on_chunk_s"]) == 2, ab
    # each variant is what its key says, and recorded as such
    plain, fused = rows[base], rows["electra_tf/toy/bf16/K10/ad0+fused"]
    undonated = rows["electra_tf/toy/bf16/K10/ad0+nodonate"]
    assert plain["run_config"] == {"mixed_precision": "bf16", "jax_steps_per_call": 10,
                                   "attention_implementation": "einsum",
                                   "jax_device_prefetch": False}
    assert undonated["run_config"] == plain["run_config"]
    assert fused["run_config"]["attention_implementation"] == "fused"
    assert fused["fused_attention_kernel"] == "xla"  # cuDNN's kernel is for GPUs
    assert "fused_attention_kernel" not in plain
    assert plain["donated_fraction"] > 0.99 and undonated["donated_fraction"] == 0
    # the same seeds and batches: the same first loss without donation; fused attention's
    # within float rounding of einsum's (bf16 compute)
    assert undonated["first_loss"] == pytest.approx(plain["first_loss"], rel=1e-6)
    assert fused["first_loss"] == pytest.approx(plain["first_loss"], rel=1e-3)
    hf_ok, why = bench_gpu.hf_available()
    if hf_ok:
        assert "error" not in rows["hf/toy/bf16/eager"], rows["hf/toy/bf16/eager"].get("error")
        assert rows["hf/toy/bf16/eager"]["sequences_per_second"] > 0
        assert rows["hf/toy/bf16/eager"]["model_flops_per_sequence"] == TOY_TRAIN_FLOPS
    else:
        assert rows["hf/toy/bf16/eager"]["skipped"] == why
    with open(out + ".md") as f:
        md = f.read()
    assert report["command"] in md and report["date"] in md
    assert md.count("| toy (1 layer, H 64) b8 s32 |") == len(TOY_RUN)
    assert "attention dropout 0, fused attention (xla) |" in md
    assert "attention dropout 0, state not donated |" in md
    for change in ("| fused attention |", "| state not donated |",
                   "| device prefetch, interleaved in one process |"):
        assert change in md, change
