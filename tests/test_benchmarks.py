"""Every script in benchmarks/ runs end to end at toy size (slow: one test per script,
each a run of seconds to a minute), so that a recorded figure's command keeps working
as the product changes; and the scripts build their folders with electra_tf's own
writers, never a hand-written copy of a folder format (default suite: a source check)."""

import glob
import json
import os
import re

import pytest
from helpers import REPO, bench_leftovers, child_env, run_python

BENCHMARKS = os.path.join(REPO, "benchmarks")
SCRIPTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(BENCHMARKS, "bench_*.py"))
                 if not p.endswith("bench_common.py"))
# The slow test that runs each script at toy size (bench_gpu.py's is in test_bench_gpu.py).
TOY_TESTS = {
    "bench_bf16_agreement.py": "test_bench_bf16_agreement_at_toy_size",
    "bench_data_building.py": "test_bench_data_building_at_toy_size",
    "bench_export.py": "test_bench_export_at_toy_size",
    "bench_finetuning.py": "test_bench_finetuning_at_toy_size",
    "bench_memory.py": "test_bench_memory_at_toy_size",
    "bench_gpu.py": "test_bench_gpu.py::test_the_toy_run_writes_every_field",
    "bench_packed_input.py": "test_bench_packed_input_at_toy_size",
    "bench_peer.py": "test_bench_peer_at_toy_size",
    "bench_prediction.py": "test_bench_prediction_at_toy_size",
    "bench_predictor.py": "test_bench_predictor_at_toy_size",
    "bench_pretraining.py": "test_bench_pretraining_at_toy_size",
    "bench_score_export.py": "test_bench_score_export_at_toy_size",
    "bench_serving_floor.py": "test_bench_serving_floor_at_toy_size",
    "bench_serving_threads.py": "test_bench_serving_threads_at_toy_size",
    "bench_squad_windows.py": "test_bench_squad_windows_at_toy_size",
}


def test_every_benchmark_script_has_a_toy_run_test():
    assert sorted(TOY_TESTS) == SCRIPTS
    here = open(__file__).read()
    gpu = open(os.path.join(REPO, "tests", "test_bench_gpu.py")).read()
    for name, test in TOY_TESTS.items():
        file, _, function = test.rpartition("::")
        assert f"def {function}(" in (gpu if file else here), (name, test)


def test_benchmarks_write_no_folder_format_by_hand():
    # A folder's config files and weights are written by electra_tf's writers
    # (bench_common.finetuned_folder / pretrained_folder), which record the
    # vocabulary's fingerprint and whatever the format requires next.
    by_hand = re.compile(r"write_json\(|(?:artifacts|files)\.[A-Z_]*(CONFIG|WEIGHTS)\b|"
                         r"open\([^)]*_config\.json")
    for name in SCRIPTS + ["bench_common.py"]:
        source = open(os.path.join(BENCHMARKS, name)).read()
        assert not by_hand.findall(source), name


def _run(args, timeout, tmp_path):
    """Runs a script to the end; what it wrote under $TMPDIR (its inputs, models and
    exports, hundreds of MB at full size) is gone when it exits."""
    scratch = tmp_path / "TMPDIR"
    scratch.mkdir()
    proc = run_python([os.path.join("benchmarks", args[0]), *args[1:]], timeout=timeout,
                      env=child_env(TMPDIR=str(scratch)))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not bench_leftovers(scratch), os.listdir(scratch)
    return proc


@pytest.mark.slow
def test_bench_export_at_toy_size(tmp_path):
    # NER's folder alone: six exports, not twelve. Its token outputs take the length-bucket
    # comparison's every branch (read at the positions a request holds, and the string
    # tags); the other folder's task, sequence classification, is exported through the
    # same code, and its arms are compared in tests/test_bench_export.py and served by
    # bench_serving_floor.py's toy run.
    out = tmp_path / "export"
    _run(["bench_export.py", "--model_size=tiny", "--big_batch=2", "--iters=2", "--warmup=1",
          "--check_iters=2", "--bucket_iters=1", "--tasks=ner", f"--output={out}"], 240,
         tmp_path)
    result = json.loads(out.with_suffix(".json").read_text())
    assert len(result["rows"]) == 4 and len(result["input_checks"]) == 2
    assert {r["task"] for r in result["rows"] + result["input_checks"]
            + result["length_buckets"]} == {"token_classification"}
    assert result["length_buckets"] and all(
        0 <= r["max_output_difference"] < 1e-5 for r in result["length_buckets"])
    assert "--model_size=tiny --big_batch=2 --tasks=ner " in out.with_suffix(".md").read_text()


