"""Whether a training step fits in the machine's memory, said before it starts (CPU).

A step that does not fit is not refused by anything: on a CPU machine the kernel
kills the process minutes into its first step (exit 137, "Killed", no line of
its own), after the machine has slowed to a crawl. Pre-training Base at the
paper's batch (256 sequences of 512) needs more than ten times what a 24 GiB machine
has. So the commands estimate the step's peak memory from the model's sizes and
the sequences one replica holds at once, and warn, with the micro-batching that
would fit, when it exceeds the memory available (`step_warning`).

The estimate (`Estimate`) is the process's peak resident memory on CPU:
  fixed     the runtime, the input pipeline, the step's program (FIXED_BYTES);
  weights   PARAMETER_BYTES a parameter: the float32 weights, their gradients,
            Adam's (LAMB's) two moments and the update's temporaries;
  layers    per sequence of s tokens and per transformer layer,
            LINEAR_BYTES x s x (4 x hidden + intermediate)
            + QUADRATIC_BYTES x s^2 x heads: what the backward pass keeps of
            the forward (the attention's [heads, s, s] scores, probabilities
            and dropout masks among them);
  vocab     VOCAB_BYTES x the generator's predicted positions x vocab_size: its
            logits, their softmax and gradient.
The constants were fitted (least squares, VOCAB_BYTES held at 16 bytes a logit,
four float32 copies) to the peak resident memory of pre-training steps of Small and Base at
128 and 512 tokens (TensorFlow, float32, no XLA); benchmarks/memory_estimate.md
has the measurements and the estimate beside them. XLA, bf16 and the JAX
backend need less, so the estimate errs on the side of a warning. A GPU's own
memory is not checked (the framework says "out of memory" there itself).
"""

from __future__ import annotations

import dataclasses
import os

from electra_tf.core.config import EncoderConfig

GIB = 1 << 30
# Fitted constants (module docstring; benchmarks/memory_estimate.md).
FIXED_BYTES = 0.84 * GIB
PARAMETER_BYTES = 28.0
LINEAR_BYTES = 11.0
QUADRATIC_BYTES = 11.5
VOCAB_BYTES = 16.0
# Warn when the estimate exceeds this share of the memory available: a step's peak
# moves from run to run with the order its ops ran in (the fit's rows are within 10%
# of it, one of them 11% apart in two runs; a Small step of 48 sequences of 512,
# estimated at 18.8 GiB, was killed at 23 GiB).
MARGIN = 0.8


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A step's estimated peak memory, in bytes, by part."""

    fixed: float
    weights: float
    layers: float
    vocab: float

    @property
    def total(self) -> float:
        return self.fixed + self.weights + self.layers + self.vocab


def encoder_parameters(encoder: EncoderConfig, with_embeddings: bool = True) -> int:
    """An encoder's parameter count (the embeddings' tables with `with_embeddings`)."""
    h, e = encoder.hidden_size, encoder.resolved_embedding_size
    ff = encoder.intermediate_size
    layer = 4 * (h * h + h) + 2 * h + (h * ff + ff) + (ff * h + h) + 2 * h
    count = encoder.num_hidden_layers * layer
    count += 2 * e + (e * h + h if e != h else 0)  # the embeddings' LayerNorm, projection
    if with_embeddings:
        count += (encoder.vocab_size + encoder.max_position_embeddings
                  + encoder.type_vocab_size) * e
    return count


def layer_bytes(encoder: EncoderConfig, sequences: int, length: int) -> float:
    """What the backward pass keeps of an encoder's layers for `sequences` of
    `length` tokens (the module docstring's `layers`)."""
    per_layer = (LINEAR_BYTES * length * (4 * encoder.hidden_size + encoder.intermediate_size)
                 + QUADRATIC_BYTES * length * length * encoder.num_attention_heads)
    return float(sequences) * encoder.num_hidden_layers * per_layer


