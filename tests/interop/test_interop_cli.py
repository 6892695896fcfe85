"""`python -m electra_tf.convert` end to end, and pre-training continued from an import.

The command line runs once, on the error path; the import itself, the export of
the converted folder and the continued pre-training run in this process (the
calls convert's and export_saved_model's mains make).
"""

import dataclasses
import json
import os
import re
import shutil
import signal

import numpy as np
import pytest
from helpers import error_line, run_module, run_python


def _run(*args):
    return run_module("electra_tf.convert", *args)


# The command, killed (SIGKILL) once it has removed --output's model files
_KILLED_WHILE_REMOVING = """
import os, signal, sys
from electra_tf import convert
remove = convert._remove_model_files
def removed_then_killed(output):
    remove(output)
    os.kill(os.getpid(), signal.SIGKILL)
convert._remove_model_files = removed_then_killed
sys.argv = ["convert", *sys.argv[1:]]
convert.run()
"""


def test_interop_cli_tf1_import_and_errors(h, tmp_path, tiny_vocab):
    from electra_tf.text.tokenizer import load_vocab

    vocab_size = len(load_vocab(tiny_vocab))
    weights = h.original_weights(seed=7, vocab=vocab_size)
    prefix = h.write_tf1_checkpoint(tmp_path / "electra_tiny" / "model.ckpt-1000",
                                    h.with_optimizer_state(weights))
    shutil.copyfile(tiny_vocab, tmp_path / "electra_tiny" / "vocab.txt")  # as the release zips
    out = tmp_path / "converted"
    overrides = json.dumps(h.TINY_OVERRIDES)
    # Refused after the output folder was made (a LayerNorm missing): exit status 2, one
    # line naming the variable, and no folder is left, so the same command runs again
    # once the checkpoint is fixed (a wrong --model_size's line: test_interop_tf1.py).
    gamma = "electra/encoder/layer_0/output/LayerNorm/gamma"
    no_gamma = h.write_tf1_checkpoint(tmp_path / "no_gamma" / "model.ckpt-1000",
                                      {k: v for k, v in weights.items() if k != gamma})
    bad = _run("--from=tf1", f"--checkpoint={no_gamma}", "--model_size=small",
               f"--model_hparam_overrides={json.dumps(h.TINY_OVERRIDES)}", f"--output={out}")
    error_line(bad, gamma)
    assert not out.exists()
    # An --output that is a file: one line, the file untouched (a FileExistsError before).
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    error_line(_run("--from=tf1", f"--checkpoint={prefix}", "--model_size=base",
                    f"--output={victim}"), f"--output {victim}: {victim} is a file, not a folder")
    assert victim.read_text() == "mine"
    # --from=tf1 --checkpoint=DIR --model_size=small --model_hparam_overrides=... --output=OUT
    from electra_tf.interop import tf1
    from electra_tf.training.checkpoints import write_fresh_pretraining_checkpoint

    report = tf1.import_checkpoint(str(tmp_path / "electra_tiny"), "small", str(out),
                                   json.loads(overrides), write_fresh_pretraining_checkpoint)
    assert "--generator_hidden_size=0.75" in report["resume_flags"]
    assert report["source_global_step"] == 1000  # (its step is not converted: recorded)
    # A custom size: the printed command carries its overrides (it had been refused on
    # resume, naming --model_hparam_overrides, which the user never gave).
    import re

    from electra_tf.folders.pretraining import PretrainingFolder

    given = re.search(r"--model_hparam_overrides='(.*?)'", report["resume_flags"])
    recorded = PretrainingFolder.open(str(out), discriminator=False).config
    again = dataclasses.replace(recorded, model_hparam_overrides=json.loads(given.group(1)))
    assert again.discriminator_config() == recorded.discriminator_config()
    from electra_tf.folders.pretraining import load_discriminator

    _, recorded_vocab = load_discriminator(str(out))
    assert recorded_vocab == str(out / "vocab.txt") and os.path.exists(recorded_vocab)

    # The TF Serving export reads the converted folder as any pre-training folder (whose
    # export tests/export runs): the same weights.
    from electra_tf.serving.export import load_spec

    spec = load_spec("rtd", str(out), max_seq_length=32)
    table = spec.model.encoder.embeddings.word_embeddings.embeddings
    np.testing.assert_array_equal(table.numpy(), weights["electra/embeddings/word_embeddings"])


