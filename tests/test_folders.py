"""electra_tf/folders: every folder format round-trips, is versioned and written atomically."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
from helpers import patience, popen_python, tiny_encoder_config

from electra_tf import folders
from electra_tf.core.config import (
    FinetuningConfig,
    FinetuningRun,
    PretrainingConfig,
    PretrainingRun,
)
from electra_tf.core.errors import ConfigError, InputError, VocabError
from electra_tf.core.fileio import atomic_write
from electra_tf.modeling import build_discriminator

TINY = tiny_encoder_config(40, num_hidden_layers=1)


def discriminator(seed=0):
    keras.utils.set_random_seed(seed)
    return build_discriminator(TINY)


def weights_of(model):
    return [np.asarray(w) for w in model.get_weights()]


def test_pretraining_folder_round_trip(tmp_path, tiny_vocab):
    d = discriminator()
    config = PretrainingConfig(model_size="tiny", vocab_size=40, max_seq_length=16)
    run = PretrainingRun(model_dir=str(tmp_path), train_data="x", vocab_file=tiny_vocab)
    folders.pretraining.save_discriminator(str(tmp_path), d)
    folders.pretraining.write_pretraining_config(str(tmp_path), config, run)
    folders.pretraining.write_final_eval(str(tmp_path), 7, {"disc_auc": 0.75})

    loaded, vocab = folders.pretraining.load_discriminator(str(tmp_path))
    assert vocab == str(tmp_path / folders.files.VOCAB) and loaded.config == TINY
    for a, b in zip(weights_of(loaded), weights_of(d)):
        np.testing.assert_array_equal(a, b)
    assert folders.pretraining.read_final_eval(str(tmp_path)) == {"step": 7, "disc_auc": 0.75}
    recorded = folders.pretraining.read_pretraining_config(str(tmp_path))
    assert PretrainingConfig.from_dict(recorded["pretraining"]) == config
    # Every JSON file carries the format version; readers strip it.
    for name in (folders.files.PRETRAINING_CONFIG, folders.files.DISCRIMINATOR_CONFIG,
                 folders.files.FINAL_EVAL):
        with open(tmp_path / name) as f:
            assert json.load(f)["format_version"] == folders.files.FORMAT_VERSION
    # No temporary files are left behind.
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]


def test_a_converted_models_source_stays_recorded_when_a_run_rewrites_the_record(
        tmp_path, tiny_vocab):
    """convert records converted_from; run_pretraining continuing the folder rewrote the
    record without it (where the weights came from was lost)."""
    config = PretrainingConfig(model_size="tiny", vocab_size=40, max_seq_length=16)
    run = PretrainingRun(model_dir=str(tmp_path), train_data="x", vocab_file=tiny_vocab)
    write = folders.pretraining.write_pretraining_config
    write(str(tmp_path), config, {"vocab_file": tiny_vocab}, converted_from="ckpt/model-1000")
    write(str(tmp_path), config, run)
    recorded = folders.pretraining.read_pretraining_config(str(tmp_path))
    assert recorded["converted_from"] == "ckpt/model-1000"
    assert recorded["run"]["train_data"] == "x"
    other = tmp_path / "own"
    other.mkdir()
    write(str(other), config, run)
    assert "converted_from" not in folders.pretraining.read_pretraining_config(str(other))


def test_a_folder_is_opened_once_and_read_from_what_it_carries(tmp_path, tiny_vocab,
                                                                monkeypatch):
    config = PretrainingConfig(model_size="tiny", vocab_size=40, do_lower_case=False)
    run = PretrainingRun(model_dir=str(tmp_path), train_data="x", vocab_file=tiny_vocab)
    folders.pretraining.save_discriminator(str(tmp_path), discriminator())
    folders.pretraining.write_pretraining_config(str(tmp_path), config, run)
    folder = folders.PretrainingFolder.open(str(tmp_path / folders.files.DISCRIMINATOR_WEIGHTS))
    assert folder.path == str(tmp_path) and folder.encoder == TINY
    # another file: named as such (its folder's config was named "not found" before)
    (tmp_path / "corpus.txt").write_text("words\n")
    with pytest.raises(InputError, match=r"--model_dir: .*corpus.txt is a file, not a "
                                         r"pre-training model_dir \(or its discriminator"):
        folders.PretrainingFolder.open(str(tmp_path / "corpus.txt"), "--model_dir")
    # Its configs were read at open: no JSON is read again to answer.
    monkeypatch.setattr(folders.files, "read_json", None)
    monkeypatch.setattr(folders.pretraining, "read_json", None)
    monkeypatch.setattr(folders.vocabulary, "read_json", None)
    assert folder.config == config and folder.do_lower_case is False
    assert folder.recorded_do_lower_case is False
    assert folder.recorded_vocab_file == tiny_vocab
    assert folder.vocab_sha256 == folders.vocabulary.vocab_fingerprint(tiny_vocab)
    assert folder.vocab() == str(tmp_path / folders.files.VOCAB)
    with pytest.raises(ConfigError, match="holds a custom-sized discriminator"):
        folder.load_discriminator("small")
    monkeypatch.undo()
    # Saved from a model built by hand: what fine-tuning and the export read, with a
    # vocabulary its table holds (the tiny vocab's 211 tokens do not fit TINY's 40 rows:
    # refused before anything is written).
    with pytest.raises(ConfigError, match="holds 211 tokens but the model's embedding table "
                                          "has 40 rows"):
        folders.PretrainingFolder.save(str(tmp_path / "mine"), discriminator(), tiny_vocab)
    assert not (tmp_path / "mine").exists()
    small_vocab = str(tmp_path / "vocab40.txt")
    with open(small_vocab, "w") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                          + [f"w{i}" for i in range(35)]) + "\n")
    mine = folders.PretrainingFolder.save(str(tmp_path / "mine"), discriminator(), small_vocab)
    assert mine.config is None and mine.vocab() == str(tmp_path / "mine" / folders.files.VOCAB)


def test_a_file_without_a_format_version_is_refused_with_the_file_named(tmp_path):
    """Written by hand (or by something else): not a file electra_tf wrote."""
    d = discriminator()
    d.save_weights(str(tmp_path / "discriminator.weights.h5"))
    (tmp_path / "discriminator_config.json").write_text(json.dumps(TINY.to_dict()))
    with pytest.raises(InputError, match="discriminator_config.json: no format_version; not a "
                                         "file electra_tf wrote"):
        folders.pretraining.load_discriminator(str(tmp_path / "discriminator.weights.h5"))


def test_a_newer_format_is_refused_with_the_file_named(tmp_path):
    path = tmp_path / "discriminator_config.json"
    path.write_text(json.dumps({"format_version": folders.files.FORMAT_VERSION + 1,
                                **TINY.to_dict()}))
    with pytest.raises(InputError, match="discriminator_config.json has format_version"):
        folders.files.read_encoder_config(str(path))


@pytest.mark.parametrize("content, message", [
    (b"{not json", "discriminator_config.json:1:2: malformed JSON"),
    (b"[" * 100_000, "unreadable JSON \\(nested too deeply\\)"),
    (b'{"format_version": 1' + b"0" * 5000 + b"}", "unreadable JSON \\(Exceeds the limit"),
    (b"[1, 2]", "expected a JSON object"),
    (b'{"format_version": 1, "hidden_size": "wide"}', "not an encoder config"),
])
def test_bad_config_files_are_one_clear_error(tmp_path, content, message):
    path = tmp_path / "discriminator_config.json"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        folders.files.read_encoder_config(str(path))


def test_a_folder_where_a_config_file_belongs_is_one_clear_error(tmp_path):
    (tmp_path / "discriminator_config.json").mkdir()
    with pytest.raises(InputError, match="discriminator_config.json is a folder, not a JSON"):
        folders.files.read_encoder_config(str(tmp_path / "discriminator_config.json"))


def test_weights_errors_name_the_file(tmp_path):
    folders.pretraining.save_discriminator(str(tmp_path), discriminator())
    weights = tmp_path / folders.files.DISCRIMINATOR_WEIGHTS
    before_bytes = weights.read_bytes()
    weights.write_bytes(b"not an h5 file")
    with pytest.raises(InputError, match="discriminator.weights.h5: not a readable weights"):
        folders.pretraining.load_discriminator(str(tmp_path))
    with pytest.raises(InputError, match="elsewhere not found"):
        folders.pretraining.load_discriminator(str(tmp_path / "elsewhere"))
    (tmp_path / "generator.weights.h5").write_bytes(before_bytes)  # Keras' 6-line list before
    with pytest.raises(InputError, match=r"generator.weights.h5 is the generator \(the masked "
                                         r"LM\), not the discriminator: give its folder"):
        folders.pretraining.load_discriminator(str(tmp_path / "generator.weights.h5"))
    (tmp_path / "only_weights").mkdir()
    (tmp_path / "only_weights" / folders.files.DISCRIMINATOR_WEIGHTS).write_bytes(before_bytes)
    with pytest.raises(InputError, match="discriminator_config.json not found"):
        folders.pretraining.load_discriminator(str(tmp_path / "only_weights"))
    with pytest.raises(ConfigError, match="not --model_size=small"):
        folders.pretraining.save_discriminator(str(tmp_path), discriminator())
        folders.pretraining.load_discriminator(str(tmp_path), model_size="small")


def test_weights_holding_nan_or_inf_are_refused_at_load(tmp_path):
    """A diverged run's save or bits flipped on disk: the export served NaN logits and
    fine-tuning blamed its learning rate. Every folder load refuses them, naming the
    variable (float32 and bfloat16 weights alike)."""
    model = discriminator()
    kernel = next(v for v in model.weights if v.path.endswith("kernel"))
    value = keras.ops.convert_to_numpy(kernel.value).copy()
    value.flat[[0, 3]] = [np.nan, np.inf]
    kernel.assign(value)
    folders.pretraining.save_discriminator(str(tmp_path), model)
    with pytest.raises(InputError) as raised:
        folders.pretraining.load_discriminator(str(tmp_path))
    assert str(raised.value) == (
        f"{tmp_path / folders.files.DISCRIMINATOR_WEIGHTS}: {kernel.path} holds 2 NaN or "
        f"infinite value(s) of {value.size}: a damaged model (a diverged run, or a damaged "
        "file)")
    folders.pretraining.save_discriminator(str(tmp_path), discriminator())  # finite: loads
    folders.pretraining.load_discriminator(str(tmp_path))


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    d = discriminator(0)
    folders.pretraining.save_discriminator(str(tmp_path), d)
    before = (tmp_path / folders.files.DISCRIMINATOR_WEIGHTS).read_bytes()

    def crash(path):
        with open(path, "wb") as f:
            f.write(b"half")
        raise KeyboardInterrupt  # a Ctrl-C mid-write

    with pytest.raises(KeyboardInterrupt):
        atomic_write(str(tmp_path / folders.files.DISCRIMINATOR_WEIGHTS), crash)
    assert (tmp_path / folders.files.DISCRIMINATOR_WEIGHTS).read_bytes() == before
    assert set(os.listdir(tmp_path)) == {folders.files.DISCRIMINATOR_CONFIG,
                                         folders.files.DISCRIMINATOR_WEIGHTS}
    # A folder where the file belongs (a predictions file's name): one line, before the
    # write (the rename had failed after it, in an IsADirectoryError traceback).
    (tmp_path / "dev_predictions.txt").mkdir()
    with pytest.raises(InputError, match=r"dev_predictions.txt is a folder where a file "
                                         r"belongs; move it away, then rerun$"):
        atomic_write(str(tmp_path / "dev_predictions.txt"), crash)


def test_an_output_that_is_a_link_or_a_pipe_is_written_through(tmp_path):
    """A user's --output (score, results_table) that is a link keeps the link and fills
    its target; a pipe or a device (/dev/stdout, /dev/null) is written into: the rename
    of atomic_write had replaced them by a regular file (as root, /dev/null itself)."""
    import stat
    import threading

    from electra_tf.core.fileio import check_output_file, write_output_text

    target, link = tmp_path / "real.txt", tmp_path / "link.txt"
    target.write_text("old\n")
    link.symlink_to(target)
    check_output_file(str(link))
    write_output_text(str(link), "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    check_output_file(str(fifo))
    write_output_text(str(fifo), "through\n")
    reader.join(60)
    assert got == ["through\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)
    write_output_text(str(tmp_path / "plain.txt"), "a\n")  # a new file: as atomic_write
    assert (tmp_path / "plain.txt").read_text() == "a\n"
    # pieces (score's chunks) land as one file; a failure midway leaves the old one
    write_output_text(str(link), iter(["one\n", "two\n"]))
    assert target.read_text() == "one\ntwo\n"

    def failing():
        yield "three\n"
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_output_text(str(link), failing())
    assert target.read_text() == "one\ntwo\n" and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "pipe", "plain.txt",
                                                          "real.txt"]


def test_an_output_to_dev_stdout_writes_through_it_and_keeps_the_file_it_leads_to(tmp_path):
    """--output=/dev/stdout with stdout sent to a regular file (`>> log`) had renamed a new
    file over it: what the log held was lost, and what was printed after went to the
    removed file. It is written at the descriptor's offset; a command that only writes
    atomically refuses it."""
    import subprocess

    log = tmp_path / "log.txt"
    log.write_text("earlier\n")
    script = ("import sys; from electra_tf.core.fileio import check_output_file, "
              "write_output_text; print('before', flush=True); "
              "check_output_file('/dev/stdout'); "
              "write_output_text('/dev/stdout', iter(['one\\n', 'two\\n'])); print('after')")
    with open(log, "a") as out:
        proc = popen_python(["-c", script], stdout=out, stderr=subprocess.PIPE, text=True)
        stderr = proc.communicate(timeout=patience(120))[1]
    assert proc.returncode == 0, stderr
    assert log.read_text() == "earlier\nbefore\none\ntwo\nafter\n"
    from electra_tf.core.errors import InputError
    from electra_tf.core.fileio import check_output_file

    with pytest.raises(InputError, match="--output /dev/stdout is one of the process's own "
                                         "streams, not a file"):
        check_output_file("/dev/stdout", special=False)


def test_output_names_the_file_system_cannot_hold_are_refused_before_any_work(tmp_path):
    """A name over the file system's limit (255 bytes) had failed at the run's first
    write, after the work, in an ENAMETOOLONG traceback; a path that is not UTF-8 where
    TensorFlow writes (its file system takes UTF-8 only: a model_dir, an export) in a
    UnicodeEncodeError one. Python's own writes (score's --output) take such a path."""
    from electra_tf.core.fileio import check_output_file, check_output_folder

    long = "a" * 300
    for check, path, what in ((check_output_file, tmp_path / f"{long}.txt", "--output"),
                              (check_output_folder, tmp_path / long / "1", "--model_dir"),
                              (check_output_folder, tmp_path / "x" / long, "--model_dir")):
        with pytest.raises(InputError, match=rf"^{what}: the name a{{40}}\.\.\. is 30[04] "
                                             r"bytes long; the file system takes names of "
                                             r"at most \d+$"):
            check(str(path), what)
    check_output_file(str(tmp_path / ("b" * 255)))  # at the limit: fine
    check_output_folder(str(tmp_path / ("b" * 255) / ("c" * 255)))
    odd = os.path.join(str(tmp_path), os.fsdecode(b"model_\xff"))
    with pytest.raises(InputError, match=r"^--model_dir .*model_\\xff: the path is not "
                                         r"UTF-8 \(TensorFlow's file system takes UTF-8 "
                                         r"paths only\); rename it$"):
        check_output_folder(odd)
    check_output_file(os.path.join(odd, "scores.txt"))  # a folder Python makes: fine
    assert not os.listdir(tmp_path)  # the checks made nothing


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux's /proc")
def test_an_input_that_fails_to_read_is_one_line_naming_it(tmp_path):
    """A read the disk or the permissions refuse (here EIO: /proc/self/mem read from its
    start) had reached run_cli as a write the file system refused (`every file is
    written under a temporary name first ...`, status 1), or a traceback: the readers
    of electra_tf's JSON files, the SQuAD, MRQA and GLUE evaluations' files and the
    classification tasks' own files name the file, as bad input (status 2)."""
    from electra_tf.core.errors import BAD_INPUT
    from electra_tf.tasks import classification, mrqa_eval, squad_eval
    from electra_tf.tasks.glue import evaluate_submission

    dev = tmp_path / "dev.tsv"
    dev.write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n")
    bad = "/proc/self/mem"
    for read in (lambda: folders.files.read_json(bad),
                 lambda: squad_eval.read_json(bad, "predictions"),
                 lambda: mrqa_eval.open_lines(bad),
                 lambda: evaluate_submission("mrpc", bad, str(dev)),
                 lambda: classification._read_text(bad)):
        with pytest.raises(BAD_INPUT, match=r"^/proc/self/mem: cannot read it \(Input/output "
                                            r"error\)$"):
            read()


