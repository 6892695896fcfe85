r"""The paper's efficiency analysis (Table 5): pre-train each objective with the
same budget, then fine-tune each on downstream probes, over several seeds.

Run from the repository root (`studies` is not installed with electra_tf):

    # the demo-scale study on CPU (tiny model, standard-library docstrings)
    python -m studies.efficiency.run --study=cpu --seeds=0,1,2 \
        --output_dir=studies/efficiency/results

    # the Small-scale study on a GPU: the data (built where TensorFlow is
    # installed), then the runs, each a process on the JAX backend
    # (see studies/efficiency/README.md)
    python -m studies.efficiency.run --study=gpu --stage=prepare
    python -m studies.efficiency.run --study=gpu --stage=pretrain,probe,report \
        --seeds=0,1,2 [--variants]

--study chooses the defaults (flags given explicitly win):
* cpu: the demo corpus (standard-library docstrings, 4k vocab), probes from
  the other installed packages' text (install_corpus.py), tiny model without
  dropout, L=64, batch 64, 600 steps, lr 1e-3 with Keras' bias-corrected Adam
  (as configs/demo.flags); every objective
  (electra, all_tokens_mlm, replace_mlm, electra_15, bert_mlm) and
  random_init; pre-training and probes on the TensorFlow backend.
* gpu: the install corpus (install_corpus.py: docstrings and docs of every
  installed package, --site_dirs=all), 30522 vocab, ELECTRA-Small
  (Table 6: L=128, batch 128, lr 5e-4, generator 1/4 of D, dropout 0.1) and
  BERT-MLM of D's size, bf16, equal steps and tokens (the paper's Table 5
  protocol); electra, bert_mlm and random_init, plus electra_15, replace_mlm
  and all_tokens_mlm with --variants; pre-training and probes on the JAX
  backend (`KERAS_BACKEND=jax python -m electra_tf.run_pretraining` and the
  JAX fine-tuning loop, each in its own process).
* --toy: the study's wiring at a toy scale (tiny model, 4 steps, probes of
  64 train and 32 dev examples, 1 epoch), so a CPU test runs it end to end;
  its data from a few hundred files: gpu, the install corpus of the first 400
  files (standard library first); cpu, the demo corpus of the first 100
  standard-library documents and the package probes' text from the first 400
  installed-package files.

Every objective gets the same model sizes, steps and batch, so the same
sequences; BERT-MLM is built at D's size whatever --generator_hidden_size
says. `random_init` is the baseline without pre-training: the probes
fine-tune a freshly initialized model of the same size.

Stages (--stage, comma-separated; default all): prepare (corpus, vocab,
records, probes, and for the gpu study <data_dir>.tar.gz, so that the data
can be built on one machine and used on another), pretrain and probe (per
objective and seed; a run already in output_dir/runs/ is skipped, so a study
can be split over several calls, and one recorded as failed is tried again), report (results.csv, results.md, and
results.png when matplotlib is installed, in --output_dir). A run whose
pre-training or probes fail (e.g. an objective the JAX loop refuses) is
recorded with its error and listed in results.md; the exit status is then 1.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tarfile
import time
from datetime import datetime, timezone

from absl import app, flags

from studies.efficiency import probes as probes_lib
from studies.efficiency import report

FLAGS = flags.FLAGS
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ALL_OBJECTIVES = ("electra", "all_tokens_mlm", "replace_mlm", "electra_15", "bert_mlm")
VARIANTS = ("electra_15", "replace_mlm", "all_tokens_mlm")
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
STUDIES = {
    "cpu": dict(objectives=",".join(ALL_OBJECTIVES + ("random_init",)), budget_steps=600,
                train_batch_size=64, max_seq_length=64, model_size="tiny",
                model_hparam_overrides=NO_DROPOUT, generator_hidden_size=0.5,
                learning_rate=1e-3, adam_bias_correction=True, mixed_precision="fp32",
                vocab_size=4000, backend="tensorflow", probe_label="package",
                probe_source="packages", probe_epochs=8, probe_learning_rate=1e-3,
                probe_max_train=800, probe_max_dev=800, probe_classes=6,
                data_dir="demo_output/efficiency_cpu", output_dir="studies/efficiency/results"),
    "gpu": dict(objectives="electra,bert_mlm,random_init", budget_steps=2000,
                train_batch_size=128, max_seq_length=128, model_size="small",
                model_hparam_overrides={}, generator_hidden_size=0.25, learning_rate=5e-4,
                adam_bias_correction=False, mixed_precision="bf16", vocab_size=30522,
                backend="jax", probe_label="package", probe_source="heldout", probe_epochs=3,
                probe_learning_rate=3e-4, probe_max_train=8000, probe_max_dev=2000,
                probe_classes=10, data_dir="demo_output/efficiency_gpu",
                output_dir="studies/efficiency/results/gpu"),
}
TOY = dict(budget_steps=4, train_batch_size=8, max_seq_length=64, model_size="tiny",
           model_hparam_overrides=NO_DROPOUT, generator_hidden_size=0.5, learning_rate=1e-3,
           mixed_precision="fp32", vocab_size=1000, probe_epochs=1,
           probe_max_train=64, probe_max_dev=32, probe_classes=3, toy_files=400)
# --toy, per study, beyond TOY: gpu labels the package probe by module (the first 400
# files are mostly the standard library's, one "package"); cpu keeps its own data
# (demo corpus, packages' probe text), cut to toy_documents and toy_files
TOY_STUDY = {"gpu": dict(probe_label="module"),
             "cpu": dict(toy_documents=100)}


def define_flags():
    flags.DEFINE_enum("study", "cpu", list(STUDIES), "cpu: demo scale; gpu: Small scale.")
    flags.DEFINE_bool("toy", False, "The study's wiring at a toy scale (tests).")
    flags.DEFINE_string("stage", "prepare,pretrain,probe,report",
                        "Comma-separated stages: prepare, pretrain, probe, report.")
    flags.DEFINE_string("seeds", "0,1,2", "Comma-separated seeds (pre-training and fine-tuning).")
    flags.DEFINE_string("objectives", "", "Comma-separated objectives (default: the study's).")
    flags.DEFINE_bool("variants", False, "gpu: add electra_15, replace_mlm, all_tokens_mlm.")
    flags.DEFINE_integer("budget_steps", 0, "Pre-training steps per objective (0: the study's).")
    flags.DEFINE_integer("train_batch_size", 0, "Pre-training batch (0: the study's).")
    flags.DEFINE_string("data_dir", "", "Corpus, vocab, records and probes (built if missing).")
    flags.DEFINE_string("output_dir", "", "Where runs/ and the results go.")
    flags.DEFINE_string("site_dirs", "all", "gpu prepare: package folders beyond the running "
                        "interpreter's (install_corpus.source_roots).")
    flags.DEFINE_string("corpus_extra_dirs", "", "gpu prepare: more folders of text for the "
                        "corpus (install_corpus --extra_dirs), e.g. /usr/share/man/man1.")
    flags.DEFINE_integer("probe_epochs", 0, "Fine-tuning epochs per probe (0: the study's).")
    flags.DEFINE_string("probes", ",".join(probes_lib.PROBES), "Probes to run.")


def settings() -> dict:
    """The study's defaults, then --toy, then flags given explicitly."""
    s = dict(STUDIES[FLAGS.study])
    if FLAGS.toy:
        # (a toy run had written into the study's results folder, its records then
        # skipped as the study's own runs)
        toy = os.path.join("toy", FLAGS.study)
        s.update(TOY, **TOY_STUDY[FLAGS.study], output_dir=toy,
                 data_dir=os.path.join(FLAGS.output_dir or toy, "data"))
    for name in ("objectives", "budget_steps", "train_batch_size", "data_dir", "output_dir",
                 "probe_epochs"):
        if getattr(FLAGS, name):
            s[name] = getattr(FLAGS, name)
    s["objectives"] = s["objectives"].split(",")
    if FLAGS.variants:
        s["objectives"] += [v for v in VARIANTS if v not in s["objectives"]]
    s["study"] = FLAGS.study + ("-toy" if FLAGS.toy else "")  # what its records say
    s["seeds"] = [int(x) for x in FLAGS.seeds.split(",")]
    s["probes"] = FLAGS.probes.split(",")
    return s


