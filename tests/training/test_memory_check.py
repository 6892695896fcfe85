"""The memory check before a training step (training/memory.py): a step that needs more
than the machine has is said in one warning, with the micro-batching that fits, before
the kernel kills the run in its first step."""

import json
import os
import types

import pytest
from helpers import pretraining_from_flags

from electra_tf.training import memory

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIB = 1 << 30


@pytest.fixture(scope="module")
def bert_vocab(tmp_path_factory):
    """A vocabulary of BERT's 30,522 tokens (the paper's, whose size the generator's
    logits take)."""
    from helpers import write_vocab

    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]",
                                                                   "[MASK]"]
    return write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt",
                       specials + [f"w{i}" for i in range(30522 - len(specials))])


@pytest.fixture(scope="module")
def paper_config(bert_vocab):
    """configs/SIZE.flags as run_pretraining reads them (+ flags) -> PretrainingConfig."""
    def make(size: str, *flags: str):
        config, _ = pretraining_from_flags(f"--flagfile={REPO}/configs/{size}.flags",
                                           "--train_data=unused", "--model_dir=unused",
                                           f"--vocab_file={bert_vocab}", *flags)
        assert config.vocab_size == 30522
        return config

    return make


def phase(name="joint", length=128, batch=128, accumulation=1):
    return types.SimpleNamespace(name=name, max_seq_length=length, train_batch_size=batch,
                                 gradient_accumulation_steps=accumulation)


def masking(predictions):
    return lambda _: types.SimpleNamespace(max_predictions_per_seq=predictions)