def test_finetuning_folder_round_trip(tmp_path, tiny_vocab):
    from electra_tf.tasks.model import FinetuningModel
    from electra_tf.tasks.registry import get_task

    task = get_task("mrpc")
    model = FinetuningModel(discriminator().encoder, task.head, len(task.label_names))
    model.build()
    run = FinetuningRun(model_dir=str(tmp_path), data_dir="d", init_checkpoint="pre",
                        vocab_file=tiny_vocab)
    folders.finetuned.write_finetuning_config(
        str(tmp_path), task=task, config=FinetuningConfig(task_name="mrpc"), run=run,
        encoder=TINY, model_size="custom", max_seq_length=32, epochs=3)
    folders.finetuned.save_finetuned(str(tmp_path), model)
    folders.finetuned.write_results(str(tmp_path), {"epoch_1": {"dev": {"f1": 0.5}}})

    loaded, record = folders.finetuned.load_finetuned(str(tmp_path))
    assert (record.task, record.head, record.regression, record.pair, record.answerable) == (
        "mrpc", "sequence_classification", False, True, False)
    assert record.label_names == tuple(task.label_names) and record.max_seq_length == 32
    assert folders.finetuned.finetuned_vocab(record) == str(tmp_path / folders.files.VOCAB)
    for a, b in zip(weights_of(loaded), weights_of(model)):
        np.testing.assert_array_equal(a, b)
    assert folders.finetuned.read_results(str(tmp_path)) == {"epoch_1": {"dev": {"f1": 0.5}}}


