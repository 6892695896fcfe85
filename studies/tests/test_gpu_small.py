"""The ELECTRA-Small GPU lease (studies/gpu_small): its plan, what travels, the parts,
and the whole command rehearsed on CPU at toy size (slow)."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from helpers import REPO, make_corpus, tiny_vocab_tokens, write_vocab

from studies.gpu_small import bundle, lease, parts

MiB = 2 ** 20


def test_the_plan_gives_both_runs_the_same_flops_and_fits_the_time():
    flops = {o: lease.flops_per_sequence("small", o, 16000) for o in lease.OBJECTIVES}
    assert flops["electra"] > flops["bert_mlm"]  # the generator costs more than D's MLM head
    setting = lease.SETTINGS["small"]
    plans = {m: lease.plan(setting, 480.0, flops, m) for m in lease.MODES}
    for p in plans.values():
        steps = p["steps"]
        assert steps["electra"] % 10 == 0 and steps["bert_mlm"] % 10 == 0
        assert abs(p["flops"]["bert_mlm"] / p["flops"]["electra"] - 1) < 0.01
    # one after the other: two runs and their overheads fit in the time left
    seq = plans["one_after_the_other"]
    per_run = seq["overhead_s"] + seq["steps"]["electra"] * 128 / setting["planning_rate"]
    assert 2 * per_run < 480.0 and seq["run_deadline_s"] >= per_run - 1
    # side by side: one overhead, the whole time at the planned share of the rate each
    side = plans["side_by_side"]
    assert side["overhead_s"] + side["steps"]["electra"] * 128 / (
        setting["planning_rate"] * setting["side_by_side_share"]) < 480.0
    assert side["train_s_each"] > 2 * seq["train_s_each"]
    with pytest.raises(ValueError, match="mode"):
        lease.plan(setting, 480.0, flops, "both")
    for steps in (200, 1230, 9990):
        p = lease.periods(steps)
        assert all(v % 10 == 0 for k, v in p.items() if k != "warmup")
        assert p["log"] <= max(10, steps // 50)  # a stop at a target lands within ~1-2%


def test_the_common_flops_target_is_the_least_any_run_will_reach():
    view = dict(planned=100.0, done=10.0, seconds_left=20.0)
    # the slower run sets the target for both; the plan caps it
    assert lease.flops_target([{**view, "per_s": 2.0}, {**view, "per_s": 4.0}]) == 50.0
    assert lease.flops_target([{**view, "per_s": 20.0}, {**view, "per_s": 40.0}]) == 100.0
    # a run still compiling (no rate yet): no target until it has one
    assert lease.flops_target([{**view, "per_s": None}, {**view, "per_s": 4.0}]) is None
    # a run already stopped: what it did is the target
    assert lease.flops_target([{**view, "final": 30.0}, {**view, "per_s": 4.0}]) == 30.0
    # Ctrl-C after the line at the chunk boundary nearest the target, never past the plan
    assert not lease.stop_now(100, 20, 1000, 300.0)
    assert lease.stop_now(280, 20, 1000, 300.0) and lease.stop_now(270, 20, 1000, 300.0)
    assert not lease.stop_now(980, 20, 1000, 5000.0) and not lease.stop_now(980, 20, 1000, 990)
    # side by side, a run more than the lead ahead of the other going is held, and goes
    # on once the other is within half the lead, or none is going
    assert lease.hold(60.0, 40.0, 10.0, held=False) and not lease.hold(45.0, 40.0, 10.0, False)
    assert lease.hold(47.0, 40.0, 10.0, held=True) and not lease.hold(44.0, 40.0, 10.0, True)
    assert not lease.hold(60.0, None, 10.0, held=True)


def test_the_run_command_is_the_papers_small_on_the_packed_input():
    data = {"train.packed": "t", "heldout.packed": "h", "vocab.txt": "v"}
    cmd = lease.pretraining_command("small", "electra", 5000, data, "m", 16000, 15)
    flags = dict(a[2:].partition("=")[::2] for a in cmd if a.startswith("--"))
    assert flags["model_size"] == "small" and "model_hparam_overrides" not in flags
    assert flags["learning_rate"] == "5e-4" and flags["train_batch_size"] == "128"
    assert flags["num_warmup_steps"] == "500" and "adam_bias_correction" in flags
    assert flags["mixed_precision"] == "bf16" and flags["jax_input_pipeline"] == "packed"
    assert flags["generator_hidden_size"] == "0.25" and flags["max_seq_length"] == "128"
    config = lease.run_config("small", "electra", 16000, 10)
    assert config.discriminator_config().hidden_dropout_prob == 0.1  # the paper's dropout


def test_what_travels_fits_with_the_real_bundle():
    """The tree, the wheels (if fetched) and the real-data bundle as last built
    (studies/gpu_small/bundle_stats.json) are under the lease's 64 MiB."""
    with open(os.path.join(REPO, "studies", "gpu_small", "bundle_stats.json")) as f:
        stats = json.load(f)
    sizes = bundle.travel_size(replace={".bundle": stats["stored_bytes"],
                                        ".whl": max(stats["wheels_bytes"], bundle.travel_size(
                                            carried=(".whl",))[".whl"])})
    assert sizes["total"] < bundle.TRAVEL_LIMIT - bundle.MARGIN, sizes
    assert stats["train_examples"] > 100_000  # the whole corpus, not a sample


