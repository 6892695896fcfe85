"""ELECTRA pre-training throughput on one accelerator: electra_tf on JAX beside HF transformers.

    # on a GPU machine (benchmarks/gpu_pretraining.md: what to install):
    python benchmarks/bench_gpu.py --sizes=small --output=benchmarks/gpu_small
    # wiring check on CPU, tiny configs, < 60 s:
    KERAS_BACKEND=jax .venv/bin/python benchmarks/bench_gpu.py --toy --output=/tmp/gpu_toy

Writes OUTPUT.json (raw numbers) and OUTPUT.md (command, device, date, table),
rewritten after every setting, so a run cut short keeps what it measured.
`--merge A.json B.json ... --output=OUT` joins the results of several runs
(one per size, say) into one table.

What runs, each setting in a fresh subprocess (the Keras dtype policy is
process-wide, JAX's peak-memory counter cannot be reset, and JAX and PyTorch
must not share one GPU's memory):
  * matmul peak: jnp.matmul of random square bf16 and fp32 matrices
    (4096 and 8192; JAX's default matmul precision), each timed over
    back-to-back calls ended by block_until_ready; the best size is the
    peak that MFU is measured against, per precision.
  * electra_tf: `electra_tf.training.backends.jax.JaxPretraining`, the class that
    `KERAS_BACKEND=jax python -m electra_tf.run_pretraining` trains with,
    built from a PretrainingConfig as configs/small.flags or
    configs/base.flags (generator 1/4 of D's width for Small, 1/3 for
    Base) and timed through its own `train_steps(iterator, n)`: the same
    compiled step (forward, MLM + 50 x RTD loss, gradients, global-norm
    clipping, AdamW), per-step batch transfer and `jax_steps_per_call`
    grouping as a run. For each of fp32 / bf16 (`--mixed_precision`) x
    jax_steps_per_call 1 / 10.
  * HF transformers ELECTRA (if torch and transformers import; else the
    reason is printed and recorded): an ElectraForMaskedLM generator and an
    ElectraForPreTraining discriminator of the same sizes, embeddings shared
    as in the paper, on the same batches: the generator's MLM head on the
    masked positions only (as the original and electra_tf), Gumbel-max
    sampling of the replacements, loss = MLM + 50 x RTD, global-norm
    clipping at 1.0, AdamW (fused on CUDA; no decay on LayerNorm and
    bias) with electra_tf's learning-rate schedule (linear warmup and decay). Eager and torch.compile (of the forward and loss), each in fp32
    and bf16 (torch.autocast, fp32 weights, as Keras' mixed_bfloat16).

Input: synthetic pre-masked batches, random token ids laid out as
[CLS] A [SEP] B [SEP] with two segments, masked by the project's own
`electra_tf.data.masking.mask_batch_numpy` with the run's MaskingConfig
(`preflight.pretraining_masking`), a pool of `--pool_batches` batches
cycled. The same rows are written as TFRecords (TensorFlow-free encoder
below) so that JaxPretraining's preflight reads them, and
`--input=records` feeds the run's own NumPy input pipeline
(`make_train_iterator`) instead, input cost included.

Timing, per setting: the first call `train_steps(it, K)` (tracing and
compilation + K steps), `--warmup_chunks` chunks, then `--timed_chunks`
chunks of `--chunk_steps` steps (rounded up to a multiple of K, so no
remainder step is compiled: K50 times chunks of 50 steps at the default 20),
each chunk one `train_steps(it, chunk_steps)` that returns its
losses on the host (synchronised). seq/s = batch x chunk_steps / median
chunk time; compile_s = first call - K x the steady per-step time. HF:
the same, its steps synchronised at each chunk's end.

Model FLOPs per sequence (`model_flops_per_sequence`, analytic, matmuls
only; embedding lookups, softmax, LayerNorm, GELU, biases, sampling and the
optimizer left out), with L the sequence length, V the vocab, N =
max_predictions_per_seq (the MLM head's positions, int((0.15 + 0.005) * L):
19 of 128, 79 of 512, about 15%):
  per token, for each encoder (D, and G), widths E (embedding), H, I (FFN):
      2*E*H                                  (embedding projection, if E != H)
    + layers * (2*(4*H*H + 2*H*I)            (Q, K, V, O and the FFN)
                 + 2*2*L*H)                  (attention scores QK^T and context AV)
  D's RTD head per token: 2*(H_D*H_D + H_D)
  G's MLM head per masked position: 2*H_G*E_G + 2*E_G*V (tied vocab projection)
  forward per sequence = L * (D per token + G per token) + N * MLM head
  training per sequence = 3 x forward (backward = 2 x forward)
model TFLOP/s = training FLOPs per sequence x seq/s / 1e12; MFU = that over
the measured matmul peak of the setting's precision (also reported against
the bf16 peak).

Peak memory: jax.devices()[0].memory_stats()["peak_bytes_in_use"] (None where
the backend has no memory stats, e.g. CPU); torch.cuda.max_memory_allocated.

A/B (the changes a profile is likely to ask for, each measured beside the
setting without it): an electra_tf setting key may end in a variant,
options joined by "+" (VARIANTS): ad0 (attention dropout 0 in G and D),
fused (--attention_implementation=fused; only with ad0, since fused
attention runs only while training without attention dropout), prefetch
(--jax_device_prefetch), nodonate (the compiled call jitted without
donating the state), nocb (XLA_FLAGS=--xla_gpu_enable_command_buffer=: each
kernel launched by XLA, no CUDA graphs). Each variant row is compared with the key without its
last option (ad0+fused with ad0, ad0, prefetch, nodonate and nocb with the
plain row). `--ab_prefetch=KEYS` measures --jax_device_prefetch in the
named rows' own process too, on their compiled program: after the timed
chunks, `--ab_prefetch_chunks` more, off and on in turns (ABBA).

Budget: each setting has an estimate of its wall time on an H100
(`estimate_s`: process start, build, compile, the timed chunks); a setting
starts only if its estimate, scaled by the measured / estimated wall time
of the settings run so far, fits in what is left of `--budget_s`, else it
is recorded as skipped, with both numbers. `--only` runs its keys in the
order given (a lease's order of value).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

from bench_common import (  # noqa: E402
    model_flops_per_sequence,
    relative_flag,
    run_worker_process,
    scratch_dir,
)

VOCAB = 30522
# name -> (PretrainingConfig fields as in configs/*.flags, label)
SIZES = {
    "small": (dict(model_size="small", generator_hidden_size=0.25, vocab_size=VOCAB,
                   max_seq_length=128, train_batch_size=128), "Small b128 s128"),
    "base": (dict(model_size="base", generator_hidden_size=0.33333, vocab_size=VOCAB,
                  max_seq_length=128, train_batch_size=256), "Base b256 s128"),
    "base512": (dict(model_size="base", generator_hidden_size=0.33333, vocab_size=VOCAB,
                     max_seq_length=512, train_batch_size=64), "Base b64 s512"),
    # --toy: tiny configs that run on 2 CPU cores in seconds (wiring only).
    "toy": (dict(model_size="tiny", generator_hidden_size=0.25, vocab_size=512,
                 model_hparam_overrides={"hidden_size": 64, "num_hidden_layers": 1,
                                         "embedding_size": 32},
                 max_seq_length=32, train_batch_size=8), "toy (1 layer, H 64) b8 s32"),
}
SPECIALS = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# === The analytic FLOP count ===
# model_flops_per_sequence is bench_common's (bench_pretraining.py counts with it too).


def pretraining_config(size: str, attention_dropout_0: bool = False):
    from electra_tf.core.config import PretrainingConfig

    fields = dict(SIZES[size][0])
    if attention_dropout_0:  # G's config is D's scaled: it inherits the rate
        fields["model_hparam_overrides"] = {**fields.get("model_hparam_overrides", {}),
                                            "attention_probs_dropout_prob": 0.0}
    # No warmup cut-off matters for throughput; steps enough for any chunk count.
    return PretrainingConfig(**fields, num_train_steps=10**6)


def config_flops(size: str) -> dict:
    c = pretraining_config(size)
    return model_flops_per_sequence(c.discriminator_config(), c.generator_config(),
                                    c.max_seq_length, c.resolved_max_predictions_per_seq,
                                    c.vocab_size)


# === Synthetic data: vocab, rows, TFRecords (no TensorFlow), masked batches ===
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64 two's complement, as protobuf
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:  # length-delimited field
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def serialize_example(features: dict) -> bytes:
    """A tf.train.Example of int64 lists, encoded by hand (keys sorted, as deterministic=True)."""
    entries = b""
    for key in sorted(features):
        packed = b"".join(_varint(int(v)) for v in features[key])
        feature = _field(3, _field(1, packed))  # Feature.int64_list = Int64List{value packed}
        entries += _field(1, _field(1, key.encode()) + _field(2, feature))  # map entry
    return _field(1, entries)  # Example.features


def write_tfrecords(path: str, records: list) -> None:
    from electra_tf.data.tfrecord_reader import masked_crc

    with open(path, "wb") as f:
        for data in records:
            length = struct.pack("<Q", len(data))
            f.write(length + struct.pack("<I", masked_crc(length)) + data
                    + struct.pack("<I", masked_crc(data)))


def synthetic_data(folder: str, config, num_rows: int, seed: int = 0) -> dict:
    """Writes vocab.txt and pretrain_data.tfrecord-00000-of-00001; returns raw rows."""
    import numpy as np

    vocab = SPECIALS + [f"tok{i:05d}" for i in range(config.vocab_size - len(SPECIALS))]
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    rng = np.random.default_rng(seed)
    L, first = config.max_seq_length, len(SPECIALS)
    cls_id, sep_id = SPECIALS.index("[CLS]"), SPECIALS.index("[SEP]")
    ids = rng.integers(first, config.vocab_size, (num_rows, L)).astype(np.int32)
    seg = np.ones((num_rows, L), np.int32)
    for r in range(num_rows):
        len_a = int(rng.integers(L // 8, L - 3 - L // 8))
        ids[r, 0], ids[r, len_a + 1], ids[r, L - 1] = cls_id, sep_id, sep_id
        seg[r, :len_a + 2] = 0
    rows = {"input_ids": ids, "input_mask": np.ones((num_rows, L), np.int32),
            "segment_ids": seg}
    write_tfrecords(os.path.join(folder, "pretrain_data.tfrecord-00000-of-00001"),
                    [serialize_example({k: v[r] for k, v in rows.items()})
                     for r in range(num_rows)])
    return rows


def masked_batches(rows: dict, batch_size: int, masking, seed: int = 0) -> list:
    """The rows cut into batches, each masked by electra_tf's mask_batch_numpy."""
    import numpy as np

    from electra_tf.data.masking import mask_batch_numpy

    out = []
    for b in range(len(rows["input_ids"]) // batch_size):
        batch = {k: v[b * batch_size:(b + 1) * batch_size].copy() for k, v in rows.items()}
        batch.update(mask_batch_numpy(batch["input_ids"], batch["input_mask"],
                                      np.random.default_rng([seed, b]), masking))
        out.append(batch)
    return out


def cycle(batches):
    while True:
        yield from batches


def whole_calls(chunk_steps: int, steps_per_call: int) -> int:
    """`chunk_steps` rounded up to whole calls of `steps_per_call` steps (a remainder
    would compile a second step program inside the timed chunks)."""
    return -(-chunk_steps // steps_per_call) * steps_per_call


# === Workers (each runs in its own process) ===
def chunk_timings(first_call, chunk, args, steps_first: int, chunk_steps: int = 0) -> dict:
    chunk_steps = chunk_steps or args.chunk_steps
    t0 = time.perf_counter()
    first_values = first_call()
    first_s = time.perf_counter() - t0
    log(f"  first call ({steps_first} step(s), compile included): {first_s:.1f} s")
    for i in range(args.warmup_chunks):
        t0 = time.perf_counter()
        chunk()
        log(f"  warmup chunk {i + 1}/{args.warmup_chunks}: {time.perf_counter() - t0:.2f} s")
    times, values = [], []
    for i in range(args.timed_chunks):
        t0 = time.perf_counter()
        values.append(chunk())
        times.append(time.perf_counter() - t0)
        log(f"  timed chunk {i + 1}/{args.timed_chunks} ({chunk_steps} steps): "
            f"{times[-1]:.3f} s")
    med = statistics.median(times)
    per_step = med / chunk_steps
    return {"first_call_s": first_s, "first_call_steps": steps_first, "chunk_s": times,
            "median_chunk_s": med, "step_s": per_step,
            "compile_s": max(0.0, first_s - steps_first * per_step),
            "first_loss": float(first_values), "losses": [float(v) for v in values],
            "chunk_steps": chunk_steps}


MAX_PROFILE_BYTES = 15 * 2 ** 20  # what a short lease brings back: 16 MiB a file


# jax.profiler.ProfileOptions, tried in turn until the archive fits: no Python
# tracer (the host's Python calls say nothing of the step, and weigh); then no HLO
# protos either (XProf's op profile and graph viewer want them) and fewer host events.
PROFILE_ATTEMPTS = ({"python_tracer_level": 0},
                    {"python_tracer_level": 0, "host_tracer_level": 1,
                     "enable_hlo_proto": False})


def profile_chunk(chunk, target: str) -> dict:
    """One more call of `chunk` under jax.profiler.trace, packed into `target` (.tar.gz).

    The trace (xplane.pb, what TensorBoard's profile plugin and XProf read) is
    several folders deep; one archive comes back from a lease. An archive over
    MAX_PROFILE_BYTES is traced again, one more call, with the next of
    PROFILE_ATTEMPTS' options; if none fits, none is kept (the sizes are recorded).
    """
    import tarfile

    import jax

    tried = []
    for options in PROFILE_ATTEMPTS:
        folder = tempfile.mkdtemp(prefix="bench_gpu_trace_")
        try:
            profiler_options = None
            if hasattr(jax.profiler, "ProfileOptions"):
                profiler_options = jax.profiler.ProfileOptions()
                for name, value in options.items():
                    if hasattr(profiler_options, name):
                        setattr(profiler_options, name, value)
            with jax.profiler.trace(folder, profiler_options=profiler_options):
                chunk()
            with tarfile.open(target, "w:gz") as tar:
                tar.add(folder, arcname=os.path.basename(target).split(".")[0])
        except Exception as e:  # noqa: BLE001 (a trace is a bonus: never lose the timings)
            return {"error": f"{type(e).__name__}: {e}"[:500], "tried": tried}
        finally:
            shutil.rmtree(folder, ignore_errors=True)  # the archive holds what is kept
        size = os.path.getsize(target)
        tried.append({"options": options, "bytes": size})
        if size <= MAX_PROFILE_BYTES:
            log(f"  profiler trace: {target} ({size / 2 ** 20:.1f} MiB)")
            return {"archive": os.path.basename(target), "bytes": size, "options": options,
                    "tried": tried}
        os.remove(target)
        log(f"  profiler trace of {size / 2 ** 20:.1f} MiB is over "
            f"{MAX_PROFILE_BYTES / 2 ** 20:.0f} MiB: tracing one more call with fewer events")
    return {"error": f"every trace archive was over {MAX_PROFILE_BYTES:,} bytes",
            "tried": tried}


def worker_matmul(args):
    import jax
    import jax.numpy as jnp

    dev = jax.devices()[0]
    sizes = [256, 512] if args.toy else [4096, 8192]
    rows = []
    for dtype in ("bfloat16", "float32"):
        for n in sizes:
            ka, kb = jax.random.split(jax.random.key(n))
            a = jax.random.normal(ka, (n, n), dtype)
            b = jax.random.normal(kb, (n, n), dtype)
            mm = jax.jit(jnp.matmul)
            mm(a, b).block_until_ready()
            reps = 5 if args.toy else 20
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                for _ in range(reps):
                    out = mm(a, b)
                out.block_until_ready()
                times.append((time.perf_counter() - t0) / reps)
            tflops = 2 * n ** 3 / min(times) / 1e12
            rows.append({"dtype": dtype, "n": n, "seconds": min(times), "tflops": tflops})
            log(f"  matmul {n}^3 {dtype}: {tflops:.2f} TFLOP/s")
    peak = {d: max(r["tflops"] for r in rows if r["dtype"] == d) for d in ("bfloat16", "float32")}
    info = {"device_kind": dev.device_kind, "platform": dev.platform,
            "num_devices": jax.device_count(), "jax": jax.__version__,
            "default_matmul_precision": str(jax.config.jax_default_matmul_precision)}
    try:
        import jaxlib
        info["jaxlib"] = jaxlib.__version__
    except ImportError:
        pass
    import keras
    info["keras"] = keras.__version__
    return {"matmul": rows, "peak_tflops": {"bf16": peak["bfloat16"], "fp32": peak["float32"]},
            "device": info}


def worker_electra_tf(args):
    import dataclasses

    import jax
    import numpy as np

    from electra_tf.core.config import PretrainingRun
    from electra_tf.training.backends.jax import JaxPretraining, training_state

    options = variant_options(args.variant)
    config = pretraining_config(args.size, attention_dropout_0="ad0" in options)
    folder = scratch_dir("bench_gpu_")
    B = config.train_batch_size
    rows = synthetic_data(folder, config, B * args.pool_batches)
    run = PretrainingRun(model_dir=os.path.join(folder, "model"),
                         train_data=os.path.join(folder, "pretrain_data.tfrecord-*"),
                         vocab_file=os.path.join(folder, "vocab.txt"), jit_compile=True,
                         mixed_precision=args.precision, jax_steps_per_call=args.steps_per_call,
                         jax_input_pipeline="numpy",
                         attention_implementation="fused" if "fused" in options else "einsum",
                         jax_device_prefetch="prefetch" in options)
    t0 = time.perf_counter()
    p = JaxPretraining(config, run)
    build_s = time.perf_counter() - t0
    if "nodonate" in options:
        undonated(p)
    if args.input == "records":
        iterator = p.make_train_iterator(0)
    else:
        iterator = cycle(masked_batches(rows, B, p.masking))
    n_params = sum(int(np.prod(v.shape)) for v in p.model.trainable_variables)
    log(f"  JaxPretraining built in {build_s:.1f} s: {n_params:,} parameters, "
        f"{p.num_replicas} device(s), policy {p.model.dtype_policy.name}"
        + (f", variant {args.variant}" if args.variant else ""))
    K = args.steps_per_call
    chunk_steps = whole_calls(args.chunk_steps, K)

    def first():
        return p.train_steps(iterator, K)["loss"]

    def chunk():
        return p.train_steps(iterator, chunk_steps)["loss"]

    handed = jax.tree.leaves(training_state(p.model, p.optimizer))  # to the first call
    result = chunk_timings(first, chunk, args, K, chunk_steps)
    # donated buffers are deleted by the call that took them: measured, not assumed (JAX
    # 0.11 on a CPU keeps one int32 scalar of the state; what counts is the bytes)
    result["donated_fraction"] = (sum(x.nbytes for x in handed if x.is_deleted())
                                  / sum(x.nbytes for x in handed))
    if args.ab_prefetch_chunks:
        result["ab_prefetch"] = interleaved_prefetch(p, chunk, args.ab_prefetch_chunks)
    if args.profile_to:  # one compiled call: K steps
        result["profile"] = profile_chunk(first, args.profile_to)
    stats = jax.devices()[0].memory_stats() or {}
    d, g = config.discriminator_config(), config.generator_config()
    result.update({"build_s": build_s, "parameters": n_params, "optimizer_steps": p.step,
                   "peak_memory_bytes": stats.get("peak_bytes_in_use"),
                   "dtype_policy": p.model.dtype_policy.name, "input": args.input,
                   "variant": args.variant, "xla_flags": os.environ.get("XLA_FLAGS", ""),
                   "attention_probs_dropout_prob": {"discriminator": d.attention_probs_dropout_prob,
                                                    "generator": g.attention_probs_dropout_prob},
                   "run_config": {k: v for k, v in dataclasses.asdict(run).items()
                                  if k in ("mixed_precision", "jax_steps_per_call",
                                           "attention_implementation", "jax_device_prefetch")}})
    if "fused" in options:
        result["fused_attention_kernel"] = attention_kernel(d, config.max_seq_length, B)
        log(f"  fused attention runs as: {result['fused_attention_kernel']}")
    return result


def undonated(p) -> None:
    """The trainer's compiled calls, jitted as its own but without donating the state."""
    import functools

    import jax

    cache = {}

    def compiled_steps(phase, num_steps):
        key = (phase.name, num_steps)
        if key not in cache:
            cache[key] = jax.jit(functools.partial(p._steps_fn, phase, num_steps))
        return cache[key]

    p._compiled_steps = compiled_steps


def interleaved_prefetch(p, chunk, n: int) -> dict:
    """`n` more chunks, --jax_device_prefetch off and on in turns (off, on, on, off, ...),
    on the trainer's one compiled program: chunk seconds per arm."""
    import dataclasses

    run, times = p.run, {False: [], True: []}
    try:
        for i in range(n):
            on = i % 4 in (1, 2)
            p.run = dataclasses.replace(run, jax_device_prefetch=on)
            t0 = time.perf_counter()
            chunk()
            times[on].append(time.perf_counter() - t0)
    finally:
        p.run = run
    out = {"off_chunk_s": times[False], "on_chunk_s": times[True]}
    if times[False] and times[True]:
        out["off_median_chunk_s"] = statistics.median(times[False])
        out["on_median_chunk_s"] = statistics.median(times[True])
        log(f"  device prefetch A/B ({n} chunks): off {out['off_median_chunk_s']:.3f} s, "
            f"on {out['on_median_chunk_s']:.3f} s a chunk")
    return out


def attention_kernel(encoder, seq_len: int, batch: int) -> str:
    """What keras.ops.dot_product_attention lowers to for D's attention, under the
    process's dtype policy: the cuDNN custom call's name where Keras' JAX backend
    picks cuDNN's fused kernel, else "xla" (its unfused attention)."""
    import jax

    from electra_tf.modeling.transformer import SelfAttention

    layer = SelfAttention(encoder.hidden_size, encoder.num_attention_heads, 0.0)
    layer.build((None, None, encoder.hidden_size))
    x = jax.ShapeDtypeStruct((batch, seq_len, encoder.hidden_size), layer.compute_dtype)
    mask = jax.ShapeDtypeStruct((batch, seq_len), "int32")
    try:
        text = jax.jit(lambda x, m: layer(x, m, training=True)).lower(x, mask).as_text()
    except Exception as e:  # noqa: BLE001 (a record, never a reason to lose the row)
        return f"unknown ({type(e).__name__}: {e})"[:300]
    found = re.search(r"__cudnn\$\w+", text)
    return found.group(0) if found else "xla"


def hf_available() -> tuple[bool, str]:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except Exception as e:  # noqa: BLE001 (any import failure is a skip reason)
        return False, f"torch/transformers do not import: {type(e).__name__}: {e}"
    return True, ""


def hf_electra_config(enc):
    from transformers import ElectraConfig

    return ElectraConfig(
        vocab_size=enc.vocab_size, embedding_size=enc.resolved_embedding_size,
        hidden_size=enc.hidden_size, num_hidden_layers=enc.num_hidden_layers,
        num_attention_heads=enc.num_attention_heads, intermediate_size=enc.intermediate_size,
        hidden_act="gelu", hidden_dropout_prob=enc.hidden_dropout_prob,
        attention_probs_dropout_prob=enc.attention_probs_dropout_prob,
        max_position_embeddings=enc.max_position_embeddings,
        type_vocab_size=enc.type_vocab_size, initializer_range=enc.initializer_range,
        layer_norm_eps=enc.layer_norm_eps)


def worker_hf(args):
    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    from electra_tf.data.masking import MaskingConfig

    config = pretraining_config(args.size)
    torch.manual_seed(0)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    disc = ElectraForPreTraining(hf_electra_config(config.discriminator_config())).to(dev)
    gen = ElectraForMaskedLM(hf_electra_config(config.generator_config())).to(dev)
    # Tied embeddings, as the paper: G reads D's embedding tables (and LayerNorm);
    # its vocab projection is D's word embedding matrix.
    gen.electra.embeddings = disc.electra.embeddings
    gen.generator_lm_head.weight = disc.electra.embeddings.word_embeddings.weight
    disc.train()
    gen.train()
    named, seen = [], set()
    for prefix, m in (("disc", disc), ("gen", gen)):
        for name, prm in m.named_parameters():
            if id(prm) not in seen:
                seen.add(id(prm))
                named.append((f"{prefix}.{name}", prm))
    no_decay = [p for n, p in named if "LayerNorm" in n or n.endswith("bias")]
    decay = [p for n, p in named if not ("LayerNorm" in n or n.endswith("bias"))]
    params = decay + no_decay
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay_rate},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=config.learning_rate, eps=config.adam_epsilon,
                            fused=dev.type == "cuda")
    # electra_tf's schedule: linear warmup, then linear decay to 0 at num_train_steps.
    warmup, total_steps = config.num_warmup_steps, config.num_train_steps
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1.0 - s / total_steps))
    V, disc_weight = config.vocab_size, config.disc_weight

    def loss_fn(ids, am, tt, pos, labels, w):
        h = gen.electra(input_ids=ids, attention_mask=am, token_type_ids=tt).last_hidden_state
        hm = torch.gather(h, 1, pos[..., None].expand(-1, -1, h.shape[-1]))
        logits = gen.generator_lm_head(gen.generator_predictions(hm)).float()  # [B, N, V]
        ce = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), reduction="none")
        mlm = (ce * w.reshape(-1)).sum() / (w.sum() + 1e-6)
        with torch.no_grad():  # Gumbel-max sample of the replacements
            u = torch.rand_like(logits).clamp_(1e-9, 1.0)
            sampled = torch.argmax(logits - torch.log(-torch.log(u)), dim=-1)
            used = w > 0
            at_pos = torch.gather(ids, 1, pos)
            original = ids.scatter(1, pos, torch.where(used, labels, at_pos))
            corrupted = ids.scatter(1, pos, torch.where(used, sampled, at_pos))
            rtd_labels = (corrupted != original).float()
        d_logits = disc(input_ids=corrupted, attention_mask=am, token_type_ids=tt).logits.float()
        bce = F.binary_cross_entropy_with_logits(d_logits, rtd_labels, reduction="none")
        amf = am.float()
        rtd = (bce * amf).sum() / amf.sum()
        return mlm + disc_weight * rtd

    compute = torch.compile(loss_fn) if args.hf_mode == "compile" else loss_fn
    masking = MaskingConfig(mask_prob=config.mask_prob,
                            max_predictions_per_seq=config.resolved_max_predictions_per_seq,
                            mask_id=SPECIALS.index("[MASK]"), cls_id=SPECIALS.index("[CLS]"),
                            sep_id=SPECIALS.index("[SEP]"), vocab_size=V)
    folder = scratch_dir("bench_gpu_hf_")
    rows = synthetic_data(folder, config, config.train_batch_size * args.pool_batches)
    iterator = cycle(masked_batches(rows, config.train_batch_size, masking))
    keys = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
            "masked_lm_weights")
    bf16 = args.precision == "bf16"

    def step():
        batch = next(iterator)
        ids, am, tt, pos, labels, w = (
            torch.from_numpy(np.asarray(batch[k], np.float32 if k == "masked_lm_weights"
                                        else np.int64)).to(dev, non_blocking=True)
            for k in keys)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            loss = compute(ids, am, tt, pos, labels, w)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, config.clip_norm)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    def steps(n):
        total = sum(step() for _ in range(n))
        return float(total) / n  # float() synchronises

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    result = chunk_timings(lambda: steps(1), lambda: steps(args.chunk_steps), args, 1)
    result.update({
        "parameters": sum(p.numel() for p in params), "torch": torch.__version__,
        "transformers": transformers.__version__, "torch_device": str(dev),
        "gpu_name": torch.cuda.get_device_name(0) if dev.type == "cuda" else None,
        "attn_implementation": getattr(disc.config, "_attn_implementation", None),
        "peak_memory_bytes": (torch.cuda.max_memory_allocated() if dev.type == "cuda"
                              else None)})
    return result


