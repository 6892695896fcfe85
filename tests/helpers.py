"""Plain constants and functions the tests share; fixtures live in the conftest.py files.

pyproject puts tests/ on the path, so every test file can `from helpers import ...`
(a conftest.py cannot be imported that way under --import-mode=importlib).
"""

from __future__ import annotations

import atexit
import json
import os
import random
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The tiny model of the suite (STYLE.md: hidden 16, 2 layers): model_hparam_overrides
# for model_size="tiny", or the sizes of an EncoderConfig (`tiny_encoder_config`).
# One layer: a run's cost is mostly tracing its graph, which grows with the layers (a
# tiny pre-training run 7.4-8.4 s of CPU at 2 layers, 4.7-5.4 s at 1). Stacked layers
# are covered by the modeling tests (tests/modeling/conftest.py: 2), the serving
# encoder's, the conversions' and the learning tests, each with its own sizes.
TINY_MODEL = {"embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 32}
# The same without dropout: a training step that is deterministic across backends.
TINY_NO_DROPOUT = {**TINY_MODEL, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
RECORDS_SEQ = 32  # max_seq_length of the tiny_records fixture (tests/training/conftest.py)

WORDS = ("the model reads a token and the discriminator learns which token was replaced "
         "by a small generator trained as a masked language model on every sentence of "
         "text in this corpus while sampling keeps the tokens plausible enough").split()


def setup_commands() -> tuple[str, str]:
    """The README's two set-up commands (the demo, the tests) from .ci/setup_commands, the
    one place CI and the tests read them (the README opens with them: test_docs_defaults)."""
    with open(os.path.join(REPO, ".ci", "setup_commands"), encoding="utf-8") as f:
        demo, tests = [line.rstrip("\n") for line in f if line.strip()
                       and not line.startswith("#")]
    return demo, tests


def tiny_encoder_config(vocab_size: int, **overrides):
    """An EncoderConfig of TINY_MODEL's sizes (overrides win)."""
    from electra_tf.core.config import EncoderConfig

    return EncoderConfig(**{"vocab_size": vocab_size, **TINY_MODEL, **overrides})


def write_pretrained_dir(folder, vocab_file: str, config=None, seed: int = 0) -> str:
    """A pre-trained discriminator's folder, written through electra_tf/folders (as
    run_pretraining and `convert` write theirs): discriminator.weights.h5 and discriminator_config.json of
    a freshly initialized discriminator of `config` (default: the tiny one; seeded), and a
    pretraining_config.json that records `vocab_file` (no pre-training config: the
    defaults, lower-cased text, apply)."""
    import keras

    from electra_tf import folders
    from electra_tf.modeling import build_discriminator
    from electra_tf.text.vocab import load_vocab

    folder = str(folder)
    os.makedirs(folder, exist_ok=True)
    config = config or tiny_encoder_config(len(load_vocab(vocab_file)))
    keras.utils.set_random_seed(seed)
    folders.pretraining.save_discriminator(folder, build_discriminator(config))
    folders.pretraining.write_pretraining_config(folder, None, {"vocab_file": vocab_file})
    return folder


class ConvertedByAutograph:
    """`with ConvertedByAutograph() as names:` the project's functions autograph
    converts meanwhile ("module.qualname"; TensorFlow's own and Keras's are left
    out). Patches the call every conversion goes through, cached or not."""

    def __enter__(self) -> list[str]:
        from tensorflow.python.autograph.impl import api

        self._api, self._convert, names = api, api._convert_actual, []

        def convert(entity, program_ctx):
            module = getattr(entity, "__module__", "") or ""
            if module.split(".")[0] in ("electra_tf", "tests"):
                names.append(f"{module}.{getattr(entity, '__qualname__', entity)}")
            return self._convert(entity, program_ctx)

        api._convert_actual = convert
        return names

    def __exit__(self, *exc) -> None:
        self._api._convert_actual = self._convert


def free_ports(n: int = 1) -> list[int]:
    """`n` distinct TCP ports on 127.0.0.1 that were free a moment ago."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]


def make_corpus(num_docs: int, seed: int = 0, max_lines: int = 4, max_words: int = 8) -> str:
    """Pseudo-English: docs of 1..max_lines lines of 3..max_words words, blank-separated."""
    rng = random.Random(seed)
    docs = []
    for _ in range(num_docs):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, max_words)))
                 for _ in range(rng.randint(1, max_lines))]
        docs.append("\n".join(lines))
    return "\n\n".join(docs) + "\n"


def write_vocab(path, tokens) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    return str(path)


def write_cpuinfo(path, flags: str) -> str:
    """A two-processor /proc/cpuinfo with these flags (none: no flags line) at `path`."""
    path.write_text("".join(f"processor\t: {i}\nflags\t\t: {flags}\n\n" for i in range(2))
                    if flags else "processor\t: 0\n")
    return str(path)


def tiny_vocab_tokens() -> list[str]:
    """BERT layout (specials at 0 and 100..103), the corpus words, some pieces and chars."""
    from electra_tf.text.tokenizer import BERT_RESERVED_TOKENS

    chars = list("abcdefghijklmnopqrstuvwxyz0123456789.,!?'-")
    pieces = ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"] + ["##ing", "##ed"]
    extra = ["hello", "world", "cafe", "中", "国", "人"]
    words = sorted(set(WORDS) - set(chars))
    return list(BERT_RESERVED_TOKENS) + words + extra + chars + pieces


def decode(tokenizer, ids) -> str:
    """Ids -> readable text for assertions: ## pieces joined, special tokens dropped."""
    from electra_tf.text.tokenizer import SPECIAL_TOKENS

    words: list[str] = []
    for tok in tokenizer.convert_ids_to_tokens(ids):
        if tok in SPECIAL_TOKENS:
            continue
        if tok.startswith("##") and words:
            words[-1] += tok[2:]
        else:
            words.append(tok)
    return " ".join(words)


# === An entry point's flags, in this process ===
def pretraining_from_flags(*argv: str):
    """run_pretraining's command line -> (PretrainingConfig, PretrainingRun), as its main reads
    them (own FlagValues: absl's global FLAGS hold whatever this process defined)."""
    from absl import flags

    from electra_tf import flags as flags_lib

    values = flags.FlagValues()
    flags_lib.define_pretraining_flags(values)
    values(["run_pretraining", *argv])
    return flags_lib.pretraining_configs(values)


def finetuning_from_flags(*argv: str):
    """run_finetuning's command line -> (task, FinetuningConfig, FinetuningRun), as its main
    reads them (a --flagfile is relative to the repo root)."""
    from absl import flags

    from electra_tf import flags as flags_lib
    from electra_tf.tasks.registry import task_from_config

    argv = [f"--flagfile={os.path.join(REPO, a.split('=', 1)[1])}"
            if a.startswith("--flagfile=") else a for a in argv]
    values = flags.FlagValues()
    flags_lib.define_finetuning_flags(values)
    values(["run_finetuning", *argv])
    config, run = flags_lib.finetuning_configs(values)
    return task_from_config(config), config, run


def poison_third_update(monkeypatch) -> None:
    """Gives the TensorFlow backend's third optimizer update an infinite gradient: clipping
    then makes every gradient NaN, while that step's loss (computed before the update)
    stays finite, as it does when a chunk's last step diverges."""
    import numpy as np
    import tensorflow as tf

    from electra_tf.training.backends import tensorflow as backend

    real = backend.apply_reduced_gradients

    def poisoned(optimizer, grads, variables, clip_norm):
        bad = tf.where(tf.equal(optimizer.iterations, 2), np.float32(np.inf), np.float32(0))
        return real(optimizer, [grads[0] + bad] + list(grads[1:]), variables, clip_norm)

    monkeypatch.setattr(backend, "apply_reduced_gradients", poisoned)


# The finetuning conftest's toy task folders (fixtures), by task.
TOY_TASKS = {"sst2": "toy_sst2_dir", "ner": "toy_ner_dir", "squad_v2": "toy_squad_dir"}


def toy_trainer(task, data_dir, pretrained_dir, model_dir, max_seq_length, train_batch_size=8,
                eval_batch_size=128, **run):
    """A TensorFlowFinetuning of one epoch without dropout on a toy task's folder (no
    evaluation); `run`: more FinetuningRun fields."""
    from electra_tf.core.config import FinetuningConfig, FinetuningRun
    from electra_tf.tasks.registry import get_task
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    config = FinetuningConfig(task_name=task, max_seq_length=max_seq_length,
                              train_batch_size=train_batch_size, hidden_dropout_prob=0.0,
                              attention_probs_dropout_prob=0.0, num_train_epochs=1,
                              eval_batch_size=eval_batch_size)
    return TensorFlowFinetuning(get_task(task), config, FinetuningRun(
        model_dir=str(model_dir), data_dir=data_dir, init_checkpoint=pretrained_dir,
        do_eval=False, **run))


def finetune(*argv: str):
    """run_finetuning's main in this process, on the TensorFlow backend: (trainer, results)."""
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    trainer = TensorFlowFinetuning(*finetuning_from_flags(*argv))
    return trainer, trainer.train()


# === Child processes ===
def jax_child_env(devices: int = 1, tests_on_path: bool = True, **extra: str) -> dict:
    """This environment for a KERAS_BACKEND=jax child on `devices` CPU devices.

    XLA's CPU backend compiles at LLVM optimisation level 0 here: the tests' programs
    are tiny, so compiling them costs far more than running them, and level 0 compiles
    them about a sixth faster (the same HLO and fusions; only the machine code differs).
    Users' runs keep XLA's default."""
    path = [REPO, os.path.join(REPO, "tests")] if tests_on_path else [REPO]
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(path),
               XLA_FLAGS=f"--xla_force_host_platform_device_count={devices} "
                         "--xla_backend_optimization_level=0")
    return {**env, **extra}


def child_env(**extra: str) -> dict:
    """This environment for a `python` child: the repo on its path, TF's C++ logs quiet."""
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO, **extra)