def pretraining_estimate(config, sequences: int, length: int = 0,
                         predicted: int = 0, copies: int = 1) -> Estimate:
    """The peak memory of a pre-training step of `config` (a PretrainingConfig) with
    `sequences` sequences of `length` tokens (0: max_seq_length) held at once in the
    process, the generator predicting `predicted` positions of each (0:
    max_predictions_per_seq; every position for all-tokens MLM and Electric), its
    replicas holding `copies` of the weights (mirrored CPU devices each hold one)."""
    gen, disc = config.generator_config(), config.discriminator_config()
    length = length or config.max_seq_length
    sharing = config.encoders.sharing
    if sharing in ("encoder", "uniform"):  # G is D's encoder (a tied generator; BERT's
        # one MLM model), or there is none (a uniform generator samples from no network)
        weights = encoder_parameters(disc)
    else:
        weights = encoder_parameters(disc) + encoder_parameters(
            gen, with_embeddings=sharing == "none")
    towers = 2 if config.encoders.two_tower else 1
    layers = 0.0 if sharing == "uniform" else towers * layer_bytes(gen, sequences, length)
    if config.objective != "bert_mlm":  # (BERT runs its one encoder once: it had counted 2)
        layers += layer_bytes(disc, sequences, length)
    if config.objective in ("all_tokens_mlm", "electric"):
        predicted = length
    predicted = predicted or config.resolved_max_predictions_per_seq
    vocab = VOCAB_BYTES * sequences * predicted * gen.vocab_size
    return Estimate(FIXED_BYTES, PARAMETER_BYTES * weights * copies, layers, vocab)