# === Orchestration ===
# An electra_tf setting's variant: options joined by "+", each what it changes.
VARIANTS = {
    "ad0": "attention dropout 0",
    "fused": "fused attention",
    "prefetch": "device prefetch",
    "nodonate": "state not donated",
    "nocb": "no CUDA graphs",
}
# nocb: XLA launches each kernel itself instead of as CUDA graphs (command buffers),
# whose update before each call's first step the 2026-12-04 traces timed at ~20 ms
NOCB_XLA_FLAG = "--xla_gpu_enable_command_buffer="
HF_MODES = ("eager", "compile")
PRECISIONS = ("fp32", "bf16")


def variant_options(variant: str) -> list[str]:
    """The options of a variant ("" is none), checked: known, once each, and fused
    only with ad0 (fused attention runs only while training without attention dropout)."""
    options = [o for o in variant.split("+") if o] if variant else []
    unknown = [o for o in options if o not in VARIANTS]
    if unknown or len(set(options)) != len(options) or (variant and not options):
        raise ValueError(f"variant {variant!r}: options are {', '.join(VARIANTS)}, each once, "
                         "joined by +")
    if "fused" in options and "ad0" not in options[:options.index("fused")]:
        raise ValueError(f"variant {variant!r}: fused attention runs only while training "
                         "without attention dropout: put ad0 before it (ad0+fused)")
    return options


