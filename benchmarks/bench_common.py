"""What the benchmark scripts share: recorded results name no path of the machine,
and each measured setting runs in a worker process of its own; the analytic FLOP
count of a pre-training step (bench_pretraining.py and bench_gpu.py describe it
in their module docstrings)."""

import atexit
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or the platform's processor field."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def repo_relative(path: str) -> str:
    """`path` relative to the repository root (its file name when outside it).

    What the results record, so that they carry no path of the machine.
    """
    full = os.path.abspath(path)
    if os.path.commonpath([full, ROOT]) == ROOT:
        return os.path.relpath(full, ROOT)
    return os.path.basename(full)


def scratch_dir(prefix: str) -> str:
    """A new temporary folder (under $TMPDIR) for a script's inputs and models.

    It is removed, with everything in it, when the process exits: at the end, by an
    exception or by Ctrl-C (not when the process is killed). A benchmark writes
    hundreds of MB there (exports, checkpoints), and CI runs every script.
    """
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def relative_flag(arg: str) -> str:
    """`--flag=PATH` with PATH made repo_relative when it is an absolute path."""
    name, eq, value = arg.partition("=")
    if eq and os.path.isabs(value):
        return f"{name}={repo_relative(value)}"
    return arg


def write_report(output: str, report: dict, lines: list) -> None:
    """OUTPUT.json (`report`) and OUTPUT.md: its command, the machine (cpu, cores, start,
    and the load average before and after where `report` holds them), then `lines`."""
    with open(output + ".json", "w") as f:
        json.dump(report, f, indent=2)
    load = (f"; load {report['load_before']} before, {report['load_after']} after"
            if "load_before" in report else "")
    with open(output + ".md", "w") as f:
        f.write("\n".join([f"Command: `{report['command']}`", "",
                           f"Machine: {report['cpu']}, {report['cores']} cores; "
                           f"{report['started']}{load}.", "", *lines, ""]))


def run_worker_process(cmd: list, env: dict, result_file: str, timeout_s=None) -> dict:
    """Runs one benchmark worker; relays its "[bench]" lines; returns its JSON result.

    The worker writes its result to `result_file`. A failure or a timeout
    comes back as {"error": ..., "process_wall_s": ...}, with the worker's
    last stderr lines, so that one setting's failure does not end a run.
    """
    try:
        return _run_worker(cmd, env, result_file, timeout_s)
    finally:
        if os.path.exists(result_file):
            os.remove(result_file)


def _run_worker(cmd: list, env: dict, result_file: str, timeout_s) -> dict:
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        err = e.stderr if isinstance(e.stderr, str) else (e.stderr or b"").decode(errors="replace")
        _relay(err)
        print(f"[bench]   TIMED OUT after {timeout_s:.0f} s", file=sys.stderr, flush=True)
        return {"error": f"timed out after {timeout_s:.0f} s", "process_wall_s": timeout_s}
    wall = time.monotonic() - t0
    _relay(proc.stderr)
    if proc.returncode:
        tail = "\n".join(proc.stderr.splitlines()[-25:])
        print(f"[bench]   FAILED (exit {proc.returncode}) after {wall:.0f} s:\n{tail}",
              file=sys.stderr, flush=True)
        return {"error": tail, "process_wall_s": wall}
    with open(result_file) as f:
        result = json.load(f)
    result["process_wall_s"] = wall
    return result


def run_main(main) -> None:
    """Runs a benchmark's main: electra_tf's refusal of an input (a missing folder or
    records, a bad vocabulary) and a file that cannot be read are one `error:` line,
    status 2, where they had been tracebacks."""
    from electra_tf.core.errors import ConfigError, InputError, TaskDataError, VocabError

    try:
        result = main()
    except (InputError, ConfigError, TaskDataError, VocabError, FileNotFoundError) as e:
        raise SystemExit(f"error: {e}") from None
    if result:
        raise SystemExit(result)


