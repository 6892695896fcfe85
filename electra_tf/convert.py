r"""Converts ELECTRA weights: the original TF1 checkpoints and transformers, both ways.

    # the original's checkpoint (G and D) -> an electra_tf model_dir
    python -m electra_tf.convert --from=tf1 --checkpoint=electra_small/electra_small \
        --model_size=small --output=electra_small_tf2
    # a transformers folder (config.json + model.safetensors) -> an electra_tf model_dir
    python -m electra_tf.convert --from=hf --model_dir=electra-small-discriminator \
        [--generator_dir=electra-small-generator] --output=electra_small_tf2
    # an electra_tf model_dir -> transformers (ElectraForPreTraining [+ generator/])
    python -m electra_tf.convert --to=hf --model_dir=model_small --output=hf_small [--generator]
    # a transformers task model (token classification, question answering, sequence
    # classification) -> a fine-tuning folder that exports, evaluates and fine-tunes
    python -m electra_tf.convert --from=hf --model_dir=electra-ner --output=ner_tf [--task_name=ner]
    # a checkpoint of the original's run_finetuning.py -> a fine-tuning folder
    python -m electra_tf.convert --from=tf1 --checkpoint=mnli_model/model.ckpt-36816 \
        --model_size=base --vocab_file=vocab.txt --output=mnli_tf [--task_name=mnli]
    # a fine-tuning folder -> its transformers task model, labels and tokenizer files
    python -m electra_tf.convert --to=hf --model_dir=ner_tf --output=ner_hf

The output of an import is what `run_finetuning --init_checkpoint=DIR` reads
(discriminator.weights.h5 + discriminator_config.json), plus the generator,
a conversion report and, for a TF1 checkpoint holding G and D, a
pre-training checkpoint to continue from (see electra_tf/interop/core.py).
Nothing is downloaded: point the flags at files you have. transformers'
generator head is GELU whatever hidden_act says: an import records it
(EncoderConfig.generator_head_act), and an export that transformers cannot
express logs a warning (electra_tf/interop/hf.py).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys

from absl import app, flags

from electra_tf import cli
from electra_tf.core.errors import InputError
from electra_tf.core.fileio import UNDO_PREFIX, FolderLock, check_output_folder, undo_on_failure
from electra_tf.core.words import count
from electra_tf.folders import files
from electra_tf.folders.files import remove_stale_temporaries

FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_enum("from", None, ["tf1", "hf"], "Import from the original TF1 checkpoint "
                      "format or from a transformers folder.")
    flags.DEFINE_enum("to", None, ["hf"], "Export an electra_tf model_dir to transformers.")
    flags.DEFINE_string("checkpoint", "", "--from=tf1: the checkpoint: its prefix "
                        "(PATH/model.ckpt), its .index or .data-* file, or the folder "
                        "holding it (the release's unzipped folder).")
    flags.DEFINE_string("model_dir", "", "--from=hf: the transformers folder; --to=hf: the "
                        "electra_tf model_dir.")
    flags.DEFINE_string("generator_dir", "", "--from=hf: a transformers ElectraForMaskedLM "
                        "folder to import as the generator too.")
    flags.DEFINE_string("model_size", "", "small | base | large | tiny; checked against the "
                        "checkpoint's shapes (required for --from=tf1).")
    flags.DEFINE_string("model_hparam_overrides", "", "--from=tf1: JSON of EncoderConfig "
                        "fields over the size preset (custom sizes).")
    flags.DEFINE_string("output", "", "The folder to write.")
    flags.DEFINE_bool("overwrite", False, "Replace the model an --output folder holds: "
                      "its model files of either format (electra_tf's, transformers') go "
                      "first, other files stay.")
    flags.DEFINE_bool("generator", False, "--to=hf: also export the generator (to OUTPUT/generator).")
    flags.DEFINE_bool("drop_task_head", False, "--from=hf: convert an "
                      "ElectraForSequenceClassification's encoder and drop its head.")
    flags.DEFINE_string("task_name", "", "--from=hf, a task model: the task to record it as "
                        "(ner, sst2, mnli, squad_v2, ...; default by its head: ner or "
                        "tagging, squad_v1, classification). --from=tf1, a fine-tuned "
                        "checkpoint: its task (electra_tf's name or the original's; default: "
                        "its task_specific/<task> scope), which also chooses one head of a "
                        "multi-task checkpoint.")
    flags.DEFINE_string("tf1_task", "", "--from=tf1, a multi-task fine-tuned checkpoint: "
                        "the original's name of the head to convert (task_specific/NAME), "
                        "where --task_name is not it (your own task's head recorded as "
                        "--task_name=classification or tagging).")
    flags.DEFINE_string("label_names", "", "--from=tf1, a fine-tuned classification or "
                        "tagging checkpoint: its labels in logit order, as run_finetuning's "
                        "--label_names (the GLUE tasks have their own).")
    flags.DEFINE_string("data_dir", "", "--from=tf1, a fine-tuned tagging checkpoint without "
                        "--label_names: the task's CoNLL files (train.txt, dev.txt, test.txt), "
                        "whose sorted tags (BIOES for the original's chunk) are its labels.")
    flags.DEFINE_bool("do_lower_case", True, "--from=tf1: the original's do_lower_case "
                      "(True for the released models), recorded with the model, as "
                      "--from=hf records its tokenizer's casing: fine-tuning refuses another "
                      "casing, and the export's tokenizer follows it. --from=hf: the casing "
                      "of a folder whose tokenizer files do not say (against theirs: refused).")
    flags.DEFINE_string("vocab_file", "", "--from=hf: the vocabulary, where the folder has "
                        "no vocab.txt or tokenizer.json, or its tokenizer adds tokens or "
                        "disagrees with its vocab.txt; --from=tf1: the vocab.txt "
                        "the checkpoint was trained with, where none lies beside it (given, "
                        "it is used over the one beside it).")
    flags.DEFINE_integer("max_seq_length", 0, "--from=hf, a task model: the sequence length "
                         "recorded for it (default: its tokenizer_config.json's model_max_length, "
                         "else its position count); --from=tf1, a "
                         "fine-tuned checkpoint: default the original's (512 QA, 256 "
                         "tagging, else 128).")
    flags.DEFINE_bool("resume_checkpoint", True, "--from=tf1: also write checkpoints/ckpt-0 "
                      "for run_pretraining to continue from.")


# Flags that only some directions read: elsewhere they would be dropped silently.
_TF1, _HF, _TO_HF = "--from=tf1", "--from=hf", "--to=hf"
_FLAG_DIRECTIONS = {
    "checkpoint": (_TF1,), "model_hparam_overrides": (_TF1,), "tf1_task": (_TF1,),
    "label_names": (_TF1,), "data_dir": (_TF1,), "do_lower_case": (_TF1, _HF),
    "resume_checkpoint": (_TF1,), "generator_dir": (_HF,), "drop_task_head": (_HF,),
    "task_name": (_TF1, _HF), "vocab_file": (_TF1, _HF), "max_seq_length": (_TF1, _HF),
    "model_size": (_TF1, _HF), "generator": (_TO_HF,), "model_dir": (_HF, _TO_HF)}


def resume_line(output: str, report: dict, backend: str) -> str:
    """The line that says how to continue pre-training a converted TF1 checkpoint: its
    flags, the backend (ckpt-0 is a TensorFlow checkpoint, which the JAX backend cannot
    resume) and the step the source was saved at (the run starts at 0)."""
    step = report.get("source_global_step")
    trained = "" if step is None else (
        f" (it starts at step 0 with fresh Adam moments; the source was saved at step "
        f"{step:,}: set --num_train_steps and --num_warmup_steps for the steps still to come)")
    prefix = "KERAS_BACKEND=tensorflow " if backend == "jax" else ""
    return (f"[convert] continue pre-training with {prefix}run_pretraining --model_dir="
            f"{shlex.quote(output)} {report['resume_flags']}{trained}")


def main(argv) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    source, target = FLAGS["from"].value, FLAGS.to
    if (source is None) == (target is None):
        raise InputError("give exactly one of --from=tf1|hf and --to=hf")
    if not FLAGS.output:
        raise InputError("--output is required")
    direction = f"--from={source}" if source else "--to=hf"
    for name, directions in _FLAG_DIRECTIONS.items():
        if FLAGS[name].present and direction not in directions:
            raise InputError(f"--{name} is for {' or '.join(directions)}, not {direction}; "
                             "leave it out")
    check_output_folder(FLAGS.output, "--output")  # a file, or a path under one
    marker = os.path.join(FLAGS.output, UNFINISHED)
    held = [n for n in os.listdir(FLAGS.output) if n != FolderLock.NAME] \
        if os.path.isdir(FLAGS.output) else []  # a .lock alone: a run killed at its start
    # a conversion killed there (kill -9, power): its marker, or (killed before the marker
    # was written) the snapshot of the files it was replacing
    unfinished = os.path.exists(marker) or any(n.startswith(UNDO_PREFIX) for n in held)
    if held and not FLAGS.overwrite and not unfinished:
        raise InputError(f"--output {FLAGS.output} already holds files (a model?); pass "
                         "--overwrite to write into it, or give a new or empty folder")
    # A refusal, a full disk or an interrupt midway leaves no half model: what the
    # conversion added to --output goes (the folder too, where it made it) and what an
    # --overwrite had replaced comes back, so the same command can run again. A kill
    # leaves UNFINISHED beside the files it wrote: the next conversion into the folder
    # replaces them (one at a time: FolderLock).
    # what a killed --overwrite kept of the model it replaced (undo_on_failure's links;
    # this run's own are made below)
    undone = [n for n in held if n.startswith(UNDO_PREFIX)] if unfinished else []
    with undo_on_failure(FLAGS.output), FolderLock(FLAGS.output, "--output"):
        # of those, the folders that hold model files are named; the others and the
        # files the kill left half-written go
        kept = _leftovers(FLAGS.output, undone) if unfinished else []
        if FLAGS.overwrite or unfinished:
            _check_not_a_source(FLAGS.output)
        # marked before the old model's files go: a kill while they went had left a
        # model without its checkpoints, unmarked, and the files it had replaced unnamed
        files.write_json(marker, {"pid": os.getpid()})
        if FLAGS.overwrite or unfinished:
            _remove_model_files(FLAGS.output)
        if unfinished:
            print(f"[convert] removed the unfinished conversion a stopped run left in "
                  f"{FLAGS.output}" + "".join(
                      f"; the files of the model it was replacing are in "
                      f"{os.path.join(FLAGS.output, n)} (move them back to keep that model, "
                      "or remove the folder)" for n in kept), file=sys.stderr)
        _convert(source)
    # after the block, whose end removes its .undo-* snapshot: a kill between the two
    # leaves the marker beside a whole model (converted again by the next run), where a
    # snapshot without the marker would call the finished model the one it replaced
    os.remove(marker)


# What a folder's model is made of, in either format: a model written over another
# kept the old one's other files (a fine-tuned head beside a new discriminator was what
# the export served; a stale tokenizer.json what transformers tokenized with).
_MODEL_FILES = (
    *files.FOLDER_FILES,  # electra_tf's
    # transformers (save_pretrained), and the generator/ folder --to=hf --generator writes
    "config.json", "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
    "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack", "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "generation_config.json", "generator")
_SHARDS = re.compile(r"(model|pytorch_model)-\d+-of-\d+\.(safetensors|bin)")
UNFINISHED = files.UNFINISHED_CONVERSION  # a kill leaves it in --output, beside a half model


def _sources() -> list[str]:
    """The folders this conversion reads."""
    paths = [FLAGS.model_dir, FLAGS.generator_dir, FLAGS.data_dir]
    paths += [os.path.dirname(p) or "." for p in (FLAGS.checkpoint, FLAGS.vocab_file) if p]
    if FLAGS.checkpoint and os.path.isdir(FLAGS.checkpoint):
        paths.append(FLAGS.checkpoint)
    return [p for p in paths if p]


def _check_not_a_source(output: str) -> None:
    """Refuses an --overwrite of a folder the conversion reads (its model files would go
    before they are read)."""
    for path in _sources():
        if os.path.isdir(path) and os.path.samefile(path, output):
            raise InputError(f"--output {output} is a folder the conversion reads "
                             f"({path}); write the conversion to another folder")
        if os.path.isdir(output) and os.path.exists(path) and os.path.commonpath(
                [os.path.realpath(path), os.path.realpath(output)]) == os.path.realpath(output):
            # (OUT/generator: removed as a model file, then "config.json not found")
            raise InputError(f"--output {output} holds a folder the conversion reads "
                             f"({path}); write the conversion to another folder")


def _is_model_file(name: str) -> bool:
    return name in _MODEL_FILES or _SHARDS.fullmatch(name) is not None


def _leftovers(output: str, undone: list[str]) -> list[str]:
    """Cleans what a killed conversion left in `output` beside its half model: its
    half-written files (.tmp-*) and the undo folders (of `undone`) that hold no model
    file go, the marker and lock leave the others; returns those others' names (the
    files of a model an --overwrite was replacing)."""
    import shutil

    remove_stale_temporaries(output)
    kept = []
    for name in sorted(undone):
        path = os.path.join(output, name)
        if not os.path.isdir(path) or os.path.islink(path):
            continue
        if any(_is_model_file(n) for n in os.listdir(path)):
            for n in (UNFINISHED, FolderLock.NAME):  # (moved back, they would mark the model)
                if os.path.isfile(os.path.join(path, n)):
                    os.remove(os.path.join(path, n))
            kept.append(name)
        else:
            shutil.rmtree(path, ignore_errors=True)
    return kept


def _remove_model_files(output: str) -> None:
    """Removes the model files of `output` (undo_on_failure puts them back)."""
    import shutil

    if not os.path.isdir(output):
        return
    for name in sorted(os.listdir(output)):
        if _is_model_file(name):  # (UNFINISHED stays: this conversion's own marker)
            path = os.path.join(output, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)


def _convert(source) -> None:
    from electra_tf.interop import hf, tf1

    if source == "tf1":
        if not FLAGS.checkpoint or not FLAGS.model_size:
            raise InputError("--from=tf1 needs --checkpoint and --model_size")
        overrides = None
        if FLAGS.model_hparam_overrides:
            try:
                overrides = json.loads(FLAGS.model_hparam_overrides)
            except (ValueError, RecursionError) as e:  # also 4,300+ digits, deep nesting
                raise InputError(f"--model_hparam_overrides is not valid JSON ({e})") from None
            if not isinstance(overrides, dict):
                raise InputError("--model_hparam_overrides must be a JSON object of "
                                 f"EncoderConfig fields, got {FLAGS.model_hparam_overrides}")
        from electra_tf.training.checkpoints import write_fresh_pretraining_checkpoint

        report = tf1.import_checkpoint(
            FLAGS.checkpoint, FLAGS.model_size, FLAGS.output, overrides,
            write_fresh_pretraining_checkpoint if FLAGS.resume_checkpoint else None,
            task_name=FLAGS.task_name, label_names=FLAGS.label_names,
            do_lower_case=FLAGS.do_lower_case, vocab_file=FLAGS.vocab_file,
            max_seq_length=FLAGS.max_seq_length, data_dir=FLAGS.data_dir,
            tf1_task=FLAGS.tf1_task)
        for note in report.pop("notes", []):
            print(f"[convert] note: {note}", file=sys.stderr)
        if FLAGS["resume_checkpoint"].present and not FLAGS.resume_checkpoint \
                and "checkpoint" not in report and not report.get("resumable"):
            print("[convert] note: --noresume_checkpoint does nothing here: "
                  + ("a fine-tuned checkpoint" if "task" in report else
                     "a checkpoint without the generator") + " gets no ckpt-0 to continue "
                  "pre-training from", file=sys.stderr)
        if "task" in report:
            print(f"[convert] {report['kind']}: {len(report['assigned'])} variables -> "
                  f"{FLAGS.output} (a fine-tuning folder of task {report['task']}; "
                  f"{count(len(report['skipped']), 'variable')} skipped)", file=sys.stderr)
            return
        print(f"[convert] {len(report['assigned'])} variables -> {FLAGS.output} "
              f"({count(len(report['skipped']), 'optimizer variable')} skipped)",
              file=sys.stderr)
        if "checkpoint" in report:
            import keras

            print(resume_line(FLAGS.output, report, keras.backend.backend()), file=sys.stderr)
    elif source == "hf":
        if not FLAGS.model_dir:
            raise InputError("--from=hf needs --model_dir")
        for flag in ("model_dir", "generator_dir"):  # a killed --to=hf's half folder
            if FLAGS[flag].value:  # (had been read, its casing lost with no word)
                files.check_no_unfinished_conversion(FLAGS[flag].value, f"--{flag}")
        for folder in filter(None, (FLAGS.model_dir, FLAGS.generator_dir)):
            task = folder == FLAGS.model_dir  # the task flags are the --model_dir's
            report = hf.import_model(folder, FLAGS.output, FLAGS.model_size,
                                     FLAGS.drop_task_head and task,
                                     task_name=FLAGS.task_name if task else "",
                                     vocab_file=FLAGS.vocab_file,
                                     max_seq_length=FLAGS.max_seq_length if task else 0,
                                     do_lower_case=FLAGS.do_lower_case
                                     if FLAGS["do_lower_case"].present else None)
            if folder == FLAGS.generator_dir and report["kind"] != "masked_lm":
                raise InputError(f"--generator_dir={folder} holds a {report['kind']} model, not "
                                 "an ElectraForMaskedLM (the pre-training generator)")
            task = f" (a fine-tuning folder of task {report['task']})" if "task" in report else ""
            for note in report.get("notes", []):
                print(f"[convert] note: {note}", file=sys.stderr)
            print(f"[convert] {report['kind']}: {len(report['assigned'])} tensors -> "
                  f"{FLAGS.output}{task}", file=sys.stderr)
    else:
        if not FLAGS.model_dir:
            raise InputError("--to=hf needs --model_dir (an electra_tf model_dir)")
        for path in hf.export_model(FLAGS.model_dir, FLAGS.output, FLAGS.generator):
            print(f"[convert] wrote {path}", file=sys.stderr)
        note = hf.export_note(FLAGS.model_dir)
        if note:
            print(f"[convert] note: {note}", file=sys.stderr)


def run():
    """The command line (console script `electra-convert`)."""
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