def setting_key(s: dict) -> str:
    if s["impl"] == "electra_tf":
        key = f"electra_tf/{s['size']}/{s['precision']}/K{s['steps_per_call']}"
        return key + (f"/{s['variant']}" if s.get("variant") else "")
    return f"hf/{s['size']}/{s['precision']}/{s['hf_mode']}"


def parse_key(key: str) -> dict:
    """A setting key -> its setting; ValueError names what is wrong with it."""
    parts = key.split("/")
    if parts[0] == "electra_tf" and len(parts) in (4, 5):
        _, size, precision, k, *variant = parts
        if not (k.startswith("K") and k[1:].isdigit() and int(k[1:]) >= 1):
            raise ValueError(f"{key}: steps per call is K<number>, got {k!r}")
        variant = variant[0] if variant else ""
        variant_options(variant)
        setting = {"impl": "electra_tf", "size": size, "precision": precision,
                   "steps_per_call": int(k[1:]), "variant": variant}
    elif parts[0] == "hf" and len(parts) == 4:
        _, size, precision, mode = parts
        if mode not in HF_MODES:
            raise ValueError(f"{key}: the HF mode is one of {', '.join(HF_MODES)}")
        setting = {"impl": "hf", "size": size, "precision": precision, "hf_mode": mode}
    else:
        raise ValueError(f"{key}: not electra_tf/SIZE/PRECISION/K<n>[/VARIANT] or "
                         "hf/SIZE/PRECISION/MODE")
    if size not in SIZES:
        raise ValueError(f"{key}: unknown size {size!r}; one of {', '.join(SIZES)}")
    if precision not in PRECISIONS:
        raise ValueError(f"{key}: precision is one of {', '.join(PRECISIONS)}")
    if setting_key(setting) != key:
        raise ValueError(f"{key}: write it {setting_key(setting)}")
    return setting