def test_a_tf1_import_says_what_of_its_vocabulary_it_keeps(h, tmp_path, tiny_vocab):
    """A pre-trained checkpoint without a vocab.txt had converted without a word (the
    missing vocabulary found at --to=hf); a --vocab_file other than the one beside it
    was used silently; a vocab.txt that is a folder was passed over; the printed resume
    command had the --model_dir unquoted (a path with a space broke it in a shell)."""
    import shlex

    from electra_tf.interop import core, tf1
    from electra_tf.text.tokenizer import load_vocab

    tokens = load_vocab(tiny_vocab)
    weights = h.original_weights(seed=7, vocab=len(tokens))
    source = tmp_path / "my ckpt"
    prefix = h.write_tf1_checkpoint(source / "model.ckpt-1000", h.with_optimizer_state(weights))
    out = tmp_path / "out é"
    proc = _run("--from=tf1", f"--checkpoint={prefix}", "--model_size=small",
                f"--model_hparam_overrides={json.dumps(h.TINY_OVERRIDES)}", f"--output={out}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (f"[convert] note: no vocab.txt beside the checkpoint ({source}) and no "
            "--vocab_file: the output holds no vocabulary" in proc.stderr), proc.stderr[-3000:]
    resume = next(line for line in proc.stderr.splitlines() if "continue pre-training" in line)
    assert shlex.split(resume)[5] == f"--model_dir={out}", resume
    # the folder holds no vocabulary: the printed command asks for one (it had said
    # "vocab_file is required" when run as printed), and the source's step is said
    assert resume.endswith("--vocab_file=VOCAB (it starts at step 0 with fresh Adam "
                           "moments; the source was saved at step 1,000: set "
                           "--num_train_steps and --num_warmup_steps for the steps still "
                           "to come)"), resume
    from electra_tf import convert

    on_jax = convert.resume_line(str(out), {"resume_flags": "--model_size=small"}, "jax")
    assert on_jax == ("[convert] continue pre-training with KERAS_BACKEND=tensorflow "
                      f"run_pretraining --model_dir={shlex.quote(str(out))} "
                      "--model_size=small")
    # a --vocab_file that is not the one beside the checkpoint: used, and said
    shutil.copyfile(tiny_vocab, source / "vocab.txt")
    other = tmp_path / "other.txt"
    other.write_text("\n".join(tokens[:-1]) + "\n")
    overrides = h.TINY_OVERRIDES
    report = tf1.import_checkpoint(prefix, "small", str(tmp_path / "b"), overrides,
                                   vocab_file=str(other))
    assert report["notes"] == [f"--vocab_file {other} is not the vocab.txt beside the "
                               f"checkpoint ({source / 'vocab.txt'}): the output holds "
                               "--vocab_file's"]
    assert len(load_vocab(str(tmp_path / "b" / "vocab.txt"))) == len(tokens) - 1
    assert tf1.import_checkpoint(prefix, "small", str(tmp_path / "c"), overrides,
                                 vocab_file=tiny_vocab)["notes"] == []  # the same: nothing
    (source / "vocab.txt").unlink()
    (source / "vocab.txt").mkdir()
    with pytest.raises(core.ConversionError, match=re.escape(
            f"{source / 'vocab.txt'} is a folder, not a vocabulary file")):
        tf1.import_checkpoint(prefix, "small", str(tmp_path / "d"), overrides)
    # a checkpoint without the generator gets no ckpt-0, with or without the flag
    discriminator = {k: v for k, v in weights.items()
                     if not k.startswith(("generator", "generator_predictions"))}
    only = h.write_tf1_checkpoint(tmp_path / "disc" / "model.ckpt-1", discriminator)
    assert tf1.import_checkpoint(only, "small", str(tmp_path / "e"), overrides,
                                 vocab_file=tiny_vocab)["resumable"] is False