def test_results_json_lists_the_epochs_in_their_order(tmp_path):
    """epoch_2 before epoch_10 (key-sorted JSON had put epoch_10 first), each epoch's
    splits and scores key-sorted; a score that is not finite is null."""
    results = {f"epoch_{n}": {"dev": {"f1": 0.5, "acc": float(n)}} for n in (10, 2, 1, 11)}
    folders.finetuned.write_results(str(tmp_path), {"eval": {"dev": {"f1": float("nan")}},
                                                    **results})
    text = (tmp_path / folders.files.RESULTS).read_text()
    assert [line.split('"')[1] for line in text.splitlines() if line.startswith('  "')] == [
        "format_version", "epoch_1", "epoch_2", "epoch_10", "epoch_11", "eval"]
    assert text.index('"acc"') < text.index('"f1"') and '"f1": null' in text
    assert folders.finetuned.read_results(str(tmp_path))["epoch_10"] == results["epoch_10"]
    assert folders.finetuned.final_results(results) == results["epoch_11"]


def test_a_finetuning_config_without_its_head_is_refused(tmp_path):
    """The head, what the task reads and the head's options are recorded, never guessed."""
    folders.files.write_json(str(tmp_path / folders.files.FINETUNING_CONFIG), {
        "task": "squad_v2", "encoder": TINY.to_dict(), "label_names": [],
        "max_seq_length": 64, "finetuning": {}, "run": {}})
    with pytest.raises(InputError, match="finetuning_config.json: lacks head, regression, "
                                         "answerable, pair, head_options; not a file "
                                         "electra_tf wrote"):
        folders.finetuned.read_finetuning_config(str(tmp_path))