def toy_key(key: str) -> str:
    """The toy run's stand-in for a setting: the toy size, HF eager (torch.compile on a
    CPU takes minutes)."""
    s = {**parse_key(key), "size": "toy"}
    if s["impl"] == "hf":
        s["hf_mode"] = "eager"
    return setting_key(s)


def settings(args) -> list[dict]:
    """--only's keys in their order, else every combination of the run's lists."""
    if args.only:
        keys = list(dict.fromkeys(k for k in args.only.split(",") if k))
        return [parse_key(k) for k in keys]
    out = []
    for size in args.sizes:
        if "electra_tf" in args.frameworks:
            for precision in args.precisions:
                for k in args.steps_per_call:
                    for variant in [""] + args.variants:
                        out.append({"impl": "electra_tf", "size": size, "precision": precision,
                                    "steps_per_call": k, "variant": variant})
        if "hf" in args.frameworks:
            for mode in args.hf_modes:
                for precision in args.precisions:
                    out.append({"impl": "hf", "size": size, "precision": precision,
                                "hf_mode": mode})
    return out


# What --toy runs unless --only says otherwise: each precision and each steps-per-call
# once (a process per setting compiles for seconds on a CPU).
TOY_ONLY = "electra_tf/toy/fp32/K1,electra_tf/toy/bf16/K10,hf/toy/fp32/eager,hf/toy/bf16/eager"