def log(message: str) -> None:
    print(f"[efficiency] {message}", file=sys.stderr, flush=True)


# === Stage: prepare ===

def prepare(s: dict) -> dict:
    """Builds (once) corpus, vocab, records and probes under data_dir; returns paths."""
    data_dir = s["data_dir"]
    archive = data_dir.rstrip("/") + ".tar.gz"
    if not os.path.isdir(data_dir) and os.path.exists(archive):  # built on another machine
        log(f"unpacking {archive}")
        with tarfile.open(archive) as tar:
            tar.extractall(os.path.dirname(os.path.abspath(data_dir)), filter="data")
    paths = data_paths(s)
    if not os.path.exists(os.path.join(paths["probes_dir"], "meta.json")):
        if FLAGS.study == "cpu":
            from electra_tf.data.demo_corpus import prepare_demo_data, write_corpus

            corpus = os.path.join(data_dir, "corpus.txt")
            if s.get("toy_documents") and not os.path.exists(corpus):
                # the first documents of the standard-library corpus, which
                # prepare_demo_data then takes as its own (vocab, records)
                os.makedirs(data_dir, exist_ok=True)
                write_corpus(corpus, max_documents=s["toy_documents"])
            prepare_demo_data(data_dir, s["vocab_size"], s["max_seq_length"])
        else:
            build_install_data(s, paths)
        probe_corpus, shards = paths["corpus"], 10  # the held-out shard of pre-training
        if s["probe_source"] == "packages":  # installed packages' text, none pre-trained on
            from studies.efficiency.install_corpus import write_install_corpus

            probe_corpus, shards = os.path.join(data_dir, "probe_corpus.txt"), 1
            if not os.path.exists(probe_corpus):
                write_install_corpus(probe_corpus, include_stdlib=False,
                                     max_files=s.get("toy_files", 0))
        metas = probes_lib.build_probes(
            probe_corpus, paths["probes_dir"], seed=0, label_field=s["probe_label"],
            num_classes=s["probe_classes"], max_train=s["probe_max_train"],
            max_dev=s["probe_max_dev"], num_shards=shards)
        with open(os.path.join(paths["probes_dir"], "meta.json"), "w") as f:
            json.dump(metas, f, indent=1)
        if FLAGS.study == "gpu" and not FLAGS.toy:
            log(f"packing {archive} (copy it to the machine that runs the study)")
            with tarfile.open(archive, "w:gz") as tar:
                tar.add(data_dir, arcname=os.path.basename(data_dir.rstrip("/")))
    return paths