def test_a_head_outside_the_vocabulary_is_refused(tmp_path):
    """The recorded head is one of tasks.base.HEADS, the names the export's --task takes;
    another name (e.g. "span", which an earlier electra_tf wrote) is one clear line."""
    _finetuned_folder(tmp_path, "squad_v1")
    path = tmp_path / folders.files.FINETUNING_CONFIG
    path.write_text(json.dumps({**json.loads(path.read_text()), "head": "span"}))
    with pytest.raises(InputError, match="finetuning_config.json: head 'span' is not one of "
                                         "sequence_classification, token_classification, "
                                         "squad$"):
        folders.finetuned.load_finetuned(str(tmp_path))


def _finetuned_folder(folder, name, **config_fields):
    """A fine-tuning folder as the trainer writes it: the task from its config."""
    from electra_tf.tasks.model import FinetuningModel
    from electra_tf.tasks.registry import task_from_config

    config = FinetuningConfig(task_name=name, **config_fields)
    task = task_from_config(config)
    model = FinetuningModel(discriminator().encoder, task.head, max(1, len(task.label_names)),
                            answerable=task.answerable, regression=task.regression,
                            **task.head_options)
    model.build()
    folders.finetuned.write_finetuning_config(
        str(folder), task=task, config=config,
        run=FinetuningRun(model_dir=str(folder), data_dir="d", init_checkpoint="pre"),
        encoder=TINY, model_size="custom", max_seq_length=16)
    folders.finetuned.save_finetuned(str(folder), model)
    return model


def test_a_squad_folder_records_and_rebuilds_its_span_head(tmp_path):
    model = _finetuned_folder(tmp_path / "joint", "squad_v2", beam_size=4)
    loaded, record = folders.finetuned.load_finetuned(str(tmp_path / "joint"))
    assert record.head_options == {"span_head": "joint", "beam_size": 4}
    assert (loaded.head.span_head, loaded.head.beam_size) == ("joint", 4)
    for a, b in zip(weights_of(loaded), weights_of(model)):
        np.testing.assert_array_equal(a, b)
    _finetuned_folder(tmp_path / "independent", "squad_v1", joint_prediction=False)
    loaded, record = folders.finetuned.load_finetuned(str(tmp_path / "independent"))
    assert record.head_options["span_head"] == "independent"
    assert loaded.head.span_head == "independent"


def test_a_joint_model_without_recorded_head_options_does_not_load(tmp_path):
    """Without head_options the head is unknown: refused, not built as the default one."""
    _finetuned_folder(tmp_path, "squad_v1")
    path = tmp_path / folders.files.FINETUNING_CONFIG
    value = json.loads(path.read_text())
    del value["head_options"]
    path.write_text(json.dumps(value))
    with pytest.raises(InputError, match="lacks head_options; not a file electra_tf wrote"):
        folders.finetuned.load_finetuned(str(tmp_path))


@pytest.mark.parametrize("name, config_fields, drop, field", [
    ("stsb", {}, ("label_scale",), "label_scale"),
    ("squad_v1", {"joint_prediction": False}, ("head_options", "span_head"),
     "head_options.span_head"),
    ("squad_v2", {}, ("finetuning", "squad_null_rule"), "finetuning.squad_null_rule"),
    ("mrpc", {}, ("finetuning",), "finetuning"),
])
def test_a_record_without_a_field_it_must_have_is_one_line(tmp_path, name, config_fields,
                                                           drop, field):
    """One format: a record lacking a field its head needs is refused, never read as an
    earlier default (raw regression scores, the independent span head, the combined
    null rule)."""
    _finetuned_folder(tmp_path, name, **config_fields)
    path = tmp_path / folders.files.FINETUNING_CONFIG
    value = json.loads(path.read_text())
    if len(drop) == 1:
        del value[drop[0]]
    else:
        del value[drop[0]][drop[1]]
    path.write_text(json.dumps(value))
    with pytest.raises(InputError) as raised:
        folders.finetuned.load_finetuned(str(tmp_path))
    assert str(raised.value) == f"{path}: lacks {field}; not a file electra_tf wrote"


def test_a_regression_folder_records_its_label_scale(tmp_path):
    _finetuned_folder(tmp_path / "stsb", "stsb")
    record = folders.finetuned.read_finetuning_config(str(tmp_path / "stsb"))
    assert record.label_scale == (0.0, 5.0) and record.head_options == {}
    assert (record.head, record.regression) == ("sequence_classification", True)
    loaded, _ = folders.finetuned.load_finetuned(str(tmp_path / "stsb"))
    assert loaded.head.regression and loaded.head.output_dense.units == 1
    _finetuned_folder(tmp_path / "mrpc", "mrpc")
    raw = folders.files.read_json(str(tmp_path / "mrpc" / folders.files.FINETUNING_CONFIG))
    assert "label_scale" not in raw and raw["head_options"] == {}
    assert (raw["head"], raw["regression"]) == ("sequence_classification", False)


@pytest.mark.parametrize("field, value, message", [
    ("label_scale", "five", "label_scale must be"),
    ("head_options", {"span_head": "sideways"}, "do not build a model"),
])
def test_a_bad_recorded_head_is_one_clear_error(tmp_path, field, value, message):
    _finetuned_folder(tmp_path, "stsb" if field == "label_scale" else "squad_v1")
    path = tmp_path / folders.files.FINETUNING_CONFIG
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    with pytest.raises(InputError, match=message):
        folders.finetuned.load_finetuned(str(tmp_path))


def test_conversion_reports_merge_by_kind(tmp_path):
    folders.converted.write_conversion_report(str(tmp_path), {"assigned": ["a"]}, kind="pretraining")
    folders.converted.write_conversion_report(str(tmp_path), {"assigned": ["b"]}, kind="masked_lm")
    assert folders.files.read_json(str(tmp_path / folders.files.CONVERSION_REPORT)) == {
        "pretraining": {"assigned": ["a"]}, "masked_lm": {"assigned": ["b"]}}