class _JaxScripts:
    """tests/jax_scripts.py's process: KERAS_BACKEND=jax on `devices` CPU devices
    (jax_child_env), started at its first script, one per pytest process and device
    count (each xdist worker its own)."""

    def __init__(self, devices: int = 1):
        self.devices = devices
        self.proc = self.log = None

    def _start(self) -> None:
        fd, self.log = tempfile.mkstemp(prefix="jax_scripts_", suffix=".stderr")
        with os.fdopen(fd, "ab") as stderr:  # appends: the reader's seeks move nothing
            self.proc = subprocess.Popen(
                [sys.executable, os.path.join(REPO, "tests", "jax_scripts.py")], cwd=REPO,
                env=jax_child_env(self.devices), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=stderr, text=True)

    def run(self, script: str, args, timeout: float | None) -> subprocess.CompletedProcess:
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            self._start()
        start = os.path.getsize(self.log)
        line = ""
        try:
            self.proc.stdin.write(json.dumps({"script": script, "argv": list(args)}) + "\n")
            self.proc.stdin.flush()
            if not select.select([self.proc.stdout], [], [], timeout)[0]:
                self.close()
                raise subprocess.TimeoutExpired(["jax_scripts.py"], timeout)
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            pass
        with open(self.log, "rb") as f:
            f.seek(start)
            stderr = f.read().decode("utf-8", "replace")
        if not line:  # the process died (a crash in an op): this script fails, the next starts one
            code = self.proc.wait()
            self.close()
            return subprocess.CompletedProcess(["jax_scripts.py", *args], code, "", stderr)
        answer = json.loads(line)
        return subprocess.CompletedProcess(["jax_scripts.py", *args], answer["returncode"],
                                           answer["stdout"], stderr)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()  # the end of its input: it returns
            try:
                self.proc.wait(timeout=patience(30))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self.log is not None:
            os.remove(self.log)
            self.log = None