def data_paths(s: dict) -> dict:
    d = s["data_dir"]
    records = os.path.join(d, f"records_{s['max_seq_length']}")
    shards = [os.path.join(records, f"pretrain_data.tfrecord-{i:05d}-of-00010") for i in range(10)]
    return {"corpus": os.path.join(d, "corpus.txt"), "vocab_file": os.path.join(d, "vocab.txt"),
            "records": records, "train_data": ",".join(shards[:-1]), "eval_data": shards[-1],
            "probes_dir": os.path.join(d, "probes")}


def build_install_data(s: dict, paths: dict) -> None:
    """gpu study (and its toy): the install corpus, its vocab and records (10 shards, 9 held out)."""
    from electra_tf.data.builder import BuildOptions, build_pretraining_data
    from electra_tf.text.vocab_builder import build_vocab
    from studies.efficiency.install_corpus import count_tokens, write_install_corpus

    os.makedirs(s["data_dir"], exist_ok=True)
    if not os.path.exists(paths["corpus"]):
        extra = tuple(d for d in FLAGS.corpus_extra_dirs.split(",") if d)
        stats = write_install_corpus(paths["corpus"], extra_dirs=extra,
                                     site_dirs="" if FLAGS.toy else FLAGS.site_dirs,
                                     max_files=s.get("toy_files", 0))
        log(f"corpus: {stats}")
    if not os.path.exists(paths["vocab_file"]):
        build_vocab(paths["corpus"], s["vocab_size"], paths["vocab_file"],
                    min_count=2 if FLAGS.toy else 10)
    tokens = count_tokens(paths["corpus"], paths["vocab_file"])
    with open(paths["corpus"] + ".tokens.json", "w") as f:
        json.dump(tokens, f, indent=1)
    log(f"corpus: {tokens['tokens']:,} WordPiece tokens")
    from electra_tf.data.features import shard_name

    assert os.path.basename(paths["eval_data"]) == shard_name(9, 10), "shard names changed"
    build_pretraining_data(BuildOptions(
        files=(paths["corpus"],), vocab_file=paths["vocab_file"], output_dir=paths["records"],
        max_seq_length=s["max_seq_length"], num_shards=10, overwrite=True))


# === Stages: pretrain and probe, one run per (objective, seed) ===