def run_checked(cmd: list, what: str, **kwargs) -> str:
    """Runs a command the benchmark needs whole (a data build, a child measurement);
    returns its stdout. A failure ends the benchmark with its last stderr lines and one
    `error:` line naming `what` (subprocess's CalledProcessError had hidden the child's
    own error)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if proc.returncode:
        tail = "\n".join(proc.stderr.splitlines()[-15:])
        print(tail, file=sys.stderr, flush=True)
        raise SystemExit(f"error: {what} failed (exit {proc.returncode})")
    return proc.stdout


def _relay(stderr: str) -> None:
    for line in stderr.splitlines():
        if line.startswith("[bench]"):
            print(line, file=sys.stderr, flush=True)


def encoder_flops_per_token(embedding_size: int, hidden_size: int, intermediate_size: int,
                            num_layers: int, seq_len: int) -> int:
    """Forward matmul FLOPs per token of one encoder (see the module docstring)."""
    e, h, i = embedding_size, hidden_size, intermediate_size
    proj = 2 * e * h if e != h else 0
    layer = 2 * (4 * h * h + 2 * h * i) + 2 * 2 * seq_len * h
    return proj + num_layers * layer


def model_flops_per_sequence(disc, gen, seq_len: int, num_predictions: int,
                             vocab_size: int) -> dict:
    """Training FLOPs per sequence of one ELECTRA step: 3 x (D + G + MLM head) forward.

    Args:
      disc, gen: EncoderConfig-like (resolved_embedding_size, hidden_size,
        intermediate_size, num_hidden_layers).
      seq_len: L. num_predictions: N, the MLM head's positions per sequence.
      vocab_size: V.
    """
    def per_token(c):
        return encoder_flops_per_token(c.resolved_embedding_size, c.hidden_size,
                                       c.intermediate_size, c.num_hidden_layers, seq_len)

    d_tok = per_token(disc) + 2 * (disc.hidden_size * disc.hidden_size + disc.hidden_size)
    g_tok = per_token(gen)
    e = gen.resolved_embedding_size
    mlm = 2 * gen.hidden_size * e + 2 * e * vocab_size
    forward = seq_len * (d_tok + g_tok) + num_predictions * mlm
    return {"discriminator_forward": seq_len * d_tok, "generator_forward": seq_len * g_tok,
            "mlm_head_forward": num_predictions * mlm, "forward": forward, "train": 3 * forward}


# === Inputs, written by the product's own writers ===
def call_times_ms(fn, warmup: int, iters: int) -> list:
    """Each of `iters` calls of fn() in milliseconds, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t0))
    return times


def synthetic_vocab(path: str, size: int = 30522, prefix: str = "w") -> str:
    """A BERT-layout vocabulary of `size` lines: [PAD], [unused0-98], [UNK], [CLS],
    [SEP], [MASK], then PREFIXN (one WordPiece each: "wN" is id 104 + N).

    The scripts' input, as a user's vocab.txt is: the folders that record it are
    written by electra_tf's own writers (`finetuned_folder`, `pretrained_folder`).
    """
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]",
                                                                   "[MASK]"]
    tokens = specials + [f"{prefix}{i}" for i in range(size - len(specials))]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    return path


def finetuned_folder(folder: str, task_name: str, vocab_file: str, model_size: str = "small",
                     max_seq_length: int = 128, label_names=None, seed: int = 0) -> str:
    """A fine-tuning model_dir of a randomly initialized discriminator with an untrained
    head, written as run_finetuning writes one (electra_tf's folder writers: weights,
    finetuning_config.json, vocab.txt and its fingerprint).

    Args:
      task_name: a registry task ("sst2", "ner", ...). label_names: a tagging task's
        tag set (else learned from data, which there is none of here).
    """
    import keras

    from electra_tf.core.config import MODEL_SIZES, EncoderConfig, FinetuningConfig, FinetuningRun
    from electra_tf.folders import finetuned
    from electra_tf.modeling import build_discriminator
    from electra_tf.tasks.model import FinetuningModel
    from electra_tf.tasks.registry import get_task
    from electra_tf.tasks.tagging import TaggingTask
    from electra_tf.text.vocab import load_vocab

    task = (TaggingTask(task_name, label_names=label_names) if label_names
            else get_task(task_name))
    config = EncoderConfig(vocab_size=len(load_vocab(vocab_file)), **MODEL_SIZES[model_size])
    keras.utils.set_random_seed(seed)
    model = FinetuningModel(build_discriminator(config).encoder, task.head,
                            max(1, len(task.label_names)), config=task.head_config())
    model.build()
    os.makedirs(folder, exist_ok=True)
    finetuned.save_finetuned(folder, model)
    finetuned.write_finetuning_config(
        folder, task=task, config=FinetuningConfig(task_name=task_name,
                                                   max_seq_length=max_seq_length),
        run=FinetuningRun(model_dir=folder, vocab_file=vocab_file), encoder=config,
        model_size=model_size, max_seq_length=max_seq_length)
    return folder