# One process per device count: 1 (most scripts), 2 (the data-parallel comparisons).
_JAX_SCRIPTS: dict[int, _JaxScripts] = {}


@atexit.register
def _close_jax_scripts() -> None:
    for scripts in _JAX_SCRIPTS.values():
        scripts.close()


def run_jax_script(script: str, *args: str, timeout: int = 600,
                   devices: int = 1) -> subprocess.CompletedProcess:
    """`python -c script args...` under KERAS_BACKEND=jax on `devices` CPU devices, as a
    child of jax_child_env(devices) would run it, but in tests/jax_scripts.py's process
    for that device count, which runs this process's JAX scripts one after the other (a
    JAX process start costs seconds); `timeout` as run_python's. Returns its returncode,
    stdout and stderr."""
    scripts = _JAX_SCRIPTS.setdefault(devices, _JaxScripts(devices))
    return scripts.run(textwrap.dedent(script), args, patience(timeout))


# === Waiting for children ===
# A wait's limit is there to end a hung child, not to time one: on 2 cores at load
# 9-14 the suite's children ran several times slower than on quiet ones, and a 300 s
# kill of the export fixture's fresh-process load then failed 67 tests. Every limit
# in the tests is written as what the work takes on 2 quiet cores, with room, and
# waits SLOWDOWN times that. ELECTRA_TEST_SLOWDOWN sets the factor (0: no limit).
SLOWDOWN = float(os.environ.get("ELECTRA_TEST_SLOWDOWN", "10"))


