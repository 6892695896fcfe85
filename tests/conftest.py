"""Tiny, deterministic fixtures shared by the whole suite (plain helpers: helpers.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# A CI job under Kubernetes or Slurm would have the training loops' SlowChunkNote speak
# in whichever runs its machine makes slow; the tests of the note set these themselves.
for _variable in ("KUBERNETES_SERVICE_HOST", "SLURM_JOB_ID"):
    os.environ.pop(_variable, None)

# A suite started with SIGINT ignored (nohup, `trap '' INT`, a background job) would pass
# SIG_IGN on to every child, which then has no KeyboardInterrupt handler, and the tests
# that Ctrl-C a run would hang or fail. Python's own handler here instead: a caught signal
# goes back to its default across exec, so each child installs its own. (A preexec_fn
# that reset it in each child made subprocess fork() instead of vfork(); fork() runs
# gRPC's atfork handlers, the export tests' in-process server's, which aborted a child
# now and then before its exec: "Epoll1Poller ... Bad file descriptor".)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _intra_op_threads() -> int | None:
    """TensorFlow's intra-op threads for each of pytest-xdist's workers: the cores shared
    among them (the README's `-n 2` on 2 cores: 1). TensorFlow's default, a thread a core
    in every process, has the workers' pools (and their children's) spin on the cores
    the other worker needs: on 2 cores the suite's training tests took ~12% longer.
    Outside xdist, or given TF_NUM_INTRAOP_THREADS, TensorFlow's own choice stands."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2 or "TF_NUM_INTRAOP_THREADS" in os.environ:
        return None
    return max(1, len(os.sched_getaffinity(0)) // workers)


_INTRA_OP_THREADS = _intra_op_threads()
if _INTRA_OP_THREADS:  # before TensorFlow starts (it reads it once); children inherit it
    os.environ["TF_NUM_INTRAOP_THREADS"] = str(_INTRA_OP_THREADS)

# XLA's CPU backend compiles at LLVM optimisation level 0 in every process of the suite,
# as helpers.jax_child_env's JAX children already did: the workers' own jit_compile
# steps and every child that copies this environment (JAX runs started by hand, the
# multi-host pairs, the benchmarks' and studies' toy runs). Their programs are tiny, so
# compiling costs far more than running; level 0 changes only the machine code (the same
# HLO and fusions). A caller's own choice of level stands; users' runs keep XLA's default.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(
        [os.environ.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0"]).strip()

import pytest  # noqa: E402

# One failed shared fixture: one failure, and skips that name it (tests/fixture_errors.py).
from fixture_errors import pytest_runtest_makereport  # noqa: E402, F401

# Re-exported for the test files that still import them from here.
from helpers import (  # noqa: E402, F401
    REPO,
    WORDS,
    decode,
    make_corpus,
    run_module,
    tiny_vocab_tokens,
    write_vocab,
)

# === pytest-xdist (-n 2): tests that share a costly fixture run on one worker ===
# A session fixture is built once per worker that needs it, and a module fixture
# again whenever another module's test ran between two of its tests. The tests
# below are therefore sent as one unit to a single worker (nodeid prefix -> unit
# name); every other test goes alone, to whichever worker is free. (pytest-xdist's
# own --dist loadgroup does not group under pytest 9.2: it renames item._nodeid,
# which pytest no longer reads.)
SHARED_FIXTURES = {
    "tests/export/": "export",  # five fine-tuned folders, their exports, one fresh process
    # helpers.run_jax_script's processes (one JAX start-up each, on 1 and on 2 devices):
    # every JAX fine-tuning run (test_finetuning_jax.py's jax_runs), the JAX pre-training
    # runs and loss parity, the data-parallel comparisons, Keras' fit under JAX
    "tests/finetuning/test_finetuning_jax.py": "jax_scripts",
    "tests/training/test_jax_runtime.py": "jax_scripts",
    "tests/training/test_jax_training_options.py": "jax_scripts",
    "tests/training/test_jax_device_step.py": "jax_scripts",
    "tests/test_jax_backend.py": "jax_scripts",
    "tests/training/test_gdes.py::test_tf_and_jax": "jax_scripts",
    "tests/training/test_electric_training.py::test_tf_and_jax": "jax_scripts",
    "tests/training/test_prior_output_biases.py::test_the_jax_backend": "jax_scripts",
    "tests/test_optimization_lamb.py::test_lamb_jax_backend": "jax_scripts",
    "tests/training/test_bf16_note.py::test_the_jax_backend": "jax_scripts",
    "tests/training/test_jax_multihost.py::test_jax_waits_for_its_peers": "jax_scripts",
    # its one-process reference run
    "tests/training/test_jax_multihost.py::test_two_processes_train_as_one": "jax_scripts",
    "tests/training/test_jax_no_tf.py": "straight_run",  # a TensorFlow-free JAX run
    "tests/training/test_finetuning_init.py::test_a_checkpoint_step": "trained_run",
    "tests/training/test_finetuning_init.py::test_bad_checkpoint_steps": "trained_run",
    "tests/finetuning/test_finetuning_vocab.py": "vocab_finetuned",  # its `finetuned`
    "tests/finetuning/test_finetuning_from_transformers.py::test_a_converted_model_":
        "converted_ner",
    # tests/training/conftest.py's trained_run
    "tests/training/test_training_loop.py": "trained_run",
    "tests/training/test_training_faults.py::test_resuming_with": "trained_run",
    "tests/training/test_training_faults.py::test_a_damaged_tf_checkpoint": "trained_run",
    "tests/training/test_training_faults.py::test_a_finished_run_leaves": "trained_run",
    "tests/training/test_training_faults.py::test_a_finished_run_run_again": "trained_run",
    "tests/training/test_training_faults.py::test_an_extended_run_stopped": "trained_run",
    "tests/training/test_training_faults.py::test_a_damaged_or_missing_record": "trained_run",
    "tests/training/test_training_faults.py::test_a_resume_names_shards": "trained_run",
    "tests/training/test_training_faults.py::test_a_full_disk_or_a_read_only": "trained_run",
    "tests/training/test_summary_tags.py::test_train_and_eval": "trained_run",
    "tests/training/test_summary_tags.py::test_the_docs_list": "trained_run",
    # test_finetuning_custom.py's `learned`: the toy tasks learned, then exported
    "tests/finetuning/test_finetuning_custom.py::test_toy_tasks_are_learned": "custom_learned",
    "tests/finetuning/test_finetuning_custom.py::test_exports_of_own_data": "custom_learned",
    # the studies' (studies/tests/conftest.py takes these hooks): the toy bundle
    "studies/tests/test_gpu_small.py": "gpu_small",
}

# The session fixtures each unit is for: a test using one outside its unit has the other
# worker build it again (15-50 s). Collection stops on such a test, naming it, so that
# a new test cannot undo the grouping unseen.
UNIT_OF_FIXTURE = {
    "trained_run": "trained_run",
    **dict.fromkeys(("export_pretrained_dir", "finetuned_dirs", "exports", "electric_dir",
                     "score_export"), "export"),
}


def _unit(nodeid: str) -> str:
    """The SHARED_FIXTURES unit of a test, or its own nodeid."""
    return next((unit for prefix, unit in SHARED_FIXTURES.items() if nodeid.startswith(prefix)),
                nodeid)


# What costs most, most costly first (nodeid prefixes: the units of SHARED_FIXTURES,
# then single tests of 10-50 s of CPU, `--durations` on 2 cores). The collection is
# sorted by it (a stable sort: the rest keeps its order, after these), and the
# scheduler below hands out the units in that order: with 2 workers the run then
# ends on the many short tests, the two workers finishing together, instead of one
# worker still on a long test while the other idles.
COSTLY_FIRST = (
    # the slow set's longest single tests (2026-12-02, 2 slow cores: 4 to 10 minutes
    # each), so that none of them is left running alone at the end
    "tests/test_demo.py::test_demo_pretraining",
    "studies/tests/test_real_data_study.py::test_whole_pipeline",
    "tests/export/",
    "tests/training/test_jax_runtime.py",  # jax_scripts, with the eleven below
    "tests/finetuning/test_finetuning_jax.py",
    "tests/training/test_gdes.py::test_tf_and_jax",
    "tests/training/test_prior_output_biases.py::test_the_jax_backend",
    "tests/test_optimization_lamb.py::test_lamb_jax_backend",
    "tests/training/test_bf16_note.py::test_the_jax_backend",
    "tests/training/test_jax_multihost.py::test_jax_waits_for_its_peers",
    "tests/training/test_jax_multihost.py::test_two_processes_train_as_one",
    "tests/training/test_electric_training.py::test_tf_and_jax",
    "tests/training/test_jax_training_options.py",
    "tests/training/test_jax_device_step.py",
    "tests/test_jax_backend.py",
    "tests/training/test_training_loop.py",  # trained_run, with the seven below
    "tests/training/test_training_faults.py::test_resuming_with",
    "tests/training/test_training_faults.py::test_a_damaged_tf_checkpoint",
    "tests/training/test_training_faults.py::test_a_finished_run_leaves",
    "tests/training/test_summary_tags.py::test_train_and_eval",
    "tests/training/test_summary_tags.py::test_the_docs_list",
    "tests/training/test_finetuning_init.py::test_a_checkpoint_step",
    "tests/training/test_finetuning_init.py::test_bad_checkpoint_steps",
    "studies/tests/test_gpu_small.py",  # gpu_small: the lease rehearsed, twice, and more
    "studies/tests/test_efficiency.py::test_gpu_study_wiring",
    "tests/test_bench_gpu.py::test_the_toy_run",
    "tests/finetuning/test_short_warmup.py::test_a_30_step",
    "tests/training/test_training_distributed.py::test_multi_worker_sigterm_stops",
    "tests/training/test_jax_no_tf.py",
    "tests/training/test_lamb_phases.py::test_mirrored_lamb",  # mirrored with XLA
    "tests/training/test_training_distributed.py::test_mirrored",
    "tests/finetuning/test_finetuning_vocab.py",
    "tests/finetuning/test_finetuning_custom.py::test_toy_tasks_are_learned",  # custom_learned
    "tests/finetuning/test_finetuning_custom.py::test_exports_of_own_data",
    "tests/finetuning/test_finetuning_faults.py::test_two_ctrl_c",
    "tests/finetuning/test_finetuning_faults.py::test_a_refused_run_prints",
    "tests/interop/test_interop_cli.py::test_interop_cli_tf1",
    "tests/finetuning/test_finetuning_faults.py::test_an_interrupt_saves",
    "tests/training/test_pretraining_reports.py::test_checkpoints_land",
    "tests/data/test_data_builder.py::test_same_bytes_for_same_seed",
    "tests/training/test_training_interrupts.py::test_ctrl_c_during_a_chunk",
    "tests/training/test_training_faults.py::test_a_shard_corrupt",
    "tests/training/test_training_faults.py::test_a_non_finite_loss",
    "tests/training/test_lamb_phases.py::test_lamb_two_phases_in_one_run",
    "tests/finetuning/test_trials.py::test_two_real_trials",
    "tests/training/test_training_objectives.py",
    "tests/interop/test_interop_hf_tokenizer.py",
)


def _cost_rank(nodeid: str) -> int:
    return next((i for i, prefix in enumerate(COSTLY_FIRST) if nodeid.startswith(prefix)),
                len(COSTLY_FIRST))


def pytest_collection_modifyitems(config, items):
    strays = [f"{item.nodeid} (uses {name})" for item in items
              for name, unit in UNIT_OF_FIXTURE.items()
              if name in item.fixturenames and _unit(item.nodeid) != unit]
    if strays:
        raise pytest.UsageError(
            "tests/conftest.py: add these tests to their fixture's unit in SHARED_FIXTURES "
            "(outside it, another worker builds the fixture again): " + "; ".join(strays))
    items.sort(key=lambda item: _cost_rank(item.nodeid))  # a stable sort


@pytest.hookimpl(optionalhook=True)  # a single file runs without pytest-xdist too
def pytest_xdist_make_scheduler(config, log):
    """Load scheduling, but by the units of SHARED_FIXTURES (plain `-n`, --dist load).

    The units go out in the collection's order (COSTLY_FIRST), not xdist's largest
    unit first (--loadscope-reorder counts tests, not seconds), and a worker gets its
    next unit only when it is down to its last test (xdist's own loadscope keeps two
    more queued; a test queued on a busy worker cannot move to an idle one)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

        def _reschedule(self, node) -> None:
            # A worker starts a test once it holds the next one (or is told to stop):
            # one queued test keeps it busy.
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) > 1:
                return
            self._assign_work_unit(node)

    return SharedFixtureScheduling(config, log)


@pytest.fixture(scope="session", autouse=True)
def jax_compilation_cache(tmp_path_factory):
    """One XLA compilation cache for every JAX child process of this session.

    The JAX tests run KERAS_BACKEND=jax children (the backend is fixed per process)
    that compile the same tiny programs again and again (a straight and a resumed
    run, one step per call and several, ...); each compile costs seconds on 2 cores.
    The cache lives under this session's temporary root (both xdist workers share
    it) and goes with it; a cached program is the program a compile gives.
    """
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:  # the caller's own cache
        yield
        return
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the controller's: popen-gw0, popen-gw1 sit in it
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(root / "jax_compilation_cache")
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    yield
    del os.environ["JAX_COMPILATION_CACHE_DIR"], \
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]


@pytest.fixture(autouse=True)
def logging_levels():
    """Each test starts at absl's and the "tensorflow" logger's levels as they were:
    cli.run_cli, called in-process by some tests, quiets both for the rest of the
    process, which hid a later test's expected warning from caplog (the MRQA
    reader's skipped questions) whenever one ran before it on the same worker."""
    import logging as std_logging

    from absl import logging

    verbosity, tf_level = logging.get_verbosity(), std_logging.getLogger("tensorflow").level
    yield
    logging.set_verbosity(verbosity)
    std_logging.getLogger("tensorflow").setLevel(tf_level)


@pytest.fixture(scope="session")
def tiny_vocab(tmp_path_factory) -> str:
    return write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt", tiny_vocab_tokens())


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(make_corpus(300, seed=1), encoding="utf-8")
    return str(path)


@pytest.fixture
def sigint_handler():
    """Python's own SIGINT handler (KeyboardInterrupt) for the test, then the previous
    one: whatever an earlier test left (cli.run_cli ignores SIGINT after an interrupt),
    an ignored SIGINT is one InterruptGate leaves alone."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# === A small file system of its own (tmpfs; root only, skipped elsewhere) ===
@pytest.fixture
def small_mount(tmp_path):
    """mount(size, read_only) -> a fresh tmpfs folder (root only; skipped elsewhere)."""
    mounted = []

    def mount(size: str, read_only: bool = False, fill_from=None):
        folder = tmp_path / f"mnt{len(mounted)}"
        folder.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True).returncode:
            pytest.skip("mounting a tmpfs needs root")
        mounted.append(folder)
        if fill_from is not None:
            shutil.copytree(fill_from, folder / "model")
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", str(folder)], capture_output=True)