@pytest.mark.slow
def test_bench_serving_floor_at_toy_size(tmp_path):
    out = tmp_path / "floor"
    _run(["bench_serving_floor.py", "--model_size=tiny", "--threads=1", "--onednn=1",
          "--lengths=16", "--iters=2", "--warmup=1", f"--output={out}"], 120, tmp_path)
    rows = json.loads(out.with_suffix(".json").read_text())["rows"]
    assert {r["part"] for r in rows} == {"model", "export"}
    assert all(r["p50_ms"] > 0 for r in rows)


@pytest.mark.slow
def test_bench_finetuning_at_toy_size(tmp_path):
    # One setting, the recorded profile's kind (full windows, batches not cut); the
    # child's cut batches of short sentences, fp32 and bf16, run in bench_peer.py's toy run.
    out = tmp_path / "ft.json"
    # a second setting of a larger batch: it had read the first's rows and run out of
    # them ("End of sequence")
    _run(["bench_finetuning.py", "--model_size=tiny", "--settings=32:4:0:fp32:0,32:8:0:fp32:0",
          "--steps=1", "--profile_steps=1", f"--output={out}"], 240, tmp_path)
    rows = json.loads(out.read_text())["results"]
    assert [(r["batch"], r["trim_batches"], r["sentence_words"]) for r in rows] == [
        (4, False, "fill"), (8, False, "fill")]
    assert all(r["examples_per_second"] > 0 and r["seq_length"] == 32 for r in rows)
    for profile in (r["profile"] for r in rows):
        # The products and the other ops' shares split the traced time (idle gaps aside).
        assert profile["steps"] == 1 and profile["matmul_ms"] > 0
        assert 0 <= profile["two_matmuls_ms"] <= profile["matmul_ms"]
        assert 0 < profile["matmul_ms"] + profile["other_ms"] <= profile["step_ms"] + 0.2
        assert "MatMul" not in "".join(profile["other_by_op"])
        # The 12 largest shares, each rounded to 0.1 ms.
        assert 0 < len(profile["other_by_op"]) <= 12
        assert sum(profile["other_by_op"].values()) <= profile["other_ms"] + 0.6


@pytest.mark.slow
def test_bench_bf16_agreement_at_toy_size(tmp_path):
    out = tmp_path / "bf16"
    _run(["bench_bf16_agreement.py", "--model_size=tiny", "--rows=12", "--batch=5",
          f"--output={out}"], 180, tmp_path)
    result = json.loads(out.with_suffix(".json").read_text())["result"]
    assert result["rows"] == 12 and result["classes"] == 2
    assert 0 < result["max_logit_difference"] < 0.05  # bf16 products move the logits a little
    assert len(result["flipped_fp32_margins"]) == result["labels_differ"]
    assert 0 <= result["accuracy_fp32"] <= 1 and 0 <= result["accuracy_bf16"] <= 1
    assert "| 12 | 2 |" in out.with_suffix(".md").read_text()


@pytest.mark.slow
def test_bench_prediction_at_toy_size(tmp_path):
    out = tmp_path / "pred"
    _run(["bench_prediction.py", "--model_size=tiny", "--seq_length=32", "--eval_batch_size=4",
          "--dev_examples=10", "--sentence_words=2:6,fill", "--rounds=1", f"--output={out}"],
         180, tmp_path)
    rows = json.loads(out.with_suffix(".json").read_text())["results"]
    assert [(r["sentence_words"], r["batches"]) for r in rows] == [
        ("2:6", "cut"), ("2:6", "full"), ("fill", "cut"), ("fill", "full")]
    assert all(r["examples_per_second"] > 0 for r in rows)
    assert rows[0]["mean_used_positions"] < 10 and rows[2]["mean_used_positions"] == 32
    assert "| 2:6 | cut |" in out.with_suffix(".md").read_text()


@pytest.mark.slow
def test_bench_predictor_at_toy_size(tmp_path):
    out = tmp_path / "predictor"
    _run(["bench_predictor.py", "--model_size=tiny", "--rows=12", "--batch=4", "--rounds=1",
          f"--output={out}"], 180, tmp_path)
    rows = json.loads(out.with_suffix(".json").read_text())["results"]
    assert [r["mode"] for r in rows] == ["traced", "eager"]
    assert all(r["median_call_ms"] > 0 and r["rows_per_second"] > 0 for r in rows)
    assert rows[0]["max_logit_difference"] <= 1e-5
    assert "| traced |" in out.with_suffix(".md").read_text()