def patience(quiet_seconds: float) -> float | None:
    """How long to wait for what takes up to `quiet_seconds` on 2 quiet cores (None:
    for ever, where ELECTRA_TEST_SLOWDOWN=0)."""
    return quiet_seconds * SLOWDOWN if SLOWDOWN > 0 else None


def popen_python(args, env: dict | None = None, **kwargs) -> subprocess.Popen:
    """`python args...` from the repo root (its SIGINT at the default: conftest.py)."""
    return subprocess.Popen([sys.executable, *args], cwd=REPO, env=env or child_env(),
                            **kwargs)


def bench_leftovers(tmpdir) -> list[str]:
    """What a benchmark script left in the TMPDIR it ran with: its scratch folders
    (bench_*) and workers' result files (*.json). TensorFlow's AutoGraph leaves its
    generated modules there too; those are not the script's."""
    return [p for p in os.listdir(tmpdir) if p.startswith("bench_") or p.endswith(".json")]


def run_python(args, env: dict | None = None, timeout: int = 300,
               **kwargs) -> subprocess.CompletedProcess:
    """Runs `python args...` to the end (as popen_python), capturing text output;
    `timeout`: seconds on 2 quiet cores, waited `patience(timeout)`."""
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env or child_env(),
                          capture_output=True, text=True,
                          timeout=patience(timeout), **kwargs)