_NUMBER = r"[\d.eE+-]+|nan"
# "step 3/4 | loss 37.66 (mlm 6.810 disc 0.6171) | ...": the parenthesis holds only
# the losses the objective has (BERT-MLM: mlm alone).
_STEP = re.compile(rf"step (\d+)/\d+ \| loss ({_NUMBER})(?: \(([^)]*)\))?")
_EVAL = re.compile(r"eval at step (\d+): (.*)$")


def parse_pretraining_log(text: str) -> tuple[list[dict], dict]:
    """Console lines of run_pretraining -> (curve, final eval).

    The curve is [{"step", "loss", "mlm_loss", "disc_loss"}], one per logged step,
    nan for a loss the objective does not have; the final eval is the last
    "eval at step" line's {metric: value}.
    """
    curve, final = [], {}
    for line in text.splitlines():
        m = _STEP.search(line)
        if m:
            parts = (m.group(3) or "").split()
            losses = dict(zip(parts[::2], parts[1::2]))
            curve.append({"step": int(m.group(1)), "loss": float(m.group(2)),
                          "mlm_loss": float(losses.get("mlm", "nan")),
                          "disc_loss": float(losses.get("disc", "nan"))})
        m = _EVAL.search(line)
        if m:
            final = {k: float(v) for k, v in (kv.rsplit(" ", 1) for kv in m.group(2).split(", "))}
    return curve, final


def parse_pretraining_passes(text: str) -> tuple[list[dict], dict, float]:
    """A pretrain.log of one or more passes (a run resumed from its checkpoint) ->
    (curve, final eval, seconds): the curve holds the last point of each step (a
    resumed pass logs again the steps after its checkpoint), the seconds are the
    passes' sum."""
    curve, final = parse_pretraining_log(text)
    curve = sorted({point["step"]: point for point in curve}.values(),
                   key=lambda point: point["step"])
    seconds = sum(float(x) for x in re.findall(rf"^{re.escape(_PASS)} ([\d.]+) s$", text,
                                               re.M))
    return curve, final, seconds


def _env(backend: str) -> dict:
    # The repository root on the path: the probes' subprocess imports `studies`,
    # which is not installed, whatever the working directory.
    path = os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, KERAS_BACKEND=backend, PYTHONUNBUFFERED="1", PYTHONPATH=path)


def _tensorflow_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None


# Ends each pass of pre-training in its log (a resumed run appends a pass).
_PASS = "[efficiency] pass of"


def _run(cmd: list[str], backend: str, log_path: str, append: bool = False
         ) -> tuple[int, str]:
    """Runs a command, its output teed to log_path; returns (exit code, output).
    `append`: the log keeps the passes before (a resumed pre-training), and each pass
    ends in a line of its seconds, an interrupted one too."""
    lines = []
    t0 = time.monotonic()
    with open(log_path, "a" if append else "w", encoding="utf-8") as logf:
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    env=_env(backend), text=True)
            for line in proc.stdout:
                logf.write(line)
                lines.append(line)
                if "step " in line and "|" in line or line.startswith("[probe]"):
                    print("    " + line.rstrip(), file=sys.stderr, flush=True)
            proc.wait()
        finally:
            if append:  # (on a line of its own: a child's last line may lack its newline)
                cut = bool(lines) and not lines[-1].endswith("\n")
                logf.write(f"{chr(10) if cut else ''}{_PASS} {time.monotonic() - t0:.3f} s\n")
    return proc.returncode, "".join(lines)