def test_copy_and_record_vocab(tmp_path, tiny_vocab):
    import shutil

    (tmp_path / "src").mkdir()
    shutil.copy(tiny_vocab, tmp_path / "src" / "vocab.txt")
    out = tmp_path / "out"
    out.mkdir()
    copied = folders.vocabulary.copy_vocab(str(tmp_path / "src"), str(out))
    assert copied == str(out / "vocab.txt")
    assert (out / "vocab.txt").read_text() == open(tiny_vocab).read()
    assert folders.vocabulary.copy_vocab(str(tmp_path / "nothing"), str(out)) == ""
    folders.pretraining.record_vocab(str(out), copied)
    assert folders.PretrainingFolder.open(str(out), discriminator=False).recorded_vocab_file == copied


KILLED_MID_WRITE = """
import io, os, sys, time
import keras
from electra_tf import folders
from electra_tf.core.config import EncoderConfig
from electra_tf.modeling import build_discriminator

folder = sys.argv[1]
keras.utils.set_random_seed(1)
d = build_discriminator(EncoderConfig(**__import__("json").loads(sys.argv[2])))

def stalled_save(path):  # writes half a file, then hangs until killed
    with open(path, "wb") as f:
        f.write(b"\\x89HDF\\r\\n" + b"x" * 1000)
    open(os.path.join(folder, "writing"), "w").close()
    time.sleep(600)


class Stalled(io.BytesIO):  # the in-memory file's bytes, whose write hangs until killed
    def getbuffer(self):
        open(os.path.join(folder, "writing"), "w").close()
        time.sleep(600)


if sys.argv[3] == "keras":  # a Keras without the in-memory store: model.save_weights
    folders.files.weights_file_in_memory = lambda model: None
    d.save_weights = stalled_save
else:
    folders.files.weights_file_in_memory = lambda model: Stalled(b"\\x89HDF\\r\\n")
folders.pretraining.save_discriminator(folder, d)
"""


@pytest.mark.parametrize("writer", ["memory", "keras"])
def test_a_kill_mid_write_leaves_the_old_weights_and_the_next_run_tidies(tmp_path, writer):
    import signal
    import time

    folders.pretraining.save_discriminator(str(tmp_path), discriminator(0))
    weights = tmp_path / folders.files.DISCRIMINATOR_WEIGHTS
    before = weights.read_bytes()
    proc = popen_python(["-c", KILLED_MID_WRITE, str(tmp_path), json.dumps(TINY.to_dict()),
                         writer])
    try:
        deadline = time.monotonic() + patience(240)
        while not (tmp_path / "writing").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the writer never started"
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=patience(60))
    finally:
        proc.kill()
    assert weights.read_bytes() == before  # the old file, whole
    loaded, _ = folders.pretraining.load_discriminator(str(tmp_path))
    for a, b in zip(weights_of(loaded), weights_of(discriminator(0))):
        np.testing.assert_array_equal(a, b)
    leftovers = [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]
    assert len(leftovers) == 1 and leftovers[0].endswith(".weights.h5")
    assert folders.files.remove_stale_temporaries(str(tmp_path)) == leftovers
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]


def test_the_pretraining_config_records_the_vocab_fingerprint(tmp_path, tiny_vocab):
    import hashlib

    from electra_tf.text.tokenizer import load_vocab

    config = PretrainingConfig(model_size="tiny", vocab_size=40, max_seq_length=16)
    run = PretrainingRun(model_dir=str(tmp_path), train_data="x", vocab_file=tiny_vocab)
    folders.pretraining.write_pretraining_config(str(tmp_path), config, run)
    want = hashlib.sha256("\n".join(load_vocab(tiny_vocab)).encode()).hexdigest()
    assert folders.PretrainingFolder.open(str(tmp_path), discriminator=False).vocab_sha256 == want
    assert folders.vocabulary.vocab_fingerprint(tiny_vocab) == want
    # A vocabulary that is not there is refused, not recorded by its path alone.
    with pytest.raises(VocabError, match="/not/there.txt"):
        folders.pretraining.write_pretraining_config(str(tmp_path), None, {"vocab_file": "/not/there.txt"})
    assert folders.PretrainingFolder.open(str(tmp_path), discriminator=False).vocab_sha256 == want


@pytest.mark.parametrize("error", [KeyError("bad object header version number"),
                                   RuntimeError("bad heap free list")])
def test_damaged_hdf5_internals_are_one_clear_error(tmp_path, monkeypatch, error):
    """h5py reports some damage as KeyError or RuntimeError, not OSError."""
    folders.pretraining.save_discriminator(str(tmp_path), discriminator())
    model = discriminator()

    def damaged(path):
        raise error

    monkeypatch.setattr(model, "load_weights", damaged)
    with pytest.raises(InputError, match="discriminator.weights.h5: not a readable weights"):
        folders.files.load_weights(model, str(tmp_path / folders.files.DISCRIMINATOR_WEIGHTS))


def test_has_checkpoints(tmp_path):
    assert not folders.files.has_checkpoints(str(tmp_path))
    folder = tmp_path / folders.files.CHECKPOINTS
    (folder / "ckpt-3_temp").mkdir(parents=True)  # a save killed midway is not a checkpoint
    assert not folders.files.has_checkpoints(str(tmp_path))
    # a state file, or a save's data without its .index (written last), is no save: a
    # finished run's folder had then been taken for one to resume, and trained from 0
    (folder / "checkpoint").write_text("x")
    (folder / "ckpt-3.data-00000-of-00001").write_text("x")
    assert not folders.files.has_checkpoints(str(tmp_path))
    (folder / "ckpt-3.index").write_text("x")
    assert folders.files.has_checkpoints(str(tmp_path))
    (folder / "ckpt-3.index").unlink()
    (folder / "jax-ckpt-2.npz").write_text("x")
    assert folders.files.has_checkpoints(str(tmp_path))


@pytest.fixture
def umask():
    """Sets this process's umask for one test (restored after)."""
    previous = os.umask(0o022)

    def set_mask(mask):
        os.umask(mask)

    yield set_mask
    os.umask(previous)


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_follow_the_umask_not_the_temporary_file(tmp_path, umask, mask, mode):
    """mkstemp makes 0600 whatever the umask; a TF Serving process of another user must
    read what was written under umask 022."""
    from electra_tf.core.fileio import current_umask

    umask(mask)
    assert current_umask() == mask
    folders.files.write_json(str(tmp_path / "a.json"), {"a": 1})
    layer = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    folders.files.save_weights(layer, str(tmp_path / "w.weights.h5"))
    for name in ("a.json", "w.weights.h5"):
        assert os.stat(tmp_path / name).st_mode & 0o777 == mode, name