# Each setting's wall time on one H100 (seconds, from the process's start to its
# result), ahead of any measurement there: guesses from the model sizes. An
# electra_tf setting: imports and CUDA start ~8; JaxPretraining's build ~30 cold
# (some 230 small programs compiled one by one: the variable initializers and the
# eager dummy forward pass; a lease's later settings of the same size read them
# from its compilation cache, gpu_lease.sh); the step's compile ~75 (Small and
# Base alike: both are 2 x 12 layers); 80 timed steps ~2 (Small) to ~6 (Base).
# Small, Base and transformers' Small and Base compiled are as measured on an H200
# (2026-11-30 and 2026-12-04, benchmarks/gpu_pretraining.md: Small 114-133 s with its
# trace and prefetch A/B, 95 s without; Base 121 s with its trace; transformers 111 and
# 102 s); Base s512 the first guesses x 1.5.
# torch.compile of G + D's forward and backward takes longer than XLA's compile.
# The budget guard scales them by what the run has measured so far
# (ESTIMATE_SCALE_RANGE), so a wrong guess costs at most the first settings' order.
ESTIMATE_S = {
    ("electra_tf", "small"): 115, ("electra_tf", "base"): 115, ("electra_tf", "base512"): 140,
    ("hf", "small", "compile"): 110, ("hf", "base", "compile"): 100,
    ("hf", "base512", "compile"): 105,
    ("hf", "small", "eager"): 30, ("hf", "base", "eager"): 40, ("hf", "base512", "eager"): 40,
    ("electra_tf", "toy"): 25, ("hf", "toy", "compile"): 120, ("hf", "toy", "eager"): 15,
}
FP32_EXTRA_S = {"small": 5, "base": 15, "base512": 15, "toy": 0}  # ~3x the bf16 steps
PROFILE_EXTRA_S = 10  # the traced call, writing and packing the trace
AB_PREFETCH_EXTRA_S = {"small": 3, "base": 10, "base512": 10, "toy": 5}
ESTIMATE_SCALE_RANGE = (0.5, 3.0)