def pretrain(objective: str, seed: int, s: dict, paths: dict, run_dir: str) -> dict:
    """run_pretraining in its own process; returns its curve, final eval and seconds."""
    steps = s["budget_steps"]
    cmd = [sys.executable, "-m", "electra_tf.run_pretraining",
           f"--model_dir={run_dir}/model", f"--train_data={paths['train_data']}",
           f"--eval_data={paths['eval_data']}", f"--vocab_file={paths['vocab_file']}",
           f"--vocab_size={_vocab_size(paths['vocab_file'])}",
           f"--model_size={s['model_size']}",
           f"--model_hparam_overrides={json.dumps(s['model_hparam_overrides'])}",
           f"--objective={objective}", f"--max_seq_length={s['max_seq_length']}",
           f"--generator_hidden_size={s['generator_hidden_size']}",
           f"--learning_rate={s['learning_rate']}", f"--num_warmup_steps={max(1, steps // 10)}",
           f"--train_batch_size={s['train_batch_size']}",
           f"--eval_batch_size={s['train_batch_size']}", f"--num_train_steps={steps}",
           f"--iterations_per_loop={max(1, steps // 20)}", f"--save_checkpoints_steps={steps}",
           f"--num_eval_steps={2 if FLAGS.toy else 20}", f"--seed={seed}",
           f"--mixed_precision={s['mixed_precision']}",
           f"--adam_bias_correction={str(s['adam_bias_correction']).lower()}"]
    if s["backend"] == "jax" and not _tensorflow_installed():
        cmd.append("--jax_input_pipeline=numpy")  # a machine with JAX alone
    # A run stopped midway resumes from its checkpoint: its log keeps the passes before
    # (it had been rewritten, the curve and seconds then the last pass's alone)
    log_path = f"{run_dir}/pretrain.log"
    if not os.path.isdir(f"{run_dir}/model") and os.path.exists(log_path):
        os.remove(log_path)  # a fresh start: no pass before it
    code, output = _run(cmd, s["backend"], log_path, append=True)
    with open(log_path, encoding="utf-8") as f:
        curve, final, seconds = parse_pretraining_passes(f.read())
    result = {"pretrain_seconds": seconds, "curve": curve, "final_eval": final,
              "pretrain_steps": steps,
              "tokens_seen": steps * s["train_batch_size"] * s["max_seq_length"]}
    if code != 0:
        result["error"] = f"run_pretraining exit {code}: " + _last_error(output)
    return result


def _vocab_size(vocab_file: str) -> int:
    with open(vocab_file, encoding="utf-8") as f:
        return sum(1 for line in f if line.rstrip("\n"))


def _last_error(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "Error" in ln or "error:" in ln]
    return (errors or lines or ["no output"])[-1][:400]


def probe(objective: str, seed: int, s: dict, paths: dict, run_dir: str) -> dict:
    """probe_finetune in its own process; returns {probe: result} or {"error": ...}."""
    cmd = [sys.executable, "-m", "studies.efficiency.probe_finetune",
           f"--model_dir={run_dir}/model", f"--probes_dir={paths['probes_dir']}",
           f"--output_dir={run_dir}/probes", f"--vocab_file={paths['vocab_file']}",
           f"--probes={','.join(s['probes'])}", f"--seed={seed}",
           f"--epochs={s['probe_epochs']}", f"--max_seq_length={s['max_seq_length']}",
           f"--learning_rate={s['probe_learning_rate']}"]
    if objective == "random_init":
        cmd += [f"--random_init={s['model_size']}",
                f"--model_hparam_overrides={json.dumps(s['model_hparam_overrides'])}"]
    code, output = _run(cmd, s["backend"], f"{run_dir}/probe.log")
    if code != 0:
        return {"error": f"probe_finetune exit {code}: " + _last_error(output)}
    return {"probes": json.loads(output.strip().splitlines()[-1])}