def test_a_replaced_file_keeps_its_mode_and_a_failed_output_leaves_no_folders(tmp_path,
                                                                              umask):
    """A user's 0600 --output came back 0644 (the atomic write's new file took the
    umask); a --output of a/b/out.txt refused midway had left a/ and a/b/ behind."""
    from electra_tf.core.fileio import write_output_text

    umask(0o022)
    private = tmp_path / "private.txt"
    private.write_text("old\n")
    os.chmod(private, 0o600)
    write_output_text(str(private), "new\n")
    assert private.read_text() == "new\n" and os.stat(private).st_mode & 0o777 == 0o600

    def failing():
        yield "one\n"
        raise ValueError("line 2 is bad")

    with pytest.raises(ValueError):
        write_output_text(str(tmp_path / "a" / "b" / "out.txt"), failing())
    assert not (tmp_path / "a").exists()
    (tmp_path / "kept").mkdir()  # a folder that was there stays, as its files do
    with pytest.raises(ValueError):
        write_output_text(str(tmp_path / "kept" / "new" / "out.txt"), failing())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "private.txt"]
    assert list((tmp_path / "kept").iterdir()) == []


def test_a_converted_folder_records_its_casing_where_known(tmp_path, tiny_vocab):
    """A discriminator without a PretrainingConfig (a converted one) records the casing
    its conversion knew; a folder that records none reads as uncased, and says so."""
    unknown = tmp_path / "unknown"
    folders.pretraining.save_discriminator(str(unknown), discriminator())
    folders.pretraining.record_vocab(str(unknown), tiny_vocab)
    folder = folders.PretrainingFolder.open(str(unknown))
    assert folder.recorded_do_lower_case is None and folder.do_lower_case is True
    for lower in (False, True):
        path = tmp_path / f"cased_{lower}"
        folders.ConvertedFolder(str(path)).save_discriminator(discriminator())
        folders.ConvertedFolder(str(path)).record_vocab(tiny_vocab, lower)
        folder = folders.PretrainingFolder.open(str(path))
        assert folder.recorded_do_lower_case is lower and folder.do_lower_case is lower
        assert folder.config is None  # the casing alone is no PretrainingConfig
    # Without a vocabulary the casing is still recorded.
    bare = tmp_path / "bare"
    folders.pretraining.save_discriminator(str(bare), discriminator())
    folders.pretraining.record_vocab(str(bare), "", False)
    assert folders.PretrainingFolder.open(str(bare)).recorded_do_lower_case is False


def test_weights_that_do_not_fit_the_record_name_the_shapes(tmp_path, tiny_vocab):
    """finetuned.weights.h5 of a 3-label head under a record of 2 labels (the record edited,
    or the files of two runs mixed) names the shapes and the record, where Keras said
    "Layer 'output' expected 2 variables, but received 0"; the weights file as a folder
    says so, where it read "not found"."""
    import json
    import shutil

    from electra_tf.tasks.model import FinetuningModel
    from electra_tf.text.vocab import load_vocab

    encoder = tiny_encoder_config(len(load_vocab(tiny_vocab)))
    three = FinetuningModel(build_discriminator(encoder).encoder, "sequence_classification",
                            num_labels=3)
    three.build()
    folder = folders.FinetunedFolder.save(str(tmp_path / "own"), three, tiny_vocab,
                                          "classification", label_names="a,b,c")
    record = tmp_path / "own" / "finetuning_config.json"
    value = json.loads(record.read_text())
    value["label_names"], value["finetuning"]["label_names"] = ["a", "b"], "a,b"
    record.write_text(json.dumps(value))
    with pytest.raises(ConfigError) as raised:
        folders.FinetunedFolder.open(folder.path).load_model()
    assert str(raised.value) == (
        f"{folder.weights} does not fit the model's config: the file holds (16, 3), (3,) "
        "where the model has (16, 2), (2,) (finetuning_config.json records a "
        "sequence_classification head of 2 output(s): a, b)")
    os.remove(folder.weights)
    os.mkdir(folder.weights)
    with pytest.raises(InputError) as raised:
        folders.FinetunedFolder.open(folder.path).load_model()
    assert str(raised.value) == f"{folder.weights} is a folder, not a weights file"
    shutil.rmtree(folder.weights)


def test_a_finetuned_folder_saved_from_python_reads_as_run_finetuning_writes(tmp_path,
                                                                            tiny_vocab):
    """FinetunedFolder.save of a FinetuningModel: the record run_finetuning writes (task,
    head, labels, window, casing, vocabulary) and the same weights back; a model whose
    head is not the task's is refused in one line, before anything is written."""
    import numpy as np

    from electra_tf.tasks.model import FinetuningModel
    from electra_tf.text.vocab import load_vocab

    encoder = tiny_encoder_config(len(load_vocab(tiny_vocab)), num_hidden_layers=1)

    def model(kind="sequence_classification", n=2, **options):
        m = FinetuningModel(build_discriminator(encoder).encoder, kind, num_labels=n,
                            **options)
        m.build()
        return m

    sst2 = model()
    folder = folders.FinetunedFolder.save(str(tmp_path / "sst2"), sst2, tiny_vocab, "sst2",
                                          do_lower_case=False)
    record = folder.record
    assert (record.task, record.head, record.label_names, record.pair) == (
        "sst2", "sequence_classification", ("0", "1"), False)
    assert record.max_seq_length == 128 and record.do_lower_case is False
    assert folder.vocabulary.sha256 == folders.vocabulary.vocab_fingerprint(tiny_vocab)
    for mine, read in zip(sst2.weights, folder.load_model().weights):
        np.testing.assert_array_equal(mine.numpy(), read.numpy())
    three = model(n=3)
    own = folders.FinetunedFolder.save(str(tmp_path / "own"), three, tiny_vocab,
                                       "classification", label_names="neg,neutral,pos")
    assert own.record.label_names == ("neg", "neutral", "pos")
    refusals = [
        ((sst2, "classification"), {}, "classification learns its labels from its train "
                                       "data: pass label_names, the model's outputs in order"),
        ((three, "sst2"), {}, "the model's head has 3 outputs, but sst2 has 2 labels (0, 1)"),
        ((sst2, "ner"), {"label_names": "O,B-X"}, "the model has a sequence_classification "
                                                  "head, but ner has a token_classification head"),
        ((model(classifier_head="mlp"), "sst2"), {}, "the model's sequence_classification "
                                                     "head is"),
        ((sst2, "sst2"), {"max_seq_length": 4096}, "max_seq_length=4096 exceeds the model's"),
        ((sst2, "sst2"), {"labels": "0,1"}, "FinetunedFolder.save: unknown option(s) labels;"),
        ((discriminator(), "sst2"), {}, "FinetunedFolder.save takes a FinetuningModel, got "
                                        "ElectraDiscriminator"),
        ((FinetuningModel(discriminator().encoder, "sequence_classification", num_labels=2),
          "sst2"), {}, f"{tiny_vocab} holds "),  # a 40-row embedding table
        # not built: its folder had been written, and could never be opened
        ((FinetuningModel(build_discriminator(encoder).encoder, "sequence_classification",
                          num_labels=2), "sst2"), {},
         "the model's sequence_classification head has no weights yet: build it "
         "(model.build()) or train it before saving"),
    ]
    for (m, task), options, message in refusals:
        with pytest.raises(ConfigError) as raised:
            folders.FinetunedFolder.save(str(tmp_path / "refused"), m, tiny_vocab, task,
                                         **options)
        assert str(raised.value).startswith(message), str(raised.value)
        assert not (tmp_path / "refused").exists()