@pytest.mark.slow
def test_bench_pretraining_at_toy_size(tmp_path):
    out = tmp_path / "pre"
    _run(["bench_pretraining.py", "--toy", "--warmup=1", "--steps=1", "--matmul_repeats=1",
          "--profile_steps=1", "--only=electra_tf/jit0/fp32/r1,model_garden/jit0/fp32/r1",
          f"--output={out}"], 240, tmp_path)
    results = json.loads(out.with_suffix(".json").read_text())["results"]
    assert [r["key"] for r in results] == ["electra_tf/jit0/fp32/r1", "model_garden/jit0/fp32/r1"]
    assert all(r["sequences_per_second"] > 0 for r in results), results
    profile = results[0]["profile"]  # electra_tf's rows only
    assert profile["steps"] == 1 and profile["matmul_ms"] > 0 and "profile" not in results[1]
    table = out.with_suffix(".md").read_text()
    assert "| electra_tf/jit0/fp32/r1 | " in table.split("## Where a step's wall time goes")[1]
    assert "nan" not in table  # --only without --merge measures the matmul peak too
    # a key that names no setting: one line, the results kept (a typo had run nothing and
    # written an empty table over them)
    before = out.with_suffix(".json").read_text()
    proc = run_python([os.path.join("benchmarks", "bench_pretraining.py"), "--toy",
                       "--only=electra_tf/jit0/fp32/r3", f"--output={out}"], timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "error: --only: electra_tf/jit0/fp32/r3 is not a setting (electra_tf/jit0/bf16/r1, ")
    assert out.with_suffix(".json").read_text() == before


@pytest.mark.slow
def test_bench_memory_at_toy_size(tmp_path):
    out = tmp_path / "memory"
    _run(["bench_memory.py", "--runs=tiny:32:4:2", "--steps=1", "--documents=30",
          f"--output={out}"], 240, tmp_path)
    result = json.loads(out.with_suffix(".json").read_text())
    assert result["command"].endswith("--steps=1 --documents=30 --output=memory")
    (row,) = result["rows"]
    assert (row["size"], row["max_seq_length"], row["batch"],
            row["gradient_accumulation_steps"]) == ("tiny", 32, 4, 2)
    assert row["peak_rss_kib"] > 100_000 and row["estimate_kib"] > 100_000
    assert "| tiny | 32 | 4 | 2 | " in (tmp_path / "memory.table.md").read_text()


@pytest.mark.slow
def test_bench_data_building_at_toy_size(tmp_path):
    out = tmp_path / "data.json"
    # 40 of the demo corpus's ~400 documents: the standard library's parse and the
    # vocabulary's learning, not the 1-vs-2-process build, were most of the run
    _run(["bench_data_building.py", "--copies=1", "--num_shards=2", "--max_documents=40",
          f"--output={out}"], 180, tmp_path)
    result = json.loads(out.read_text())
    assert result["command"].endswith("--max_documents=40 --output=data.json")
    assert all(r["examples"] > 0 for r in result["results"])
    assert result["identical_bytes_1_vs_2_processes"]
    assert [r["num_processes"] for r in result["results"]] == [1, 2]