@pytest.fixture(scope="module")
def toy_bundle(tmp_path_factory):
    from electra_tf.data.builder import BuildOptions, build_pretraining_data

    root = tmp_path_factory.mktemp("gpu_small")
    vocab = write_vocab(root / "vocab.txt", tiny_vocab_tokens())
    for name, docs, seed, shards in (("records", 300, 1, 2), ("heldout", 40, 2, 1)):
        (root / f"{name}.txt").write_text(make_corpus(docs, seed=seed), encoding="utf-8")
        build_pretraining_data(BuildOptions(files=(str(root / f"{name}.txt"),),
                                            vocab_file=vocab, output_dir=str(root / name),
                                            max_seq_length=32, num_shards=shards))
    manifest = bundle.build(str(root / "records" / "pretrain_data.tfrecord*"),
                            str(root / "heldout" / "pretrain_data.tfrecord*"), vocab,
                            str(root / "bundle"))
    return root, manifest


def test_the_bundle_unpacks_to_the_records(toy_bundle, tmp_path):
    from electra_tf.data.packed import PackedExamples

    root, manifest = toy_bundle
    assert manifest["train_examples"] == 301 and manifest["heldout_examples"] == 40
    data = lease.unpack_bundle(str(root / "bundle"), str(tmp_path))
    assert len(PackedExamples(data["paths"]["train.packed"], 32)) == 301
    # a damaged bundle is refused
    with open(root / "bundle" / "bundle.json") as f:
        broken = json.load(f)
    broken["files"]["vocab.txt"]["sha256"] = "0" * 64
    (tmp_path / "b").mkdir()
    for name in ("train.packed.xz", "heldout.packed.xz", "vocab.txt"):
        (tmp_path / "b" / name).write_bytes((root / "bundle" / name).read_bytes())
    (tmp_path / "b" / "bundle.json").write_text(json.dumps(broken))
    with pytest.raises(SystemExit, match="vocab.txt from the bundle fails its sha256"):
        lease.unpack_bundle(str(tmp_path / "b"), str(tmp_path / "c"))


