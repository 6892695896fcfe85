r"""Fine-tunes one pre-trained (or freshly initialized) discriminator on the probes.

    python -m studies.efficiency.probe_finetune --model_dir=RUN/model \
        --probes_dir=DATA/probes --output_dir=RUN/probes --seed=0 [--random_init=tiny]

The efficiency study (run.py) calls this once per (objective, seed), in its
own process, so that the backend is the one the process starts with:
electra_tf's regular fine-tuning loop on TensorFlow, its JAX counterpart
under KERAS_BACKEND=jax. Each probe is a GLUE layout (probes.py): RTE for
the pair probes, SST-2 with the probe's own label names for the package
probe; the metric is dev accuracy after the last epoch. The last line
printed is a JSON object
{probe: {"accuracy", "dev_size", "majority_baseline", "seconds"}}.

--random_init=SIZE writes, before probing, a discriminator of that size as
initialized (seeded), with the vocab of --vocab_file: the baseline without
pre-training.
"""

from __future__ import annotations

import json
import os
import sys
import time


def write_random_init(model_dir: str, model_size: str, vocab_file: str, seed: int,
                      overrides: dict) -> None:
    """A discriminator as initialized, saved as pre-training saves one."""
    import keras

    from electra_tf import folders
    from electra_tf.core.config import MODEL_SIZES, EncoderConfig
    from electra_tf.modeling import build_discriminator

    with open(vocab_file, encoding="utf-8") as f:
        vocab_size = sum(1 for line in f if line.rstrip("\n"))
    keras.utils.set_random_seed(seed)
    config = EncoderConfig(vocab_size=vocab_size, **MODEL_SIZES[model_size], **overrides)
    os.makedirs(model_dir, exist_ok=True)
    folders.pretraining.save_discriminator(model_dir, build_discriminator(config))
    folders.pretraining.record_vocab(model_dir, vocab_file)


def probe_task(meta: dict):
    """The GLUE task a probe's layout maps to (package: SST-2 with the probe's labels)."""
    from electra_tf.tasks.glue import get_task

    if meta["layout"] == "rte":
        return get_task("rte")
    return get_task("sst2", label_names=tuple(meta["labels"]))


def finetune_probe(model_dir: str, probe_dir: str, output_dir: str, vocab_file: str, *,
                   seed: int, epochs: int, max_seq_length: int, learning_rate: float,
                   batch_size: int = 32) -> dict:
    """Fine-tunes on one probe folder; returns {"accuracy", "dev_size", ...}."""
    import keras

    from electra_tf.core.config import FinetuningConfig, FinetuningRun

    with open(os.path.join(probe_dir, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    task = probe_task(meta)
    config = FinetuningConfig(task_name=task.name, max_seq_length=max_seq_length,
                              num_train_epochs=epochs, learning_rate=learning_rate,
                              train_batch_size=batch_size, seed=seed)
    run = FinetuningRun(model_dir=output_dir, data_dir=probe_dir, init_checkpoint=model_dir,
                        vocab_file=vocab_file)
    if keras.backend.backend() == "jax":
        from electra_tf.training.backends.jax import JaxFinetuning as Trainer
    else:
        from electra_tf.training.backends.tensorflow import TensorFlowFinetuning as Trainer
    t0 = time.monotonic()
    results = Trainer(task, config, run).train()
    last = results[sorted(results, key=lambda k: int(k.split("_")[-1]))[-1]]
    return {"accuracy": float(last["dev"]["accuracy"]), "dev_size": meta["dev_size"],
            "train_size": meta["train_size"], "majority_baseline": meta["majority_baseline"],
            "seconds": time.monotonic() - t0}


def main(argv):
    del argv
    from absl import flags

    f = flags.FLAGS
    if f.random_init:
        write_random_init(f.model_dir, f.random_init, f.vocab_file, f.seed,
                          json.loads(f.model_hparam_overrides))
    out = {}
    for name in f.probes.split(","):
        out[name] = finetune_probe(
            f.model_dir, os.path.join(f.probes_dir, name), os.path.join(f.output_dir, name),
            f.vocab_file, seed=f.seed, epochs=f.epochs, max_seq_length=f.max_seq_length,
            learning_rate=f.learning_rate, batch_size=f.batch_size)
        print(f"[probe] {name}: accuracy {out[name]['accuracy']:.3f} on {out[name]['dev_size']} "
              f"dev examples ({out[name]['seconds']:.0f} s)", file=sys.stderr, flush=True)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    from absl import app, flags

    from electra_tf import cli

    flags.DEFINE_string("model_dir", None, "Pre-training folder (or where --random_init "
                        "writes one).", required=True)
    flags.DEFINE_string("probes_dir", None, "Folder of probe folders (with meta.json).",
                        required=True)
    flags.DEFINE_string("output_dir", None, "Fine-tuning folders go here.", required=True)
    flags.DEFINE_string("vocab_file", None, "The pre-training vocab.", required=True)
    flags.DEFINE_string("probes", "coherence,order,package", "Probes to run.")
    flags.DEFINE_string("random_init", "", "A MODEL_SIZES name: probe a fresh model.")
    flags.DEFINE_string("model_hparam_overrides", "{}", "EncoderConfig overrides (JSON) for "
                        "--random_init.")
    flags.DEFINE_integer("seed", 0, "Fine-tuning (and --random_init) seed.")
    flags.DEFINE_integer("epochs", 3, "Fine-tuning epochs.")
    flags.DEFINE_integer("max_seq_length", 128, "Probe sequence length.")
    flags.DEFINE_float("learning_rate", 1e-4, "Peak fine-tuning learning rate.")
    flags.DEFINE_integer("batch_size", 32, "Fine-tuning batch.")
    app.run(lambda argv: cli.run_cli(lambda: main(argv)))