def _save_record(path: str, record: dict) -> None:
    """Writes a run's record whole (a temporary file renamed into place)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(record, f, indent=1)
    os.replace(path + ".tmp", path)


def run_one(objective: str, seed: int, s: dict, paths: dict, stages: set) -> dict:
    """Pre-training then probes of one (objective, seed); the record is saved at once."""
    out_dir = s["output_dir"]
    record_path = os.path.join(out_dir, "runs", f"{objective}_s{seed}.json")
    record = {"study": s["study"], "objective": objective,
              "seed": seed, "status": "pending"}
    if os.path.exists(record_path):
        with open(record_path) as f:
            recorded = json.load(f)
        if recorded.get("study") != record["study"]:  # (toy and real runs had mixed)
            raise SystemExit(f"error: {record_path} is a run of the {recorded.get('study')} "
                             f"study, not of {record['study']}: give another --output_dir")
        record = recorded
        if record["status"] == "ok" or record["status"].startswith("pretrained") and \
                "probe" not in stages:
            log(f"{objective} seed {seed}: recorded ({record['status']}), skipped")
            return record
        if record["status"].startswith("failed"):  # (had stayed failed for good)
            log(f"{objective} seed {seed}: {record['status']} before ({record.pop('error', '')}"
                "); trying again")
            record["status"] = ("pretrained" if record["status"] == "failed in probes"
                                else "pending")
    run_dir = os.path.join(out_dir, "work", f"{objective}_s{seed}")
    os.makedirs(run_dir, exist_ok=True)
    if "pretrain" in stages and record["status"] == "pending":
        if objective == "random_init":
            record.update(pretrain_seconds=0.0, pretrain_steps=0, tokens_seen=0, curve=[])
        else:
            log(f"{objective} seed {seed}: pre-training {s['budget_steps']} steps "
                f"({s['backend']} backend)")
            record.update(pretrain(objective, seed, s, paths, run_dir))
        record["status"] = "failed in pre-training" if "error" in record else "pretrained"
        _save_record(record_path, record)  # (a stop in the probes had lost the curve)
    if "probe" in stages and record["status"] == "pretrained":
        log(f"{objective} seed {seed}: probes {','.join(s['probes'])}")
        record.update(probe(objective, seed, s, paths, run_dir))
        record["status"] = "failed in probes" if "error" in record else "ok"
    _save_record(record_path, record)
    log(f"{objective} seed {seed}: {record['status']}" + (
        "; " + ", ".join(f"{p} {r['accuracy']:.3f}" for p, r in record["probes"].items())
        if record["status"] == "ok" else f" {record.get('error', '')}"))
    return record


# === Stage: report ===

def machine() -> str:
    parts = [platform.platform(), f"{os.cpu_count()} CPU cores"]
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        parts.append(gpu or "no GPU")
    except (OSError, subprocess.SubprocessError):
        parts.append("no GPU")
    return ", ".join(parts)


def write_outputs(s: dict, paths: dict) -> list[dict]:
    with open(os.path.join(paths["probes_dir"], "meta.json")) as f:
        metas = json.load(f)
    metas = {k: v for k, v in metas.items() if k in s["probes"]}
    argv = " ".join(a for a in sys.argv[1:])
    header = [f"# Efficiency study ({FLAGS.study}{', toy' if FLAGS.toy else ''})", "",
              f"- Command: `python -m studies.efficiency.run {argv}`",
              f"- Machine: {machine()}; Python {platform.python_version()}",
              f"- Date (UTC): {datetime.now(timezone.utc):%Y-%m-%d %H:%M}",
              f"- Pre-training: {s['model_size']} model, L={s['max_seq_length']}, batch "
              f"{s['train_batch_size']}, {s['budget_steps']} steps "
              f"({s['budget_steps'] * s['train_batch_size'] * s['max_seq_length']:,} tokens) "
              f"per objective, lr {s['learning_rate']}, generator {s['generator_hidden_size']} "
              f"of D (BERT-MLM: D's size), {s['mixed_precision']}, {s['backend']} backend",
              f"- Seeds: {','.join(map(str, s['seeds']))}"]
    tokens = paths["corpus"] + ".tokens.json"
    if os.path.exists(tokens):
        with open(tokens) as f:
            header.append(f"- Corpus: {json.load(f)['tokens']:,} WordPiece tokens")
    return report.write_report(s["output_dir"], metas, header,
                               f"Efficiency study ({FLAGS.study}): {s['budget_steps']} steps each")


def main(argv):
    del argv
    s = settings()
    stages = set(FLAGS.stage.split(","))
    unknown = stages - {"prepare", "pretrain", "probe", "report"}
    if unknown:
        raise app.UsageError(f"unknown --stage {sorted(unknown)}")
    os.makedirs(s["output_dir"], exist_ok=True)
    paths = prepare(s) if stages & {"prepare", "pretrain", "probe"} else data_paths(s)
    with open(os.path.join(paths["probes_dir"], "meta.json")) as f:
        for name, meta in json.load(f).items():
            log(f"probe {name}: {meta['train_size']} train / {meta['dev_size']} dev, "
                f"majority baseline {meta['majority_baseline']:.3f}")
    records = []
    if stages & {"pretrain", "probe"}:
        for seed in s["seeds"]:
            for objective in s["objectives"]:
                records.append(run_one(objective, seed, s, paths, stages))
    if "report" in stages:
        records = write_outputs(s, paths)
        log(f"wrote the results in {s['output_dir']}")
    failed = [r for r in records if r["status"] not in ("ok", "pretrained")]
    if failed:
        log(f"{len(failed)} run(s) failed: " + "; ".join(
            f"{r['objective']} seed {r['seed']}: {r.get('error', r['status'])}" for r in failed))
        sys.exit(1)


if __name__ == "__main__":
    from electra_tf import cli

    define_flags()
    app.run(lambda argv: cli.run_cli(lambda: main(argv)))