@pytest.mark.slow
def test_bench_packed_input_at_toy_size(tmp_path, tiny_corpus, tiny_vocab):
    data = tmp_path / "records"
    proc = run_python(["-m", "electra_tf.build_pretraining_data", f"--corpus={tiny_corpus}",
                       f"--vocab_file={tiny_vocab}", f"--output_dir={data}",
                       "--max_seq_length=32", "--num_shards=1"], timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = tmp_path / "packed"
    _run(["bench_packed_input.py", f"--records={data}/pretrain_data.tfrecord*",
          f"--vocab_file={tiny_vocab}", "--batch_size=4", "--max_seq_length=32",
          "--seconds=0.2", f"--output={out}"], 60, tmp_path)
    results = json.loads(out.with_suffix(".json").read_text())["results"]
    assert results["pack"]["examples"] > 0
    assert all(results[k]["sequences_per_second"] > 0
               for k in ("packed", "packed + prefetch", "numpy (TFRecords)"))


@pytest.mark.slow
def test_bench_score_export_at_toy_size(tmp_path):
    out = tmp_path / "score"
    _run(["bench_score_export.py", "--model_size=tiny", "--vocab_size=400", "--iters=2",
          "--warmup=1", f"--output={out}"], 180, tmp_path)
    result = json.loads(out.with_suffix(".json").read_text())
    assert result["model_size"] == "tiny" and result["iters"] == 2
    assert result["score"]["p50_ms"] > 0 and result["classification"]["p50_ms"] > 0
    assert result["p50_ratio_score_over_classification"] > 0


@pytest.mark.slow
def test_bench_squad_windows_at_toy_size(tmp_path):
    """This checkout as its own baseline (the baseline's path: its export command)."""
    out = tmp_path / "windows"
    _run(["bench_squad_windows.py", "--model_size=tiny", "--vocab_size=400",
          "--max_seq_length=32", "--iters=2", "--warmup=1", "--context_words=5,60",
          f"--baseline_repo={REPO}", f"--output={out}"], 240, tmp_path)
    result = json.loads(out.with_suffix(".json").read_text())
    assert result["baseline"] and result["doc_stride"] == 128
    assert [r["windows"] for r in result["rows"]] == [1, 4]  # 60 words, 19 a window
    for row in result["rows"]:
        assert row["this"]["p50_ms"] > 0 and row["baseline"]["p50_ms"] > 0
        assert row["p50_ratio_this_over_baseline"] > 0


@pytest.mark.slow
def test_bench_serving_threads_at_toy_size(tmp_path):
    # Two encoders, each an export and a fresh serving process: the other three
    # (matmul, long_path, batchmatmulv3) are exported by export_with and their outputs
    # compared in-process in tests/test_bench_export.py; a 32-position window (4 length
    # buckets to trace, not 8).
    out = tmp_path / "threads"
    encoders = ("transposes", "bf16")
    _run(["bench_serving_threads.py", "--model_size=tiny", "--max_seq_length=32",
          "--settings=intra1", f"--encoders={','.join(encoders)}", "--rounds=1", "--iters=2",
          "--warmup=1", "--batch=2", f"--output={out}"], 180, tmp_path)
    rows = json.loads(out.with_suffix(".json").read_text())["rows"]
    assert {(r["encoder"], r["setting"], r["request"]) for r in rows} == {
        (e, "intra1", q) for e in encoders
        for q in ("20 words", "128 words", "mixed 5-120 words x2")}
    assert all(r["p50_ms"] > 0 for r in rows)
    # one round of 2 calls (the batch: one call a round; a fresh process per encoder)
    assert {r["calls"] for r in rows if r["request"] == "20 words"} == {2}
    assert "--model_size=tiny --max_seq_length=32 " in out.with_suffix(".md").read_text()
    starts = json.loads(out.with_suffix(".json").read_text())["start_rows"]
    assert [(r["encoder"], r["processes"]) for r in starts] == [(e, 1) for e in encoders]
    assert all(r["load_s"] > 0 and r["first_call_ms"] > 0 for r in starts)


@pytest.mark.slow
def test_bench_peer_at_toy_size(tmp_path):
    """One run: both precisions on sentences of 2-6 words (electra_tf's batches cut to
    their longest, transformers' padded to theirs) and the latency children; full
    windows are bench_finetuning.py's toy run and the test below."""
    pytest.importorskip("transformers")
    out = tmp_path / "peer"
    _run(["bench_peer.py", "--model_size=tiny", "--seq_length=32", "--batch_size=2",
          "--steps=1", "--warmup=1", "--iters=2", "--lengths=16", "--threads=1",
          "--rounds=1", "--precisions=fp32,bf16", "--sentence_words=2:6", f"--output={out}"],
         300, tmp_path)
    result = json.loads(out.with_suffix(".json").read_text())
    text = out.with_suffix(".md").read_text()
    for precision in ("fp32", "bf16"):
        assert set(result["results"]["finetuning"][precision]) == {"electra_tf", "transformers"}
        assert result["finetuning_ratio"][precision] > 0
        assert (f"## Fine-tuning, L32 batch 2 {precision}, default threads, sentences of 2-6 "
                "words") in text
    assert "--sentence_words=2:6" in text
    assert {(r["framework"], r["length"]) for r in result["results"]["latency_p50_ms"]} == {
        ("electra_tf", 16), ("transformers", 16)}


@pytest.mark.slow
def test_bench_peer_transformers_steps_on_full_windows(monkeypatch):
    """bench_peer.py's transformers side on full windows (its default, what peer_cpu.md
    records; the toy run above gives sentences), in this process: every batch is
    --seq_length ids, all real."""
    pytest.importorskip("transformers")
    monkeypatch.syspath_prepend(BENCHMARKS)
    import argparse

    import bench_peer

    shapes = []
    make = bench_peer._hf_model

    def hf_model(model_size):
        model = make(model_size)
        model.register_forward_pre_hook(
            lambda module, args, kwargs: shapes.append(
                (tuple(kwargs["input_ids"].shape), int(kwargs["attention_mask"].min()))),
            with_kwargs=True)
        return model

    monkeypatch.setattr(bench_peer, "_hf_model", hf_model)
    result = bench_peer.child_hf_train(argparse.Namespace(
        model_size="tiny", seq_length=16, batch_size=2, sentence_words="", warmup=1, steps=2,
        precision="fp32"))
    assert shapes == [((2, 16), 1)] * 3  # 1 warmup + 2 timed steps
    assert result["examples_per_second"] > 0