def run_module(module: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """Runs `python -m module args...` in a fresh process, from the repo root (`timeout`
    as run_python's)."""
    return run_python(["-m", module, *args], timeout=timeout)


_REPORT_TF = """
import runpy, sys
sys.argv = sys.argv[1:]
try:
    runpy.run_module(sys.argv[0], run_name="__main__")
except SystemExit as e:
    print("EXIT", e.code, "tensorflow" in sys.modules)
"""


def run_module_reporting_tf(module: str, *args: str, env: dict | None = None
                            ) -> tuple[subprocess.CompletedProcess, bool]:
    """Runs `python -m module args...` as run_module does (in `env`: child_env's by
    default); also says whether the module had imported TensorFlow when it exited (the
    input checks that run before it, a JAX run on the NumPy reader)."""
    proc = run_python(["-c", _REPORT_TF, module, *args], env=env)
    tail = proc.stdout.split()[-3:]
    assert tail[:1] == ["EXIT"], proc.stdout[-2000:] + proc.stderr[-2000:]
    proc.returncode = int(tail[1]) if tail[1] != "None" else 0
    return proc, tail[2] == "True"


def error_line(proc, *expected, returncode=2) -> str:
    """The one `error:` line of a CLI run that failed cleanly, holding `expected`."""
    assert proc.returncode == returncode, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


def signal_after(procs, pattern: str, signalled=(0,), sig: int = signal.SIGTERM,
                 wait_s: int = 120) -> list[tuple[int, str]]:
    """Reads the stderr (a text pipe) of each of `procs` in a thread of its own; once
    procs[0] printed a line matching `pattern` (a regex), sends `sig` to each process of
    `signalled` (each its own signal, as a scheduler does; none: nothing is waited for),
    then waits `wait_s` (on 2 quiet cores) for every process. Returns each one's
    (status, stderr); a process still running at the end is killed."""
    logs, found = [[] for _ in procs], threading.Event()

    def pump(i):  # stderr, line by line: the test waits for `pattern`
        for line in procs[i].stderr:
            logs[i].append(line)
            if i == 0 and re.search(pattern, line):
                found.set()

    readers = [threading.Thread(target=pump, args=(i,), daemon=True) for i in range(len(procs))]
    for reader in readers:
        reader.start()
    try:
        if signalled:
            assert found.wait(patience(300)), "".join(logs[0])[-3000:]
            for i in signalled:
                procs[i].send_signal(sig)
        codes = [p.wait(timeout=patience(wait_s)) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for reader in readers:
        reader.join(patience(30))  # the last lines, up to the pipe's end
    return [(code, "".join(log)) for code, log in zip(codes, logs)]


def interrupt_after(module: str, args: list[str], pattern: str, model_dir,
                    sig: int = signal.SIGINT, env: dict | None = None) -> int:
    """Runs `python -m module args`, sends `sig` (Ctrl-C's SIGINT, or the SIGTERM a
    scheduler sends before a kill) once `pattern` is printed, and checks the one-line
    exit: status 128 + sig, no traceback, a checkpoint at the step it names (returned)."""
    # SIGINT at its default in the child, even where this suite runs with it ignored.
    proc = popen_python(["-m", module, *args], env=env, stderr=subprocess.PIPE, text=True)
    [(code, stderr)] = signal_after([proc], pattern, sig=sig)
    assert code == 128 + sig, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    *before, last = stderr.strip().splitlines()
    match = re.fullmatch(r"interrupted at step (\d+); checkpoint saved; rerun to resume", last)
    assert match, stderr[-3000:]
    said = "Ctrl-C" if sig == signal.SIGINT else signal.Signals(sig).name
    assert f"{said}: stopping after the running chunk of steps, with a checkpoint (a second " \
        f"{said} stops sooner: saving where the loop can stop, else at once without saving)" \
        in before, stderr[-3000:]  # said at once
    step = int(match.group(1))
    saved = [model_dir / "checkpoints" / name for name in (f"ckpt-{step}.index",
                                                            f"jax-ckpt-{step}.npz")]
    assert any(path.exists() for path in saved), stderr[-3000:]
    return step


def sync_log(monkeypatch):
    """Records os.fsync (by the path its descriptor names) and renames, in order."""
    events = []
    real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(a, b):
        events.append(("rename", os.path.abspath(a), os.path.abspath(b)))
        real_replace(a, b)

    def rename(a, b):
        events.append(("rename", os.path.abspath(a), os.path.abspath(b)))
        real_rename(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "rename", rename)
    return events