def estimate_s(s: dict, args) -> float:
    """What setting `s` should take (ESTIMATE_S), with its trace and A/B chunks."""
    key = (s["impl"], s["size"]) + ((s["hf_mode"],) if s["impl"] == "hf" else ())
    total = ESTIMATE_S[key] + (FP32_EXTRA_S[s["size"]] if s["precision"] == "fp32" else 0)
    if setting_key(s) in args.profile:
        total += PROFILE_EXTRA_S
    if setting_key(s) in args.ab_prefetch:
        total += AB_PREFETCH_EXTRA_S[s["size"]]
    return float(total)


def ab_pairs(results: list[dict]) -> list[dict]:
    """Each measured variant row beside the row without its last option (same size,
    precision and steps per call), and each row's interleaved device-prefetch A/B."""
    rows = {setting_key(r): r for r in results if "sequences_per_second" in r}
    pairs = []
    for key, row in rows.items():
        if row["impl"] == "electra_tf" and row.get("variant"):
            options = row["variant"].split("+")
            base = setting_key({**row, "variant": "+".join(options[:-1])})
            if base in rows:
                a, b = rows[base], row
                pairs.append({"setting": key, "change": VARIANTS[options[-1]], "a": base,
                              "b": key, "a_seq_s": a["sequences_per_second"],
                              "b_seq_s": b["sequences_per_second"],
                              "ratio": b["sequences_per_second"] / a["sequences_per_second"],
                              "a_first_loss": a["first_loss"], "b_first_loss": b["first_loss"]})
        ab = row.get("ab_prefetch") or {}
        if "on_median_chunk_s" in ab:
            n = row["batch_size"] * row["chunk_steps"]
            pairs.append({"setting": key, "change": "device prefetch, interleaved in one process",
                          "a": key, "b": key + " +prefetch",
                          "a_seq_s": n / ab["off_median_chunk_s"],
                          "b_seq_s": n / ab["on_median_chunk_s"],
                          "ratio": ab["off_median_chunk_s"] / ab["on_median_chunk_s"]})
    return pairs


def run_worker(kind: str, args, timeout_s: float, **extra) -> dict:
    fd, result_file = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    cmd = [sys.executable, os.path.abspath(__file__), f"--worker={kind}",
           f"--result_file={result_file}", f"--warmup_chunks={args.warmup_chunks}",
           f"--timed_chunks={args.timed_chunks}", f"--chunk_steps={args.chunk_steps}",
           f"--pool_batches={args.pool_batches}", f"--input={args.input}"]
    cmd += ["--toy"] if args.toy else []
    cmd += [f"--{k}={v}" for k, v in extra.items()]
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([ROOT] + ([os.environ["PYTHONPATH"]]
                                                    if os.environ.get("PYTHONPATH") else [])))
    if "nocb" in variant_options(extra.get("variant", "")):
        env["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"), NOCB_XLA_FLAG]))
    return run_worker_process(cmd, env, result_file, timeout_s)