@pytest.mark.slow  # a command more
def test_noresume_checkpoint_where_there_is_no_checkpoint_to_write_is_named(h, tmp_path,
                                                                           tiny_vocab):
    """--noresume_checkpoint for a checkpoint that gets no ckpt-0 anyway had been taken
    without a word."""
    from electra_tf.text.tokenizer import load_vocab

    weights = h.original_weights(seed=7, vocab=len(load_vocab(tiny_vocab)))
    only = h.write_tf1_checkpoint(tmp_path / "disc" / "model.ckpt-1", {
        k: v for k, v in weights.items() if not k.startswith("generator")})
    proc = _run("--from=tf1", f"--checkpoint={only}", "--model_size=small",
                f"--model_hparam_overrides={json.dumps(h.TINY_OVERRIDES)}",
                f"--vocab_file={tiny_vocab}", "--noresume_checkpoint",
                f"--output={tmp_path / 'out'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("[convert] note: --noresume_checkpoint does nothing here: a checkpoint without "
            "the generator gets no ckpt-0 to continue pre-training from" in proc.stderr)


@pytest.mark.slow  # conversions through the command, end to end
def test_overwrite_replaces_the_model_a_folder_holds(h, tmp_path, tiny_vocab):
    """--overwrite of a fine-tuned folder with a pre-trained model had left the old
    fine-tuned head, which the export then served; the folder the conversion reads is
    refused (its model files would go before they are read)."""
    from electra_tf.folders.finetuned import is_finetuning_folder
    from electra_tf.text.tokenizer import load_vocab

    weights = h.original_weights(seed=3, vocab=len(load_vocab(tiny_vocab)))
    source = tmp_path / "electra_tiny"
    prefix = h.write_tf1_checkpoint(source / "model.ckpt-10", weights)
    shutil.copyfile(tiny_vocab, source / "vocab.txt")
    out = tmp_path / "out"
    out.mkdir()
    old = {"finetuning_config.json": b"{}", "finetuned.weights.h5": b"old head",
           "tokenizer.json": b"{}", "notes.txt": b"mine"}
    for name, data in old.items():
        (out / name).write_bytes(data)
    (out / "generator").mkdir()
    (out / "generator" / "config.json").write_bytes(b"{}")
    args = ["--from=tf1", f"--checkpoint={prefix}", "--model_size=small",
            f"--model_hparam_overrides={json.dumps(h.TINY_OVERRIDES)}", "--overwrite"]
    error_line(_run(*args, f"--output={source}"),
               f"--output {source} is a folder the conversion reads")
    # nor a folder holding one (OUT/generator was removed as a model file, then "not found")
    error_line(_run(*args, f"--output={tmp_path}"),
               f"--output {tmp_path} holds a folder the conversion reads ({source})")
    assert sorted(p.name for p in source.iterdir()) == sorted(
        p.name for p in (tmp_path / "electra_tiny").iterdir())
    assert (source / "vocab.txt").read_bytes() == open(tiny_vocab, "rb").read()
    proc = _run(*args, f"--output={out}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = {p.name for p in out.iterdir()}
    assert not names & {"finetuning_config.json", "finetuned.weights.h5", "tokenizer.json",
                        "generator"}, names
    assert (out / "notes.txt").read_bytes() == b"mine"
    assert {"discriminator.weights.h5", "vocab.txt"} <= names
    assert not is_finetuning_folder(str(out))
    # A kill -9 while an --overwrite removes the model's files: the folder is marked (the
    # marker had come after the removal: a model without its checkpoints, unmarked, and
    # the replaced files left unnamed in their .undo-* folder)
    killed = run_python(["-c", _KILLED_WHILE_REMOVING, *args, f"--output={out}"])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert (out / ".conversion_unfinished").exists()
    (undo,) = [p for p in out.iterdir() if p.name.startswith(".undo-")]
    assert (undo / "discriminator.weights.h5").exists()
    proc = _run(*[a for a in args if a != "--overwrite"], f"--output={out}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"the files of the model it was replacing are in {undo} " in proc.stderr
    shutil.rmtree(undo)
    # killed before even the marker was written: its snapshot of the replaced files (and
    # a half-written temporary) tell the same (the command had said the folder holds
    # files, then with --overwrite left both for good)
    (undo / "discriminator.weights.h5").parent.mkdir()
    (undo / "discriminator.weights.h5").write_bytes(b"old model")
    (out / ".tmp-ybn0s8ut").write_bytes(b"{")
    proc = _run(*[a for a in args if a != "--overwrite"], f"--output={out}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"the files of the model it was replacing are in {undo} " in proc.stderr
    assert not (out / ".tmp-ybn0s8ut").exists()
    shutil.rmtree(undo)
    # What a conversion killed midway (kill -9) leaves: its marker, the lock file no
    # process holds, the files written so far. The same command, without --overwrite,
    # replaces them (it had been refused: `already holds files (a model?)`).
    from electra_tf import convert, folders

    (out / "conversion_report.json").unlink()
    (out / "discriminator_config.json").write_text("{")  # cut short by the kill
    folders.files.write_json(str(out / convert.UNFINISHED), {"pid": 1})
    (out / ".lock").write_text("host h, pid 1, since 2026-12-04 07:00:00\n")
    (out / ".undo-k1ll3d").mkdir()  # the replaced model's files a killed --overwrite kept
    (out / ".undo-k1ll3d" / "finetuned.weights.h5").write_bytes(b"old head")
    (out / ".undo-k1ll3d" / convert.UNFINISHED).write_text("{}")  # (as a nested undo kept)
    # a second undo folder of the killed run holding no model (its marker and lock), and
    # a weights file the kill left half-written: they had stayed, the first named as
    # "the files of the model it was replacing"
    (out / ".undo-n0m0d3l").mkdir()
    (out / ".undo-n0m0d3l" / convert.UNFINISHED).write_text("{}")
    (out / ".undo-n0m0d3l" / ".lock").write_text("")
    (out / ".tmp-r2h_3ssv.weights.h5").write_bytes(b"half")
    from electra_tf.core.errors import InputError
    from electra_tf.folders.pretraining import PretrainingFolder

    with pytest.raises(InputError, match=r"holds a conversion that was stopped midway "
                                         r"\(\.conversion_unfinished\): its model is "
                                         r"incomplete"):
        PretrainingFolder.open(str(out))  # what --init_checkpoint and the export open
    proc = _run(*[a for a in args if a != "--overwrite"], f"--output={out}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"[convert] removed the unfinished conversion a stopped run left in {out}; the " \
        f"files of the model it was replacing are in {out / '.undo-k1ll3d'} (move them back " \
        "to keep that model, or remove the folder)" in proc.stderr, proc.stderr[-3000:]
    assert (out / ".undo-k1ll3d" / "finetuned.weights.h5").read_bytes() == b"old head"
    assert not (out / ".undo-k1ll3d" / convert.UNFINISHED).exists()  # (moved back: unmarked)
    assert ".undo-n0m0d3l" not in proc.stderr
    names = {p.name for p in out.iterdir()}
    assert {"conversion_report.json", "discriminator_config.json", "notes.txt"} <= names
    assert not names & {convert.UNFINISHED, ".lock", ".undo-n0m0d3l",
                        ".tmp-r2h_3ssv.weights.h5"}, names


# Slow: a training step through the loop (the default suite restores a converted
# folder into the pre-training model: test_interop_tf1.py's
# test_interop_tf1_resume_checkpoint_restores_into_pretraining).
@pytest.mark.slow
def test_run_pretraining_continues_a_converted_checkpoint(h, tmp_path, tiny_vocab, tiny_corpus):
    from electra_tf.core.config import PretrainingConfig, PretrainingRun
    from electra_tf.data.builder import BuildOptions, build_pretraining_data
    from electra_tf.interop import tf1
    from electra_tf.text.tokenizer import load_vocab
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining
    from electra_tf.training.checkpoints import write_fresh_pretraining_checkpoint

    weights = h.original_weights(seed=7, vocab=len(load_vocab(tiny_vocab)))
    h.write_tf1_checkpoint(tmp_path / "electra_tiny" / "model.ckpt-1000",
                           h.with_optimizer_state(weights))
    shutil.copyfile(tiny_vocab, tmp_path / "electra_tiny" / "vocab.txt")
    out = tmp_path / "converted"
    tf1.import_checkpoint(str(tmp_path / "electra_tiny"), "small", str(out), h.TINY_OVERRIDES,
                          write_fresh_pretraining_checkpoint)
    # run_pretraining on the converted model_dir continues from the imported weights.
    records = tmp_path / "records"
    build_pretraining_data(BuildOptions(files=(tiny_corpus,), vocab_file=tiny_vocab,
                                        output_dir=str(records), max_seq_length=32))
    with open(out / "pretraining_config.json") as f:
        config = PretrainingConfig.from_dict(json.load(f)["pretraining"])
    # With dropout off (#54: refused as "other variable shapes" before; dropout changes
    # no variable).
    no_dropout = {**config.model_hparam_overrides, "hidden_dropout_prob": 0.0,
                  "attention_probs_dropout_prob": 0.0}
    config = dataclasses.replace(config, max_seq_length=32, train_batch_size=4,
                                 num_train_steps=1, num_warmup_steps=0, iterations_per_loop=1,
                                 model_hparam_overrides=no_dropout)
    run = PretrainingRun(model_dir=str(out), train_data=f"{records}/*.tfrecord*",
                         vocab_file=tiny_vocab)
    trainer = TensorFlowPretraining(config, run)
    assert trainer.model.discriminator.config.hidden_dropout_prob == 0.0
    assert trainer.restore() == 0
    table = trainer.model.discriminator.encoder.embeddings.word_embeddings.embeddings
    np.testing.assert_array_equal(table.numpy(), weights["electra/embeddings/word_embeddings"])
    trainer.train()
    assert trainer.step == 1
    assert os.path.exists(out / "final_eval.json")



def test_interop_cli_hf_generator_dir_is_checked_and_a_refusal_leaves_no_folder(h, tmp_path):
    """--generator_dir that does not exist, or holds a discriminator: refused, and the
    discriminator written before it is removed with the folder (a rerun was refused as
    'already holds files', or the second import silently overwrote the first)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    s = h.sizes
    config = transformers.ElectraConfig(
        vocab_size=s["VOCAB"], embedding_size=s["EMBED"], hidden_size=s["HIDDEN"],
        num_hidden_layers=s["LAYERS"], num_attention_heads=s["HEADS"],
        intermediate_size=s["FFN"], max_position_embeddings=s["POS"])
    torch.manual_seed(0)
    transformers.ElectraForPreTraining(config).save_pretrained(tmp_path / "disc")
    out = tmp_path / "out"
    for generator_dir, message in ((tmp_path / "missing", "missing/config.json not found"),
                                   (tmp_path / "disc", "holds a pretraining model, not an "
                                                       "ElectraForMaskedLM")):
        proc = _run("--from=hf", f"--model_dir={tmp_path / 'disc'}",
                    f"--generator_dir={generator_dir}", f"--output={out}")
        error_line(proc, message)
        assert not out.exists()
    # into a folder holding a model, with --overwrite: the refusal puts the files the
    # discriminator's import had replaced back (they stayed replaced before)
    proc = _run("--from=hf", f"--model_dir={tmp_path / 'disc'}", f"--output={out}")
    assert proc.returncode == 0, proc.stderr
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    for seed in (1, 2):  # a new model, and a discriminator given as --generator_dir
        torch.manual_seed(seed)
        transformers.ElectraForPreTraining(config).save_pretrained(tmp_path / f"disc{seed}")
        for name in ("vocab.txt", "tokenizer_config.json", "tokenizer.json"):
            if (tmp_path / "disc" / name).exists():
                shutil.copy(tmp_path / "disc" / name, tmp_path / f"disc{seed}" / name)
    proc = _run("--from=hf", f"--model_dir={tmp_path / 'disc1'}", "--overwrite",
                f"--generator_dir={tmp_path / 'disc2'}", f"--output={out}")
    error_line(proc, "holds a pretraining model, not an ElectraForMaskedLM")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # a folder a killed --to=hf left (its marker; tokenizer_config.json not yet written):
    # refused as either folder (it had been read, its casing taken as the default)
    half = tmp_path / "half"
    shutil.copytree(tmp_path / "disc", half)
    (half / ".conversion_unfinished").write_text("{}")
    for flags, flag in (([f"--model_dir={half}"], "--model_dir"),
                        ([f"--model_dir={tmp_path / 'disc'}", f"--generator_dir={half}"],
                         "--generator_dir")):
        error_line(_run("--from=hf", *flags, f"--output={tmp_path / 'from_half'}"),
                   f"{flag}: {half} holds a conversion that was stopped midway")
        assert not (tmp_path / "from_half").exists()