def test_a_save_over_a_folder_stopped_midway_leaves_it_refusing_to_open(tmp_path, tiny_vocab,
                                                                         monkeypatch):
    """FinetunedFolder.save / PretrainingFolder.save over an earlier save, stopped at either
    of their writes (a kill, a full disk): the folder refuses to open. The weights had
    been written first: stopped before the record, the new weights opened under the old
    record's labels, silently. An unbuilt discriminator is refused before anything is
    written (its folder could never be opened)."""
    from electra_tf.folders import finetuned, pretraining
    from electra_tf.modeling.models import ElectraDiscriminator
    from electra_tf.tasks.model import FinetuningModel
    from electra_tf.text.vocab import load_vocab

    encoder = tiny_encoder_config(len(load_vocab(tiny_vocab)), num_hidden_layers=1)

    def three():
        m = FinetuningModel(build_discriminator(encoder).encoder, "sequence_classification",
                            num_labels=3)
        m.build()
        return m

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    path = str(tmp_path / "own")
    for module, write in ((finetuned, "write_finetuning_config"), (finetuned, "save_finetuned")):
        folders.FinetunedFolder.save(path, three(), tiny_vocab, "classification",
                                     label_names="neg,neutral,pos")
        with monkeypatch.context() as m:
            m.setattr(module, write, stopped)
            with pytest.raises(KeyboardInterrupt):
                folders.FinetunedFolder.save(path, three(), tiny_vocab, "classification",
                                             label_names="pos,neg,other")
        with pytest.raises((InputError, ConfigError)):
            folders.FinetunedFolder.open(path).load_model()
    path = str(tmp_path / "pre")
    for write in ("write_pretraining_config", "save_discriminator"):
        folders.PretrainingFolder.save(path, build_discriminator(encoder), tiny_vocab)
        with monkeypatch.context() as m:
            m.setattr(pretraining, write, stopped)
            with pytest.raises(KeyboardInterrupt):
                folders.PretrainingFolder.save(path, build_discriminator(encoder), tiny_vocab)
        with pytest.raises((InputError, ConfigError)) as raised:
            folders.PretrainingFolder.open(path).load_discriminator()
        # the Python API's word for its argument, as FinetunedFolder.open's (it had said
        # "checkpoint:", a command's flag)
        assert str(raised.value).startswith(f"model_dir: {path}/"), raised.value
    with pytest.raises(ConfigError, match="^the discriminator has no weights yet"):
        folders.PretrainingFolder.save(str(tmp_path / "unbuilt"), ElectraDiscriminator(encoder),
                                       tiny_vocab)
    assert not (tmp_path / "unbuilt").exists()


def test_undo_on_failure_removes_what_an_interrupted_block_added(tmp_path):
    """convert's and the transformers import's cleanup: Ctrl-C (or any error) midway
    leaves no half model: a new folder goes whole; an existing one loses what the block
    added and gets back what it replaced or removed (`convert --overwrite`)."""
    from electra_tf.core.fileio import atomic_write_text, undo_on_failure

    new = tmp_path / "new"
    with pytest.raises(KeyboardInterrupt):
        with undo_on_failure(str(new)):
            new.mkdir()
            (new / "discriminator.weights.h5").write_bytes(b"half")
            raise KeyboardInterrupt
    assert not new.exists()
    old = tmp_path / "old"
    (old / "checkpoints").mkdir(parents=True)
    (old / "checkpoints" / "ckpt-1.npz").write_bytes(b"run")
    (old / "notes.txt").write_text("mine")
    (old / "vocab.txt").write_text("old vocab")
    (old / "config.json").write_text("{}")
    with pytest.raises(OSError):
        with undo_on_failure(str(old)):
            with undo_on_failure(str(old)):  # nested (convert around the import)
                # one snapshot, the outer block's: a kill had left the inner one's too
                # (of the outer block's first files), named as the replaced model
                assert len([p for p in os.listdir(old) if p.startswith(".undo-")]) == 1
                (old / "parts").mkdir()
                (old / "parts" / "a").write_text("new")
                atomic_write_text(str(old / "vocab.txt"), "new vocab")  # replaced: comes back
            (old / "checkpoints" / "ckpt-0.npz").write_bytes(b"new")  # added deeper: goes
            os.remove(old / "config.json")  # removed: comes back
            (old / "notes.txt").write_text("rewritten")  # rewritten in place: stays
            raise OSError(28, "No space left on device")
    assert sorted(p.name for p in old.iterdir()) == [
        "checkpoints", "config.json", "notes.txt", "vocab.txt"]
    assert os.listdir(old / "checkpoints") == ["ckpt-1.npz"]
    assert (old / "vocab.txt").read_text() == "old vocab"
    assert (old / "config.json").read_text() == "{}"
    assert (old / "notes.txt").read_text() == "rewritten"
    with undo_on_failure(str(old)):  # nothing raised: what it replaced stays replaced
        atomic_write_text(str(old / "vocab.txt"), "newer")
    assert (old / "vocab.txt").read_text() == "newer"
    assert not [p for p in os.listdir(old) if p.startswith(".")]  # no snapshot left
    with undo_on_failure(str(new)):  # nothing raised: nothing undone
        new.mkdir()
    assert new.is_dir()