def pretraining_warnings(config, phases, local_replicas: int, replicas: int, masking_at,
                         available: int | None, step: int = 0,
                         phase2_inherits: bool = False) -> list[str]:
    """`step_warning` for each phase of a pre-training run (training/phases.py) still to
    train at `step` whose step does not fit in this process: of the `replicas` that
    split a batch, `local_replicas` are this process's; masking_at(phase) gives the
    phase's max_predictions_per_seq. `phase2_inherits`: phase 2 takes phase 1's
    --gradient_accumulation_steps (its own flag left at 0), so phase 1's advice names
    the --phase2_gradient_accumulation_steps that keeps phase 2 as it is, or as its
    own advice has it."""
    replicas, local = max(replicas, 1), max(local_replicas, 1)
    advice = {}  # phase index -> (line, the accumulation advised or None)
    for index, phase in enumerate(phases):
        if getattr(phase, "end", None) is not None and phase.end <= step:
            continue  # (trained: a run resumed in phase 2)
        length, batch = phase.max_seq_length, phase.train_batch_size
        accumulation = phase.gradient_accumulation_steps
        predicted = masking_at(phase).max_predictions_per_seq
        per_replica = max(1, batch // accumulation // replicas)
        flag = ("--phase2_gradient_accumulation_steps" if _second(phase)
                else "--gradient_accumulation_steps")
        what = (f"{per_replica * local} sequence(s) of {length} tokens at once, a "
                f"{config.model_size or 'custom'}-size discriminator")
        advice[index] = _step_advice(
            lambda n: pretraining_estimate(config, n * local, length, predicted, local),
            per_replica, available, what, flag, accumulation, scale=replicas)
    second = next((i for i, p in enumerate(phases) if _second(p)), None)
    out, said = [], set()
    for index, (line, advised) in sorted(advice.items()):
        if line is None or line in said:  # (two-stage training's phases read alike)
            continue
        said.add(line)
        if phase2_inherits and advised is not None and not _second(phases[index]) \
                and second is not None:
            kept = advice.get(second, (None, None))[1] or \
                phases[second].gradient_accumulation_steps
            line += (f" (with --phase2_gradient_accumulation_steps={kept}, which phase 2 "
                     "takes from it otherwise)")
        out.append(line)
    return out


def _second(phase) -> bool:
    return phase.name.endswith("_phase2")


def finetuning_estimate(encoder: EncoderConfig, sequences: int, length: int) -> Estimate:
    """The peak memory of a fine-tuning step of `sequences` of `length` tokens held at
    once by an encoder of `encoder`'s sizes (its head's weights and outputs are small
    beside it)."""
    return Estimate(FIXED_BYTES, PARAMETER_BYTES * encoder_parameters(encoder),
                    layer_bytes(encoder, sequences, length), 0.0)


def finetuning_warning(encoder: EncoderConfig, batch: int, share: float, length: int,
                       available: int | None) -> str | None:
    """`step_warning` for a fine-tuning step of `batch` sequences (`share` of them this
    process's) of `length` tokens."""
    sequences = max(1, int(batch * share))
    return _step_advice(lambda n: finetuning_estimate(encoder, n, length), sequences,
                        available, f"{sequences} sequence(s) of {length} tokens at once",
                        None, 1, 1, batch_flag="--train_batch_size", share=share)[0]


def _cgroup_v2(cgroup: str) -> int | None:
    """What the cgroup v2 limit leaves: memory.max less memory.current's pages that are
    not file cache (which the kernel reclaims first; tmpfs and shared memory it cannot)."""
    with open(os.path.join(cgroup, "memory.max"), encoding="utf-8") as f:
        limit = f.read().strip()
    if limit == "max":
        return None
    with open(os.path.join(cgroup, "memory.current"), encoding="utf-8") as f:
        used = int(f.read().strip())
    stat = os.path.join(cgroup, "memory.stat")  # (tmpfs and shared memory are not reclaimed)
    return max(int(limit) - used + _stat(stat, "file") - _stat(stat, "shmem"), 0)


def _cgroup_v1(folder: str) -> int | None:
    """What a cgroup v1 memory controller folder's limit leaves (none set: a huge
    number)."""
    with open(os.path.join(folder, "memory.limit_in_bytes"), encoding="utf-8") as f:
        limit = int(f.read().strip())
    if limit >= 1 << 60:
        return None
    with open(os.path.join(folder, "memory.usage_in_bytes"), encoding="utf-8") as f:
        used = int(f.read().strip())
    stat = os.path.join(folder, "memory.stat")
    cache = _stat(stat, "total_cache") or _stat(stat, "cache")
    shmem = _stat(stat, "total_shmem") or _stat(stat, "shmem")
    return max(limit - used + cache - shmem, 0)


def _stat(path: str, key: str) -> int:
    """A memory.stat field (0 where absent or unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _own_cgroup(proc_cgroup: str, v1: bool) -> str:
    """This process's cgroup path in /proc/self/cgroup's form: v2's line "0::/PATH",
    v1's "N:memory:/PATH" ("/" where none is read)."""
    try:
        with open(proc_cgroup, encoding="utf-8") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if (v1 and "memory" in controllers.split(",")) or (not v1 and not controllers):
                    return path or "/"
    except (OSError, ValueError):
        pass
    return "/"


def _levels(mount: str, path: str) -> list[str]:
    """MOUNT/PATH and each folder above it up to MOUNT, those that exist (a process in
    a cgroup namespace sees its own cgroup as the mount's root)."""
    parts = [part for part in path.split("/") if part not in ("", ".", "..")]
    folders = [os.path.join(mount, *parts[:i]) for i in range(len(parts), -1, -1)]
    return [folder for folder in folders if os.path.isdir(folder)]


def available_bytes(meminfo: str = "/proc/meminfo", cgroup: str = "/sys/fs/cgroup",
                    proc_cgroup: str = "/proc/self/cgroup") -> int | None:
    """The memory a new step can take: MemAvailable, or less where a cgroup limit
    (v2, or v1's memory controller) of the process's cgroup or one above it leaves
    less; None where none can be read (not Linux). The cgroup is read from
    `proc_cgroup` (a Slurm job's or a systemd unit's limit is on its own cgroup, not
    the mount's root, which is all a process sees in a container's namespace)."""
    found = []
    try:
        with open(meminfo, encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    for read, mount, v1 in ((_cgroup_v2, cgroup, False),
                            (_cgroup_v1, os.path.join(cgroup, "memory"), True)):
        for folder in _levels(mount, _own_cgroup(proc_cgroup, v1)):
            try:
                left = read(folder)
            except (OSError, ValueError):
                continue
            if left is not None:
                found.append(left)
    return min(found) if found else None


def _gib(n: float) -> str:
    """GiB to two decimals below 10 GiB, whole above."""
    return f"{n / GIB:.2f} GiB" if n < 10 * GIB else f"{n / GIB:.0f} GiB"


def step_warning(estimate_of, sequences: int, available: int | None, what: str,
                 accumulation_flag: str | None = None, accumulation: int = 1,
                 scale: int = 1) -> str | None:
    """The warning when a step that holds `sequences` at once on a replica
    (estimate_of(n) -> Estimate) needs more than MARGIN of the `available` bytes, else
    None: the estimate, and the fewest micro-batches that fit (`accumulation_flag`, the
    flag that splits the step keeping its batch, now `accumulation`; a micro-batch is
    `scale` replicas' sequences), or the sequences that fit where no flag splits it."""
    return _step_advice(estimate_of, sequences, available, what, accumulation_flag,
                        accumulation, scale)[0]


def _step_advice(estimate_of, sequences: int, available: int | None, what: str,
                 accumulation_flag: str | None, accumulation: int,
                 scale: int, batch_flag: str | None = None,
                 share: float = 1.0) -> tuple[str | None, int | None]:
    """`step_warning`'s line and the accumulation it advises (None: none); with no
    accumulation flag, `batch_flag` names the global batch that fits (this process
    holds `share` of it; fine-tuning, which has no accumulation)."""
    if available is None or available < 0 or sequences < 1:
        return None, None
    need, room = estimate_of(sequences).total, MARGIN * available
    if need <= room:
        return None, None
    line = (f"this step needs about {_gib(need)} of memory ({what}) and the machine has "
            f"{_gib(available)} available: " + (
                "it is likely to be killed in its first step" if need > available else
                f"more than the {MARGIN:.0%} of it a step can count on (the estimate can "
                "be 15% off either way), so it may be killed in its first step"))
    if estimate_of(1).total > room:
        one = "one sequence per replica" if scale > 1 else "one sequence"
        return (f"{line}; even {one} at a time needs about {_gib(estimate_of(1).total)}, "
                f"more than {MARGIN:.0%} of it"), None
    # The most sequences that fit, by bisection (an estimate grows with them): a count
    # at a time had taken minutes for a mistyped --train_batch_size of 20 digits
    fits, over = 1, sequences
    while over - fits > 1:
        middle = (fits + over) // 2
        fits, over = (middle, over) if estimate_of(middle).total <= room else (fits, middle)
    if accumulation_flag:
        k = _fewest_micro_batches(sequences, fits)
        return (f"{line}; {accumulation_flag}={k * accumulation} (micro-batches of "
                f"{sequences // k * scale}, about {_gib(estimate_of(sequences // k).total)}) "
                "trains the same batch"), k * accumulation
    if batch_flag:
        return (f"{line}; {batch_flag}={max(1, int(fits / share + 1e-9))} or less would fit (a "
                "smaller batch is another training: no flag splits a fine-tuning step)"), None
    return f"{line}; about {fits * scale} sequences at a time would fit", None


def _fewest_micro_batches(sequences: int, fits: int, tries: int = 100_000) -> int:
    """The fewest equal micro-batches (k >= 2 dividing `sequences`) of at most `fits`
    sequences each; `sequences` itself (micro-batches of one) where no divisor lies
    within `tries` of the least count that fits (a prime batch of 20 digits)."""
    least = max(2, -(-sequences // fits))
    return next((k for k in range(least, min(sequences, least + tries))
                 if sequences % k == 0), sequences)