def pretrained_folder(folder: str, vocab_file: str, model_size: str = "small",
                      seed: int = 0, objective: str = "") -> str:
    """A pre-training model_dir holding a randomly initialized discriminator, written
    by electra_tf's folder writers (discriminator weights and config,
    pretraining_config.json, vocab.txt and its fingerprint): what --init_checkpoint reads.
    `objective` (e.g. "electric") records the run's hyperparameters with it."""
    import keras

    from electra_tf.core.config import MODEL_SIZES, EncoderConfig
    from electra_tf.folders import pretraining
    from electra_tf.modeling import build_discriminator
    from electra_tf.text.vocab import load_vocab

    config = EncoderConfig(vocab_size=len(load_vocab(vocab_file)), **MODEL_SIZES[model_size])
    keras.utils.set_random_seed(seed)
    os.makedirs(folder, exist_ok=True)
    pretraining.save_discriminator(folder, build_discriminator(config))
    hparams = None
    if objective:
        from electra_tf.core.config import PretrainingConfig

        hparams = PretrainingConfig(objective=objective, model_size=model_size)
    pretraining.write_pretraining_config(folder, hparams, {"vocab_file": vocab_file})
    return folder


def profile_training_steps(train_steps, steps: int, logdir: str) -> dict:
    """Runs `train_steps(steps)` under TensorFlow's profiler (its trace in `logdir`)
    and returns `op_time_profile` of it. Call it after the timed steps: the
    profiler's own cost stays out of them."""
    import tensorflow as tf

    tf.profiler.experimental.start(logdir)
    train_steps(steps)
    tf.profiler.experimental.stop()
    return op_time_profile(logdir, steps)


def op_time_profile(logdir: str, steps: int, top: int = 12) -> dict:
    """Where the wall time of `steps` traced training steps went, from the
    TensorFlow profiler's trace in `logdir` (tf.profiler.experimental.start/stop
    around the steps).

    TensorFlow runs independent ops side by side on its inter-op threads, so
    the ops' own durations overlap and add up to more than the wall time.
    This counts wall time instead, per step, in milliseconds:
      matmul_ms       while at least one matrix product (any op whose type
                      holds "MatMul") runs;
      two_matmuls_ms  the part of it with two or more at once;
      other_ms        while ops run and none of them is a product, split
                      evenly among the op types running then (`other_by_op`,
                      the `top` largest);
      step_ms         the whole traced time of the steps, over `steps`.
    """
    import collections
    import glob

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    if not files:
        raise ValueError(f"no profiler trace under {logdir}")
    space = xplane_pb2.XSpace()
    with open(max(files, key=os.path.getmtime), "rb") as f:
        space.ParseFromString(f.read())
    host = next(p for p in space.planes if p.name == "/host:CPU")
    names = host.event_metadata
    edges = []  # (time ps, 0 start / 1 end, op type)
    for line in host.lines:
        if not line.name.startswith("tf_Compute"):
            continue
        base = line.timestamp_ns * 1000
        for event in line.events:
            name = names[event.metadata_id].name  # "scope/op_name:OpType"
            if "::" in name or ":" not in name:
                continue  # the executor's own events, not ops
            start = base + event.offset_ps
            op = name.rsplit(":", 1)[1]
            edges += [(start, 0, op), (start + event.duration_ps, 1, op)]
    if not edges:
        raise ValueError(f"the trace under {logdir} holds no TensorFlow op")
    edges.sort(key=lambda e: (e[0], e[1]))
    running = collections.Counter()
    other = collections.Counter()
    matmul = two = 0.0
    last = edges[0][0]
    for t, kind, op in edges:
        span = t - last
        if span > 0:
            products = sum(n for o, n in running.items() if "MatMul" in o)
            if products:
                matmul += span
                two += span if products > 1 else 0
            else:
                busy = [o for o, n in running.items() if n > 0]
                for o in busy:
                    other[o] += span / len(busy)
        last = t
        running[op] += 1 if kind == 0 else -1
    per_step = 1e9 * steps  # ps -> ms per step
    return {"steps": steps,
            "step_ms": round((edges[-1][0] - edges[0][0]) / per_step, 1),
            "matmul_ms": round(matmul / per_step, 1),
            "two_matmuls_ms": round(two / per_step, 1),
            "other_ms": round(sum(other.values()) / per_step, 1),
            "other_by_op": {o: round(v / per_step, 1) for o, v in other.most_common(top)}}