def test_the_names_of_saves_and_their_steps(tmp_path):
    from electra_tf.folders.files import latest_checkpoint_step, save_step
    from electra_tf.training.checkpoints import checkpoint_step, npz_checkpoint_files

    assert save_step("ckpt-12", prefix=True) == 12
    assert save_step("jax-ckpt-7.npz", prefix=True) == 7
    assert save_step("ckpt-12.index", prefix=True) is None
    assert save_step("ckpt-12.index", prefix=False) == 12
    assert save_step("ckpt-12", prefix=False) is None
    for name in ("ckpt-12.data-00000-of-00001", "jax-ckpt-7", "ckpt-7.npz", "ckpt-x.index",
                 "jax-ckpt-7.npz.tmp", "ckpt-3_temp"):
        assert save_step(name, prefix=True) is None and save_step(name, prefix=False) is None
    folder = tmp_path / "checkpoints"
    assert latest_checkpoint_step(str(tmp_path)) is None
    folder.mkdir()
    for name in ("ckpt-3.index", "ckpt-30.data-00000-of-00001", "jax-ckpt-9.npz",
                 "jax-ckpt-11.npz.tmp", "checkpoint"):
        (folder / name).write_bytes(b"")
    assert latest_checkpoint_step(str(tmp_path)) == 9
    assert [step for step, _ in npz_checkpoint_files(str(folder))] == [9]
    assert checkpoint_step(str(folder / "ckpt-3")) == 3
    assert checkpoint_step(str(folder / "jax-ckpt-9.npz")) == 9
    assert checkpoint_step(str(tmp_path / "ckpt-3")) is None


def test_atomic_write_puts_the_bytes_on_the_disk_before_the_rename(tmp_path, monkeypatch):
    """A rename can reach the disk before the data it names: a power loss then leaves an
    empty record or weights file under the final name. The temporary file is synced,
    then renamed, then the folder (the rename) synced."""
    from helpers import sync_log

    from electra_tf.core.fileio import atomic_write_text

    events = sync_log(monkeypatch)
    atomic_write_text(str(tmp_path / "record.json"), "{}\n")
    (rename,) = [e for e in events if e[0] == "rename"]
    tmp, final = rename[1], rename[2]
    assert final == str(tmp_path / "record.json")
    assert events == [("fsync", tmp), rename, ("fsync", str(tmp_path))]
    assert (tmp_path / "record.json").read_text() == "{}\n"


def test_a_folder_that_cannot_be_synced_is_not_an_error(tmp_path, monkeypatch):
    """Some file systems refuse fsync on a folder (EINVAL): the file itself was synced."""
    import errno

    from electra_tf.core import fileio

    real = os.fsync

    def no_folders(fd):
        if os.path.isdir(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(errno.EINVAL, "Invalid argument")
        real(fd)

    monkeypatch.setattr(os, "fsync", no_folders)
    fileio.atomic_write_text(str(tmp_path / "a.txt"), "a\n")
    assert (tmp_path / "a.txt").read_text() == "a\n"

    def broken_disk(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_disk)  # a failing disk is said, the old file kept
    with pytest.raises(OSError, match="Input/output error"):
        fileio.atomic_write_text(str(tmp_path / "a.txt"), "b\n")
    assert (tmp_path / "a.txt").read_text() == "a\n"
    assert os.listdir(tmp_path) == ["a.txt"]


def test_weights_changed_on_the_disk_are_refused(tmp_path):
    """Bits changed in a weights file's arrays (a disk, a copy) read without an error:
    the model had served or fine-tuned from the changed values. The file carries the
    sha256 of its arrays, which the loader checks; a file without one (written before,
    or by Keras itself) loads as it did."""
    import h5py

    d = discriminator(0)
    folders.pretraining.save_discriminator(str(tmp_path), d)
    path = str(tmp_path / folders.files.DISCRIMINATOR_WEIGHTS)
    folders.pretraining.load_discriminator(str(tmp_path))  # whole: loads
    with h5py.File(path, "r") as f:
        names = []
        f.visititems(lambda name, item: names.append(name)
                     if isinstance(item, h5py.Dataset) and item.size > 100 else None)
        offset = f[names[0]].id.get_offset()  # where its values lie in the file
    data = bytearray(open(path, "rb").read())
    data[offset + 8] ^= 0x01  # one bit of one float
    open(path, "wb").write(bytes(data))
    with pytest.raises(InputError, match=r"discriminator.weights.h5: its weights do not match "
                                         r"the checksum written with them \(a damaged copy"):
        folders.pretraining.load_discriminator(str(tmp_path))
    with h5py.File(path, "r+") as f:  # as a file written before the checksum was
        del f.attrs[folders.files.WEIGHTS_DIGEST]
    folders.pretraining.load_discriminator(str(tmp_path))


def test_an_output_of_a_long_name_is_written_and_a_killed_ones_leftover_named(tmp_path):
    """A user's output file is written under .tmp-XXXXXXXX.NAME (what a later write of
    NAME names of a killed one); a NAME so long that the temporary name would pass 255
    bytes is written under the plain temporary name."""
    from electra_tf.core import fileio

    long_name = "s" * 240 + ".txt"
    fileio.write_output_text(str(tmp_path / long_name), "x\n")
    assert (tmp_path / long_name).read_text() == "x\n"
    assert fileio.write_suffix(long_name) == "" and fileio.stale_writes(
        str(tmp_path / long_name)) == []
    (tmp_path / ".tmp-abcd_123.out.txt").write_text("half")
    (tmp_path / ".tmp-abcd_123.x.out.txt").write_text("another's")
    fileio.write_output_text(str(tmp_path / "out.txt"), "y\n")
    assert fileio.stale_write_note(str(tmp_path / "out.txt")) == [
        f"note: {tmp_path}/.tmp-abcd_123.out.txt (0.0 MiB) is what a stopped run writing "
        "out.txt left half-written; remove it"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".tmp-abcd_123.out.txt", ".tmp-abcd_123.x.out.txt", "out.txt", long_name]


def test_is_file_reads_files_and_pipes_not_folders(tmp_path):
    """One rule for every reader (GLUE, own-data splits, pre-training's record check):
    a local path is a file to read when it exists and is no folder (a pipe counts)."""
    from electra_tf.core.fileio import is_file

    (tmp_path / "a.tsv").write_text("x\n", encoding="utf-8")
    (tmp_path / "folder.tsv").mkdir()
    os.mkfifo(tmp_path / "pipe")
    assert is_file(str(tmp_path / "a.tsv")) and is_file(str(tmp_path / "pipe"))
    assert not is_file(str(tmp_path / "folder.tsv"))
    assert not is_file(str(tmp_path / "missing.tsv"))