def derive(row: dict, peaks: dict) -> None:
    """Adds seq/s, FLOPs, TFLOP/s and MFU to a measured row."""
    if "error" in row or "skipped" in row:
        return
    config = pretraining_config(row["size"])
    flops = config_flops(row["size"])
    row["batch_size"] = config.train_batch_size
    row["seq_len"] = config.max_seq_length
    row["sequences_per_second"] = config.train_batch_size / row["step_s"]
    row["model_flops_per_sequence"] = flops["train"]
    row["model_tflops"] = flops["train"] * row["sequences_per_second"] / 1e12
    if peaks:
        row["mfu"] = row["model_tflops"] / peaks[row["precision"]]
        row["mfu_vs_bf16_peak"] = row["model_tflops"] / peaks["bf16"]


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def markdown(report: dict) -> str:
    peaks = report.get("peak_tflops") or {}
    dev = report.get("device") or {}
    lines = [
        "# Pre-training throughput on one accelerator (benchmarks/bench_gpu.py)", "",
        f"Command: `{report['command']}`", "",
        f"Device: {dev.get('device_kind', '?')} ({dev.get('platform', '?')}), "
        f"jax {dev.get('jax', '?')}, keras {dev.get('keras', '?')}; date {report['date']}; "
        f"host {report['host']['cpu_count']} CPUs, Python {report['host']['python']}.", "",
        f"Measured matmul peak (JAX, random square matrices): bf16 "
        f"{_fmt(peaks.get('bf16'), '.1f')} TFLOP/s, fp32 {_fmt(peaks.get('fp32'), '.1f')} "
        f"TFLOP/s (default matmul precision {dev.get('default_matmul_precision', '?')}).", "",
        "Model FLOPs per sequence = 3 x forward (G + D, MLM head on the "
        "max_predictions_per_seq positions); MFU against the peak of the row's precision.", "",
        "| setting | implementation | precision | seq/s | model TFLOP/s | MFU | MFU vs bf16 peak "
        "| peak memory GiB | compile s | first loss -> last | wall s (estimate) |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in report["results"]:
        label = SIZES[row["size"]][1]
        wall = (f"{_fmt(row.get('process_wall_s'), '.0f')} "
                f"({_fmt(row.get('estimate_s'), '.0f')})")
        if "error" in row or "skipped" in row:
            why = row.get("skipped") or row["error"].splitlines()[-1][:120]
            lines.append(f"| {label} | {implementation(row)} | {row['precision']} | "
                         f"{'skipped' if 'skipped' in row else 'failed'}: {why} "
                         f"| | | | | | | {wall} |")
            continue
        mem = row.get("peak_memory_bytes")
        lines.append(
            f"| {label} | {implementation(row)} | {row['precision']} | "
            f"{row['sequences_per_second']:,.1f} | "
            f"{row['model_tflops']:.3f} | {_fmt(row.get('mfu'), '.1%')} | "
            f"{_fmt(row.get('mfu_vs_bf16_peak'), '.1%')} | "
            f"{_fmt(None if mem is None else mem / 2**30, '.2f')} | {row['compile_s']:.1f} | "
            f"{row['first_loss']:.3f} -> {row['losses'][-1]:.3f} | {wall} |")
    if report.get("hf_skipped"):
        lines += ["", f"HF transformers skipped: {report['hf_skipped']}"]
    pairs = ab_pairs(report["results"])
    if pairs:
        lines += ["", "A/B: each change against the same setting without it (B / A > 1: the "
                  "change is faster). The variant rows run in their own processes; the "
                  "interleaved rows time one process's compiled program with the change off "
                  "and on in turns.", "",
                  "| setting | change | A | A seq/s | B seq/s | B / A | first loss A, B |",
                  "|---|---|---|---|---|---|---|"]
        for p in pairs:
            losses = (f"{p['a_first_loss']:.4f}, {p['b_first_loss']:.4f}"
                      if "a_first_loss" in p else "-")
            lines.append(f"| {p['setting']} | {p['change']} | {p['a']} | {p['a_seq_s']:,.1f} | "
                         f"{p['b_seq_s']:,.1f} | {p['ratio']:.3f} | {losses} |")
    if report.get("jax_compilation_cache_dir"):
        lines += ["", "JAX's persistent compilation cache was on (JAX_COMPILATION_CACHE_DIR) "
                  "for every process: a setting's build reads the small programs an earlier "
                  "setting of its size compiled; each step program above is its own, "
                  "compiled cold (its compile s includes writing it to the cache)."]
    if "budget" in report:
        b = report["budget"]
        lines += ["", f"Budget: --budget_s={b['budget_s']:g}; wall s (estimate): each "
                  "setting's process as measured, and the estimate the budget guard started "
                  f"(or skipped) it on; measured / estimated so far: {b['scale']:.2f}."]
    return "\n".join(lines) + "\n"


def implementation(row: dict) -> str:
    if row["impl"] == "hf":
        return f"HF transformers, {row['hf_mode']}"
    text = f"electra_tf JaxPretraining, steps/call {row['steps_per_call']}"
    for option in (row.get("variant") or "").split("+"):
        if option:
            text += f", {VARIANTS[option]}"
            if option == "fused" and row.get("fused_attention_kernel"):
                text += f" ({row['fused_attention_kernel']})"
    return text


def write_report(report: dict, output: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with open(output + ".json", "w") as f:
        json.dump(report, f, indent=2, sort_keys=True)
    with open(output + ".md", "w") as f:
        f.write(markdown(report))


def merge(paths: list[str], output: str) -> None:
    reports = []
    for p in paths:
        with open(p) as f:
            reports.append(json.load(f))
    merged = dict(reports[0])
    merged["command"] = " ; ".join(r["command"] for r in reports)
    merged["results"] = [row for r in reports for row in r["results"]]
    merged["merged_from"] = [{"command": r["command"], "date": r["date"],
                              "device": r.get("device"), "peak_tflops": r.get("peak_tflops")}
                             for r in reports]
    kinds = {(r.get("device") or {}).get("device_kind") for r in reports}
    if len(kinds) > 1:
        raise SystemExit(f"refusing to merge runs on different devices: {sorted(map(str, kinds))}")
    write_report(merged, output)
    print(markdown(merged))


def trace_name(output: str, key: str) -> str:
    """OUTPUT.<key>.trace.tar.gz, the key in the characters a lease brings back."""
    return f"{output}.{re.sub(r'[^A-Za-z0-9._-]', '_', key)}.trace.tar.gz"


_clock = time.monotonic  # the tests' fake clock replaces it


def main_orchestrate(args, argv):
    t_start = _clock()
    command = "python3 benchmarks/bench_gpu.py " + " ".join(
        shlex.quote(relative_flag(a)) for a in argv)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"command: {command}", flush=True)
    print(f"date: {date}", flush=True)
    report = {"command": command, "date": date, "toy": args.toy,
              "host": {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                       "machine": platform.machine()},
              "flops_per_sequence": {s: config_flops(s) for s in args.sizes},
              "configs": {s: SIZES[s][0] for s in args.sizes}, "results": [],
              "budget": {"budget_s": args.budget_s, "scale": 1.0},
              "jax_compilation_cache_dir": os.environ.get("JAX_COMPILATION_CACHE_DIR")}
    log("matmul peak")
    mm = run_worker("matmul", args, args.setting_timeout_s)
    if "error" in mm:
        raise SystemExit("the matmul worker failed (JAX does not run?): " + mm["error"])
    report.update(device=mm["device"], peak_tflops=mm["peak_tflops"], matmul=mm["matmul"])
    print(f"device: {mm['device']['device_kind']} ({mm['device']['platform']}), "
          f"jax {mm['device']['jax']}", flush=True)
    ok, why = hf_available()
    if not ok and "hf" in args.frameworks:
        report["hf_skipped"] = why
        print(f"HF transformers skipped: {why}", flush=True)
    write_report(report, args.output)
    measured = estimated = 0.0  # the settings that ran to a result: wall and estimate
    for s in settings(args):
        key = setting_key(s)
        left = args.budget_s - (_clock() - t_start)
        low, high = ESTIMATE_SCALE_RANGE
        scale = min(high, max(low, measured / estimated)) if estimated else 1.0
        estimate = estimate_s(s, args)
        if s["impl"] == "hf" and not ok:
            row = {**s, "skipped": why}
        elif estimate * scale > left:
            row = {**s, "skipped": f"needs about {estimate * scale:.0f} s (estimate "
                                   f"{estimate:.0f} s x {scale:.2f}, measured / estimated so "
                                   f"far), {max(0.0, left):.0f} s of --budget_s left"}
            log(f"{key}: skipped, {row['skipped']}")
        else:
            log(f"{key} (estimate {estimate * scale:.0f} s, {left:.0f} s left)")
            extra = {"size": s["size"], "precision": s["precision"]}
            if s["impl"] == "electra_tf":
                extra["steps_per_call"] = s["steps_per_call"]
                if s["variant"]:
                    extra["variant"] = s["variant"]
                if key in args.profile:
                    extra["profile_to"] = trace_name(args.output, key)
                if key in args.ab_prefetch:
                    extra["ab_prefetch_chunks"] = args.ab_prefetch_chunks
            else:
                extra["hf_mode"] = s["hf_mode"]
            row = {**s, **run_worker("electra_tf" if s["impl"] == "electra_tf" else "hf",
                                     args, min(args.setting_timeout_s, left), **extra)}
            derive(row, report["peak_tflops"])
            if "sequences_per_second" in row:
                measured += row["process_wall_s"]
                estimated += estimate
                log(f"  {key}: {row['sequences_per_second']:,.1f} seq/s, "
                    f"{row['model_tflops']:.3f} TFLOP/s, MFU {row.get('mfu', 0):.1%}, "
                    f"compile {row['compile_s']:.1f} s, {row['process_wall_s']:.0f} s "
                    f"(estimate {estimate:.0f} s)")
        row["estimate_s"] = estimate
        report["results"].append(row)
        if estimated:
            report["budget"]["scale"] = measured / estimated
        write_report(report, args.output)
    report["wall_s"] = _clock() - t_start
    write_report(report, args.output)
    print(markdown(report), flush=True)
    return report


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output", default=os.path.join(HERE, "gpu_pretraining_results"),
                    help="path prefix: writes OUTPUT.json and OUTPUT.md")
    ap.add_argument("--toy", action="store_true",
                    help="tiny configs and matrices (a CPU wiring check, < 60 s); with --only, "
                         "the keys' toy stand-ins (size toy, HF eager)")
    ap.add_argument("--sizes", default="small,base,base512",
                    help="comma-separated of small (b128 s128), base (b256 s128), base512 "
                         "(b64 s512)")
    ap.add_argument("--frameworks", default="electra_tf,hf")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--steps_per_call", default="1,10", help="jax_steps_per_call values")
    ap.add_argument("--variants", default="",
                    help="comma-separated electra_tf variants run beside each plain setting, "
                         f"each options joined by + of: {', '.join(VARIANTS)} (e.g. "
                         "ad0,ad0+fused,nodonate)")
    ap.add_argument("--hf_modes", default="eager,compile")
    ap.add_argument("--only", default="",
                    help="comma-separated setting keys to run, in this order, e.g. "
                         "electra_tf/small/bf16/K10,hf/small/bf16/compile,"
                         "electra_tf/small/bf16/K10/ad0+fused (default: every combination)")
    ap.add_argument("--input", default="synthetic", choices=("synthetic", "records"),
                    help="synthetic: a cycled pool of pre-masked batches; records: the run's "
                         "NumPy input pipeline over the written TFRecords (electra_tf only)")
    ap.add_argument("--warmup_chunks", type=int, default=1)
    ap.add_argument("--timed_chunks", type=int, default=3)
    ap.add_argument("--chunk_steps", type=int, default=20,
                    help="steps per timed train_steps call, rounded up to a multiple of each "
                         "setting's steps_per_call")
    ap.add_argument("--pool_batches", type=int, default=4)
    ap.add_argument("--setting_timeout_s", type=float, default=300)
    ap.add_argument("--budget_s", type=float, default=540,
                    help="a setting starts only if its estimate (scaled by the run's measured / "
                         "estimated so far) fits in what is left of this many seconds, else it "
                         "is recorded as skipped; one still running then is stopped")
    ap.add_argument("--profile", default="",
                    help="comma-separated electra_tf setting keys to trace one more compiled "
                         "call (steps_per_call steps) of with jax.profiler, into "
                         "OUTPUT.<key>.trace.tar.gz (at most 15 MiB)")
    ap.add_argument("--ab_prefetch", default="",
                    help="comma-separated electra_tf setting keys that also time "
                         "--jax_device_prefetch off and on in turns, on their own compiled "
                         "program (--ab_prefetch_chunks more chunks)")
    ap.add_argument("--ab_prefetch_chunks", type=int, default=None,
                    help="chunks of the --ab_prefetch A/B, half of them each way (default 4)")
    ap.add_argument("--merge", nargs="+", help="JSON results of earlier runs to join")
    # worker-only
    ap.add_argument("--worker", default="")
    ap.add_argument("--result_file", default="")
    ap.add_argument("--size", default="")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--hf_mode", default="eager")
    ap.add_argument("--variant", default="")
    ap.add_argument("--profile_to", default="")
    args = ap.parse_args(argv)
    args.steps_per_call = [int(x) for x in str(args.steps_per_call).split(",")]
    if args.worker:
        args.steps_per_call = args.steps_per_call[0]
        args.ab_prefetch_chunks = args.ab_prefetch_chunks or 0  # the orchestrator says
        return args
    if args.ab_prefetch_chunks is None:
        args.ab_prefetch_chunks = 4
    given = " ".join(argv)
    lists = {name: [k for k in getattr(args, name).split(",") if k]
             for name in ("only", "profile", "ab_prefetch")}
    if args.toy:
        if "--sizes" not in given:
            args.sizes = "toy"
        if "--chunk_steps" not in given:
            args.chunk_steps = 10
        if "--timed_chunks" not in given:
            args.timed_chunks = 2
        if not lists["only"]:
            lists["only"] = TOY_ONLY.split(",")  # torch.compile on 2 CPU cores takes minutes
        for name, keys in lists.items():  # a lease's keys at toy size
            try:
                lists[name] = list(dict.fromkeys(toy_key(k) for k in keys))
            except ValueError as e:
                ap.error(f"--{name}: {e}")
    args.only = ",".join(lists["only"])
    args.profile, args.ab_prefetch = lists["profile"], lists["ab_prefetch"]
    args.sizes = args.sizes.split(",")
    args.frameworks = args.frameworks.split(",")
    args.precisions = args.precisions.split(",")
    args.hf_modes = args.hf_modes.split(",")
    args.variants = [v for v in args.variants.split(",") if v]
    for s in args.sizes:
        if s not in SIZES:
            ap.error(f"unknown size {s!r}; one of {sorted(SIZES)}")
    for v in args.variants:
        try:
            variant_options(v)
        except ValueError as e:
            ap.error(f"--variants: {e}")
    # A misspelt key would silently run nothing in a paid-for lease: every key must parse,
    # name one of --sizes.
    try:
        runs = settings(args)
    except ValueError as e:
        ap.error(f"--only: {e}")
    for s in runs:
        if s["size"] not in args.sizes:
            ap.error(f"--only: {setting_key(s)}: size {s['size']} is not among --sizes="
                     f"{','.join(args.sizes)}")
    electra = [setting_key(s) for s in runs if s["impl"] == "electra_tf"]
    for name in ("profile", "ab_prefetch"):  # likewise: each must be a setting that runs
        unknown = [k for k in getattr(args, name) if k not in electra]
        if unknown:
            ap.error(f"--{name}: {', '.join(unknown)} not among this run's electra_tf "
                     f"settings: {', '.join(electra)}")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        if args.worker != "hf" and "tensorflow" not in sys.modules:
            # As on the GPU machine, which has no TensorFlow: the JAX workers never
            # import it (Keras' set_random_seed would, where it is installed).
            sys.modules["tensorflow"] = None
        fn = {"matmul": worker_matmul, "electra_tf": worker_electra_tf,
              "hf": worker_hf}[args.worker]
        result = fn(args)
        with open(args.result_file, "w") as f:
            json.dump(result, f)
        return
    if args.merge:
        merge(args.merge, args.output)
        return
    main_orchestrate(args, argv)


if __name__ == "__main__":
    main()