def test_available_memory_is_meminfo_or_the_cgroup_limit_whichever_is_less(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n")
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    assert memory.available_bytes(str(meminfo), str(cgroup)) == 20000000 * 1024
    (cgroup / "memory.max").write_text("max\n")
    (cgroup / "memory.current").write_text("1000\n")
    assert memory.available_bytes(str(meminfo), str(cgroup)) == 20000000 * 1024
    (cgroup / "memory.max").write_text(f"{8 * GIB}\n")
    (cgroup / "memory.current").write_text(f"{GIB}\n")
    assert memory.available_bytes(str(meminfo), str(cgroup)) == 7 * GIB
    # the cgroup's file cache is the kernel's to reclaim: not used (a 16 GiB limit with
    # 15 GiB "current", 14 of them cache, had left 1 GiB and a false warning)
    (cgroup / "memory.max").write_text(f"{16 * GIB}\n")
    (cgroup / "memory.current").write_text(f"{15 * GIB}\n")
    (cgroup / "memory.stat").write_text(f"anon {GIB}\nfile {14 * GIB}\nkernel 0\n")
    assert memory.available_bytes(str(meminfo), str(cgroup)) == 15 * GIB
    # tmpfs and shared memory are in "file" and cannot be reclaimed without swap
    (cgroup / "memory.stat").write_text(f"anon {GIB}\nfile {14 * GIB}\nshmem {4 * GIB}\n")
    assert memory.available_bytes(str(meminfo), str(cgroup)) == 11 * GIB
    # cgroup v1's memory controller (its limit had not been read)
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text(f"{4 * GIB}\n")
    (v1 / "memory" / "memory.usage_in_bytes").write_text(f"{3 * GIB}\n")
    (v1 / "memory" / "memory.stat").write_text(f"cache {GIB}\nrss {2 * GIB}\n"
                                               f"total_cache {GIB}\ntotal_shmem {GIB // 2}\n")
    assert memory.available_bytes(str(meminfo), str(v1)) == GIB + GIB // 2
    (v1 / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # none
    assert memory.available_bytes(str(meminfo), str(v1)) == 20000000 * 1024
    assert memory.available_bytes(str(tmp_path / "none"), str(tmp_path / "none")) is None
    meminfo.write_text("garbage\n")
    assert memory.available_bytes(str(meminfo), str(tmp_path / "none")) is None


def test_the_limit_of_the_process_own_cgroup_and_those_above_it_counts(tmp_path):
    """A Slurm job's --mem or a systemd unit's MemoryMax is on the process's own cgroup
    (/proc/self/cgroup), not the mount's root, which had been the only one read."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemAvailable:   {20 * GIB // 1024} kB\n")
    v2, job = tmp_path / "v2", tmp_path / "v2" / "slurm" / "job_7"
    job.mkdir(parents=True)
    for folder, limit in ((v2, "max"), (v2 / "slurm", f"{12 * GIB}"), (job, f"{6 * GIB}")):
        (folder / "memory.max").write_text(limit + "\n")
        (folder / "memory.current").write_text(f"{GIB}\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/slurm/job_7\n")
    assert memory.available_bytes(str(meminfo), str(v2), str(proc)) == 5 * GIB
    (job / "memory.max").write_text("max\n")  # the parent's limit holds for its children
    assert memory.available_bytes(str(meminfo), str(v2), str(proc)) == 11 * GIB
    proc.write_text("0::/\n")  # a cgroup namespace: its root is the process's cgroup
    assert memory.available_bytes(str(meminfo), str(v2), str(proc)) == 20 * GIB
    # cgroup v1: the memory controller's line, its folder under MOUNT/memory
    v1 = tmp_path / "v1"
    (v1 / "memory" / "docker" / "abc").mkdir(parents=True)
    (v1 / "memory" / "docker" / "abc" / "memory.limit_in_bytes").write_text(f"{3 * GIB}\n")
    (v1 / "memory" / "docker" / "abc" / "memory.usage_in_bytes").write_text(f"{GIB}\n")
    proc.write_text("5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n")
    assert memory.available_bytes(str(meminfo), str(v1), str(proc)) == 2 * GIB
    proc.write_text("4:memory:/docker/gone\n")  # a path not under the mount: the root's
    assert memory.available_bytes(str(meminfo), str(v1), str(proc)) == 20 * GIB


def test_the_estimate_matches_the_recorded_peaks():
    """Every measured peak in benchmarks/memory_estimate.json within 15% of the estimate
    (the warning's margin, memory.MARGIN, covers that and more)."""
    from electra_tf.core.config import PretrainingConfig

    with open(os.path.join(REPO, "benchmarks", "memory_estimate.json")) as f:
        rows = json.load(f)["rows"]
    assert len(rows) >= 6
    for row in rows:
        k = row.get("gradient_accumulation_steps", 1)
        config = PretrainingConfig(model_size=row["size"], max_seq_length=row["max_seq_length"],
                                   train_batch_size=row["batch"])  # (as the benchmark's)
        estimate = memory.pretraining_estimate(config, row["batch"] // k).total
        measured = row["peak_rss_kib"] * 1024
        assert 0.85 * estimate <= measured <= 1.15 * estimate, (row, estimate / GIB)


def test_the_papers_base_does_not_fit_a_24_gib_machine_and_its_small_does(paper_config):
    """configs/base.flags (256 sequences of 512) had been killed 3 minutes into its first
    step on a 24 GiB machine, with no line; the warning names the accumulation that fits."""
    base, small = paper_config("base"), paper_config("small")
    available = 22 * GIB
    (line,) = memory.pretraining_warnings(base, [phase(length=512, batch=256)], 1, 1,
                                          masking(79), available)
    assert line.startswith("this step needs about ") and "(256 sequence(s) of 512 tokens at " \
        "once, a base-size discriminator) and the machine has 22 GiB available: it is " \
        "likely to be killed in its first step; --gradient_accumulation_steps=" in line, line
    k = int(line.split("--gradient_accumulation_steps=")[1].split()[0])
    fits = memory.MARGIN * available  # (peaks vary from run to run: a margin)
    assert 256 % k == 0 and memory.pretraining_estimate(base, 256 // k, 512, 79).total \
        <= fits < memory.pretraining_estimate(base, 256 // (k // 2), 512, 79).total
    assert memory.pretraining_warnings(small, [phase()], 1, 1, masking(20), available) == []
    # the accumulation already given counts: the flag's new value splits it further
    (line,) = memory.pretraining_warnings(base, [phase(length=512, batch=256, accumulation=2)],
                                          1, 1, masking(79), available)
    assert f"--gradient_accumulation_steps={k}" in line
    # replicas of other processes hold their own share; one process's replicas add up
    assert memory.pretraining_warnings(base, [phase(length=512, batch=256)], 1, 64,
                                       masking(79), available) == []
    assert memory.pretraining_warnings(base, [phase(length=512, batch=256)], 2, 2,
                                       masking(79), available)


def test_the_advice_splits_over_the_replicas_and_keeps_phase_2(paper_config):
    """Mirrored CPU devices: the micro-batch advised splits over the replicas, and each
    replica's weights count (a micro-batch of 3 over 2 replicas had been advised).
    Phase 2 taking phase 1's accumulation: the advice keeps phase 2's (its batch of 10
    had been refused with phase 1's 4). A phase trained is not checked again."""
    base = paper_config("base")
    available = 22 * GIB
    (line,) = memory.pretraining_warnings(base, [phase(length=512, batch=252)], 2, 2,
                                          masking(79), available)
    k = int(line.split("--gradient_accumulation_steps=")[1].split()[0])
    micro = int(line.split("micro-batches of ")[1].split(",")[0])
    assert 252 % k == 0 and micro == 252 // k and micro % 2 == 0, line
    assert memory.pretraining_estimate(base, 2, 512, 79, copies=2).weights == \
        2 * memory.pretraining_estimate(base, 2, 512, 79).weights
    phases = [phase(length=128, batch=256), phase("joint_phase2", length=512, batch=10)]
    for p, end in zip(phases, (900, 1000)):
        p.end = end
    lines = memory.pretraining_warnings(base, phases, 1, 1, lambda p: types.SimpleNamespace(
        max_predictions_per_seq=20 if p.max_seq_length == 128 else 79), available,
        phase2_inherits=True)
    assert lines[0].endswith("trains the same batch (with --phase2_gradient_accumulation_steps="
                             "1, which phase 2 takes from it otherwise)"), lines
    assert [n for n in memory.pretraining_warnings(
        base, phases, 1, 1, masking(79), available, step=950) if "of 128 tokens" in n] == []
    # phase 2 of phase 1's length and batch is checked too (it had been skipped as seen,
    # and the advice had kept it at one step of 256), and phase 1's note names phase 2's
    # own advice where phase 2 warns as well (the two lines had disagreed)
    same = [phase(length=512, batch=256), phase("joint_phase2", length=512, batch=256)]
    first, second = memory.pretraining_warnings(base, same, 1, 1, masking(79), available,
                                                phase2_inherits=True)
    k = second.split("--phase2_gradient_accumulation_steps=")[1].split()[0]
    assert first.endswith(f"(with --phase2_gradient_accumulation_steps={k}, which phase 2 "
                          "takes from it otherwise)"), (first, second)
    mixed = [phase(length=128, batch=256), phase("joint_phase2", length=512, batch=64)]
    first, second = memory.pretraining_warnings(base, mixed, 1, 1, lambda p: types.SimpleNamespace(
        max_predictions_per_seq=20 if p.max_seq_length == 128 else 79), available,
        phase2_inherits=True)
    k = second.split("--phase2_gradient_accumulation_steps=")[1].split()[0]
    assert first.endswith(f"(with --phase2_gradient_accumulation_steps={k}, which phase 2 "
                          "takes from it otherwise)"), (first, second)
    # one sequence on each of 2 replicas is what the smallest step holds
    line = memory.pretraining_warnings(base, [phase(length=512, batch=4)], 2, 2, masking(79),
                                       GIB)[0]
    assert "even one sequence per replica at a time needs about" in line, line


def test_a_step_close_to_the_memory_says_it_may_be_killed(paper_config):
    """Between the margin and all of the memory: "may be", not "likely"."""
    config = paper_config("small")
    need = memory.pretraining_estimate(config, 8).total
    line = memory.step_warning(lambda n: memory.pretraining_estimate(config, n), 8,
                               int(need / 0.9), "x", "--gradient_accumulation_steps")
    assert ("available: more than the 80% of it a step can count on (the estimate can be "
            "15% off either way), so it may be killed in its first step") in line, line


def test_a_warning_near_a_gibibyte_does_not_read_as_equal_amounts(paper_config):
    """0.85 GiB had been "needs about 0.8 GiB ... has 0.8 GiB available: close enough",
    and "even one sequence ... needs about 0.8 GiB" of 0.8 GiB."""
    config = paper_config("small")
    one, eight = (memory.pretraining_estimate(config, n).total for n in (1, 8))
    line = memory.step_warning(lambda n: memory.pretraining_estimate(config, n), 8,
                               int(one * 1.05), "x", "--gradient_accumulation_steps")
    assert f"needs about {eight / GIB:.2f} GiB" in line and \
        f"has {one * 1.05 / GIB:.2f} GiB available" in line, line
    assert line.endswith(f"even one sequence at a time needs about {one / GIB:.2f} GiB, "
                         "more than 80% of it"), line


def test_each_phase_is_checked_and_named_by_its_flag(paper_config):
    config = paper_config("base")
    phases = [phase(length=128, batch=32), phase("joint_phase2", length=512, batch=256)]
    (line,) = memory.pretraining_warnings(config, phases, 1, 1, lambda p: types.SimpleNamespace(
        max_predictions_per_seq=20 if p.max_seq_length == 128 else 79), 22 * GIB)
    assert "of 512 tokens" in line and "--phase2_gradient_accumulation_steps=" in line


def test_no_split_that_fits_says_what_does(paper_config):
    config = paper_config("base")
    line = memory.step_warning(lambda n: memory.pretraining_estimate(config, n), 7, 3 * GIB,
                               "x", "--gradient_accumulation_steps")
    assert line.endswith("sequences at a time would fit") or "even one sequence" in line, line
    line = memory.step_warning(lambda n: memory.pretraining_estimate(config, n), 7, GIB // 2,
                               "x", "--gradient_accumulation_steps")
    assert "even one sequence at a time needs about" in line
    assert memory.step_warning(lambda n: memory.pretraining_estimate(config, n), 7, None,
                               "x") is None


def test_the_advice_is_the_first_split_that_fits_and_a_huge_batch_is_quick():
    """The advice is the fewest equal micro-batches that fit (or the most sequences that
    fit), as a search through every count found it; that search had taken minutes for a
    mistyped --train_batch_size of 20 digits (no output, 100% CPU)."""
    def estimate_of(n):  # 1 GiB for the weights, 0.1 GiB a sequence
        return types.SimpleNamespace(total=GIB + n * GIB // 10)

    room = memory.MARGIN * 3 * GIB
    fits = max(n for n in range(1, 1000) if estimate_of(n).total <= room)
    for sequences in (24, 97, 100, 360):
        line = memory.step_warning(estimate_of, sequences, 3 * GIB, "x", "--acc")
        k = next(k for k in range(2, sequences + 1)
                 if sequences % k == 0 and sequences // k <= fits)
        assert f"--acc={k} (micro-batches of {sequences // k}," in line, (sequences, line)
        line = memory.step_warning(estimate_of, sequences, 3 * GIB, "x")
        assert line.endswith(f"; about {fits} sequences at a time would fit"), line
    calls = []

    def counted(n):  # a search through every count stops here, not after minutes
        calls.append(n)
        assert len(calls) < 1000, "the advice estimates one count at a time"
        return estimate_of(n)

    # the second has no divisor near the least count that fits: micro-batches of one
    for sequences in (10**20, 10**20 + 39):
        line = memory.step_warning(counted, sequences, 3 * GIB, "x", "--acc")
        assert line is not None and "--acc=" in line
    assert "--acc=100000000000000000039 (micro-batches of 1," in line


def test_a_trainer_checks_its_own_phases(make_configs):
    """The trainer's check (run_pretraining prints each line as a warning): none where it
    fits; its own batch and accumulation where it does not."""
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    trainer = TensorFlowPretraining(*make_configs(
        run_overrides={"gradient_accumulation_steps": 2}, train_batch_size=8))
    assert trainer.on_cpu and trainer.local_replicas == 1
    assert trainer.memory_warnings(available=1 << 50) == []
    (line,) = trainer.memory_warnings(available=1)
    assert "(4 sequence(s) of 32 tokens at once, a tiny-size discriminator)" in line, line
    assert "even one sequence at a time needs about" in line


def test_one_encoder_is_counted_once(paper_config):
    """BERT (bert_mlm) trains one MLM model, run once a step, and a tied generator is D's
    encoder: their weights (and BERT's layers) had been counted twice (a tiny BERT at
    512 x 32 estimated at 2.31 GiB, measured at 1.67)."""
    bert = paper_config("small", "--objective=bert_mlm")
    disc = bert.discriminator_config()
    estimate = memory.pretraining_estimate(bert, 8)
    assert estimate.weights == memory.PARAMETER_BYTES * memory.encoder_parameters(disc)
    assert estimate.layers == memory.layer_bytes(disc, 8, 128)
    tied = paper_config("small", "--nountied_generator", "--generator_hidden_size=1.0")
    assert tied.encoders.sharing == "encoder"
    estimate = memory.pretraining_estimate(tied, 8)
    assert estimate.weights == memory.PARAMETER_BYTES * memory.encoder_parameters(disc)
    assert estimate.layers == 2 * memory.layer_bytes(disc, 8, 128)  # G's pass and D's
    uniform = paper_config("small", "--uniform_generator")  # no generator network at all
    assert uniform.encoders.sharing == "uniform"
    estimate = memory.pretraining_estimate(uniform, 8)
    assert estimate.weights == memory.PARAMETER_BYTES * memory.encoder_parameters(disc)
    assert estimate.layers == memory.layer_bytes(disc, 8, 128)
    electra = memory.pretraining_estimate(paper_config("small"), 8)
    gen = paper_config("small").generator_config()
    assert electra.weights == memory.PARAMETER_BYTES * (
        memory.encoder_parameters(disc) + memory.encoder_parameters(gen, with_embeddings=False))