def run_lease_sh(root, out, budget_s=900, mode="side_by_side"):
    env = {**os.environ, "PY": sys.executable, "OUT": str(out), "BUNDLE": str(root / "bundle"),
           "BUDGET_S": str(budget_s), "TMPDIR": str(root), "MODE": mode}
    return subprocess.run(["bash", "studies/gpu_small/lease.sh", "toy"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1800)


@pytest.mark.slow
@pytest.mark.parametrize("mode", lease.MODES)
def test_the_lease_rehearsed_at_toy_size(toy_bundle, tmp_path, mode):
    root, _ = toy_bundle
    out = tmp_path / "out"
    proc = run_lease_sh(root, out, mode=mode)
    assert proc.returncode == 0, proc.stderr[-4000:]
    files = sorted(os.listdir(out))
    assert len(files) <= 8 and all(os.path.getsize(out / f) <= 16 * MiB for f in files)
    assert files == ["bert_mlm.part-0-of-1", "electra.part-0-of-1", "lease.log",
                     "results.json"]
    results = json.loads((out / "results.json").read_text())
    assert [s["step"] for s in results["steps"]][-1] == "done"
    assert "synthetic" not in results and results["plan"]["mode"] == mode
    assert not [s for s in results["steps"] if "synthetic" in s["step"]]
    runs = results["runs"]
    for objective in ("electra", "bert_mlm"):
        run = runs[objective]
        assert run["exit"] == 0 and run["steps_done"] == run["steps_planned"]
        assert run["final_eval"]["step"] == run["steps_done"]
        assert run["train"] and run["eval"][0]["step"] == 0
        assert run["parts_source"] == "final folder"
        assert run["steady_seq_per_s"] > 0 and run["wall_s"] > 0
    assert 0.5 < runs["electra"]["final_eval"]["disc_auc"] <= 1.0
    assert results["flops_ratio_bert_mlm_to_electra"] == pytest.approx(1.0, abs=0.1)
    if mode == "side_by_side":  # both at once: the log says how fast each went
        side = results["side_by_side"]
        assert side["sum_steady_seq_per_s"] == pytest.approx(
            sum(runs[o]["steady_seq_per_s"] for o in lease.OBJECTIVES), abs=0.2)
        log = (out / "lease.log").read_text()
        for objective in lease.OBJECTIVES:
            assert re.search(rf"\| {objective} .*step \d+/\d+", log), objective
    # equal FLOPs up to one call of 10 steps at toy size
    assert abs(runs["bert_mlm"]["flops_done"] - runs["electra"]["flops_done"]) <= \
        10 * 8 * results["plan"]["flops_per_sequence"]["bert_mlm"]
    assert not [p for p in os.listdir(root) if p.startswith("gpu_small.")]  # work removed

    # the parts come back as a folder fine-tuning starts from
    for objective in ("electra", "bert_mlm"):
        folder = parts.join(str(out / f"{objective}.part-*"), str(tmp_path / objective),
                            str(root / "bundle" / "vocab.txt"),
                            runs[objective]["parts_sha256"])
        from electra_tf import folders

        model, vocab = folders.pretraining.load_discriminator(folder)
        assert vocab == os.path.join(folder, "vocab.txt")
        assert all(np.isfinite(w).all() for w in model.get_weights())
        assert folders.pretraining.read_final_eval(folder)["step"] == runs[objective]["steps_done"]


@pytest.mark.slow
def test_parts_of_an_interrupted_run_come_from_its_checkpoint(toy_bundle, tmp_path):
    """A run stopped before its folder is written (a lease's deadline): the parts hold the
    discriminator of its latest checkpoint, and join gives it back to fp16 precision."""
    root, _ = toy_bundle
    data = lease.unpack_bundle(str(root / "bundle"), str(tmp_path / "data"))["paths"]
    model_dir = tmp_path / "model"
    cmd = lease.pretraining_command("toy", "electra", 40, data, str(model_dir), 211, 2)
    stop = ("import sys; from absl import flags; from electra_tf import flags as f; "
            "from electra_tf.training.backends.jax import JaxPretraining; "
            "f.define_pretraining_flags(); flags.FLAGS(['x', *sys.argv[1:]]); "
            "c, r = f.pretraining_configs(); JaxPretraining(c, r).train(stop_at_step=20)")
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", stop, *cmd[3:]], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (model_dir / "discriminator.weights.h5").exists()
    proc = subprocess.run([sys.executable, "-m", "studies.gpu_small.parts", "split",
                           f"--model_dir={model_dir}", f"--output={tmp_path / 'out' / 'd'}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "(checkpoint at step 20)" in proc.stderr
    folder = parts.join(str(tmp_path / "out" / "d.part-*"), str(tmp_path / "joined"),
                        data["vocab.txt"])
    assert os.path.exists(os.path.join(folder, "discriminator.weights.h5"))


def test_split_and_join_give_the_weights_back_in_fp16(tmp_path, tiny_vocab):
    from helpers import tiny_encoder_config

    from electra_tf import folders
    from electra_tf.modeling.models import build_discriminator

    model = build_discriminator(tiny_encoder_config(211))
    folder = tmp_path / "model"
    folder.mkdir()
    folders.pretraining.save_discriminator(str(folder), model)
    folders.pretraining.write_final_eval(str(folder), 7, {"disc_auc": 0.5})
    paths = parts.split(str(folder), str(tmp_path / "out" / "d"), max_part_bytes=20_000)
    assert len(paths) > 1 and all(os.path.getsize(p) <= 20_000 for p in paths)
    joined = parts.join(str(tmp_path / "out" / "d.part-*"), str(tmp_path / "joined"),
                        tiny_vocab)
    back, vocab = folders.pretraining.load_discriminator(joined)
    assert vocab == os.path.join(joined, "vocab.txt")
    for a, b in zip(model.get_weights(), back.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-6)
    assert folders.pretraining.read_final_eval(joined)["step"] == 7
    os.remove(paths[-1])  # a part missing
    with pytest.raises(SystemExit, match="parts missing"):
        parts.join(str(tmp_path / "out" / "d.part-*"), str(tmp_path / "again"), tiny_vocab)


def test_max_examples_keeps_the_first_examples(toy_bundle, tmp_path):
    from electra_tf.data.packed import PackedExamples

    root, _ = toy_bundle
    cut = bundle.build(str(root / "records" / "pretrain_data.tfrecord*"),
                       str(root / "heldout" / "pretrain_data.tfrecord*"),
                       str(root / "vocab.txt"), str(tmp_path / "cut"), max_examples=100)
    assert cut["train_examples"] == 100 and cut["train_examples_cut_from"] == 301
    whole = lease.unpack_bundle(str(root / "bundle"), str(tmp_path / "whole"))["paths"]
    part = lease.unpack_bundle(str(tmp_path / "cut"), str(tmp_path / "part"))["paths"]
    first = PackedExamples(whole["train.packed"], 32).rows(np.arange(100))
    for key, value in PackedExamples(part["train.packed"], 32).rows(np.arange(100)).items():
        np.testing.assert_array_equal(value, first[key])


def test_missing_bundle_inputs_are_one_line_before_anything_is_written(tmp_path, capsys):
    """../real_data_cache not built yet had been a traceback after an empty output."""
    out = tmp_path / "bundle"
    missing = str(tmp_path / "real_data_cache" / "records" / "pretrain_data.tfrecord*")
    assert bundle.main([f"--records={missing}", f"--heldout={missing}",
                        f"--vocab_file={tmp_path}/vocab.txt", f"--output={out}"]) == 2
    assert capsys.readouterr().err == f"error: --records pattern '{missing}' matches no file\n"
    assert not out.exists()


def test_the_readme_names_no_particular_gpu_service():
    """The lease is described generically: what to copy, the command, its time budget,
    what comes back; no one service's tool, calls or arguments (#54)."""
    readme = open(os.path.join(REPO, "studies", "gpu_small", "README.md"),
                  encoding="utf-8").read()
    section = readme[readme.index("## In the lease"):readme.index("## After the lease")]
    for said in ("lease.sh run", ".whl/", ".bundle/", "BUDGET_S", "results.json", "lease.log",
                 "electra.part-K-of-N", "bert_mlm.part-K-of-N"):
        assert said in section, said
    assert not re.search(r"`device` tool|give_back|carry=|timeout_s=", readme), section
