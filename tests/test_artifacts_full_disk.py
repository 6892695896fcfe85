"""A full disk while weights are written: one line and status 1, never a crash in h5py's
File.close (exit 139) or a SafetensorError traceback, and the file already there whole.

The in-process tests fake the free space; the others fill a real tmpfs (root only,
skipped elsewhere) and run the write in a child process, which is what crashed.
"""

from __future__ import annotations

import errno
import os
import shutil
import textwrap

import keras
import pytest
from helpers import (
    error_line,
    run_module,
    run_python,
    tiny_encoder_config,
    tiny_vocab_tokens,
    write_pretrained_dir,
    write_vocab,
)

from electra_tf import folders
from electra_tf.core import fileio
from electra_tf.modeling import build_discriminator

TINY = tiny_encoder_config(40, num_hidden_layers=1)


def _discriminator(seed: int):
    keras.utils.set_random_seed(seed)
    return build_discriminator(TINY)


def _no_space(monkeypatch, free: int = 1024):
    usage = shutil.disk_usage("/")
    monkeypatch.setattr(fileio.shutil, "disk_usage",
                        lambda path: usage._replace(free=free))


def test_weights_that_would_not_fit_are_refused_before_h5py_writes(tmp_path, monkeypatch):
    folders.pretraining.save_discriminator(str(tmp_path), _discriminator(0))
    path = tmp_path / folders.files.DISCRIMINATOR_WEIGHTS
    before = path.read_bytes()
    _no_space(monkeypatch)
    with pytest.raises(OSError) as raised:
        folders.pretraining.save_discriminator(str(tmp_path), _discriminator(1))
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(path)
    assert "No space left on device" in str(raised.value) and "KiB free" in str(raised.value)
    assert path.read_bytes() == before
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]


def _fill(folder, leave: int) -> None:
    """Fills the file system of `folder` up to `leave` bytes free."""
    free = shutil.disk_usage(folder).free
    with open(folder / "filler", "wb") as f:
        f.write(b"\0" * max(0, free - leave))


_SAVE = textwrap.dedent("""
    import sys
    sys.path.insert(0, "tests")
    from electra_tf import cli

    def main():
        import keras
        from helpers import tiny_encoder_config
        from electra_tf import folders
        from electra_tf.modeling import build_discriminator

        keras.utils.set_random_seed(int(sys.argv[2]))
        config = tiny_encoder_config(3000, num_hidden_layers=1)
        folders.pretraining.save_discriminator(sys.argv[1], build_discriminator(config))

    cli.run_cli(main)
""")


@pytest.fixture(scope="module")
def first_save(tmp_path_factory):
    """A folder of what _SAVE writes (the weights of its model, unseeded), saved once in
    this process: each test below copies it where the child's save is to replace it
    (the first save needs no process of its own; the second, which had crashed, has)."""
    folder = tmp_path_factory.mktemp("first_save")
    folders.pretraining.save_discriminator(
        str(folder), build_discriminator(tiny_encoder_config(3000, num_hidden_layers=1)))
    return folder


def _copy_first_save(first_save, folder) -> None:
    for name in os.listdir(first_save):
        shutil.copyfile(first_save / name, folder / name)


def _second_save_on_a_full_disk(small_mount, first_save, script: str) -> None:
    """Weights on a 1 MiB tmpfs (the first save's), filled to half their size, saved again
    with `script`: one line, status 1, the first file whole and no temporary left."""
    folder = small_mount("1m")
    _copy_first_save(first_save, folder)
    path = folder / folders.files.DISCRIMINATOR_WEIGHTS
    before = path.read_bytes()
    _fill(folder, leave=len(before) // 2)
    proc = run_python(["-c", script, str(folder), "1"])
    error_line(proc, f"{path}: No space left on device",
               "so those written before are whole", returncode=1)
    assert path.read_bytes() == before
    assert not [p for p in os.listdir(folder) if p.startswith(".tmp-")]


@pytest.mark.slow  # a real tmpfs (root); the faked-free-space test above runs by default
def test_a_full_disk_at_the_final_weights_is_one_line(small_mount, first_save):
    _second_save_on_a_full_disk(small_mount, first_save, _SAVE)


def test_the_weights_file_is_built_in_memory_and_reads_back_as_keras_writes_it(tmp_path):
    """The .weights.h5 is built in memory and written as bytes (a disk another process
    fills mid-write is then an OSError, not h5py's crash): with this Keras the in-memory
    store is there, and the file loads as model.save_weights' own does."""
    import numpy as np

    model = _discriminator(3)
    assert folders.files.weights_file_in_memory(model) is not None
    ours, keras_own = tmp_path / "ours.weights.h5", tmp_path / "keras.weights.h5"
    folders.files.save_weights(model, str(ours))
    model.save_weights(str(keras_own))
    for path in (ours, keras_own):
        again = _discriminator(4)
        again.load_weights(str(path))
        for a, b in zip(again.weights, model.weights):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=b.path)


_SAVE_UNCHECKED = _SAVE.replace(
    "    keras.utils.set_random_seed",
    "    folders.files.check_free_space = lambda *args: None  # filled after the check\n"
    "    keras.utils.set_random_seed")


@pytest.mark.slow  # a real tmpfs (root)
def test_a_disk_filled_during_the_weights_write_is_one_line(small_mount, first_save):
    """Another process filling the disk after the free-space check: h5py had crashed
    the process in File.close (exit 139) with a 40-line dump."""
    assert "filled after the check" in _SAVE_UNCHECKED
    _second_save_on_a_full_disk(small_mount, first_save, _SAVE_UNCHECKED)


@pytest.mark.slow  # a real tmpfs (root)
def test_convert_to_hf_on_a_full_disk_is_one_line(small_mount, tmp_path):
    pytest.importorskip("safetensors")
    vocab = write_vocab(tmp_path / "vocab.txt", tiny_vocab_tokens())
    model_dir = write_pretrained_dir(tmp_path / "model", vocab)
    folder = small_mount("1m")
    out = folder / "hf"
    proc = run_module("electra_tf.convert", "--to=hf", f"--model_dir={model_dir}",
                      f"--output={out}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    before = {p: (out / p).read_bytes() for p in os.listdir(out)}
    _fill(folder, leave=len(before["model.safetensors"]) // 2)
    write_pretrained_dir(tmp_path / "model", vocab, seed=1)
    proc = run_module("electra_tf.convert", "--to=hf", f"--model_dir={model_dir}",
                      f"--output={out}", "--overwrite")
    error_line(proc, f"{out / 'model.safetensors'}: No space left on device",
               "so those written before are whole", returncode=1)
    assert {p: (out / p).read_bytes() for p in os.listdir(out)} == before


def _file_size_limit(nbytes: int):
    """A child's RLIMIT_FSIZE (ulimit -f, a batch system's limit): a write past it fails
    with EFBIG (Python ignores the SIGXFSZ that would kill the process)."""
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))


@pytest.mark.slow  # a fresh process; run_cli's EFBIG line is tested in process by default
def test_a_file_size_limit_at_the_final_weights_is_one_line(tmp_path, first_save):
    """EFBIG from h5py had been a 48-line traceback; TensorFlow's (an OutOfRangeError
    at a checkpoint, an export, a record file) one of 72."""
    _copy_first_save(first_save, tmp_path)
    path = tmp_path / folders.files.DISCRIMINATOR_WEIGHTS
    before = path.read_bytes()
    proc = run_python(["-c", _SAVE, str(tmp_path), "1"],
                      preexec_fn=_file_size_limit(len(before) // 2))
    error_line(proc, "File too large", "lift the file size limit", returncode=1)
    assert path.read_bytes() == before
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]


@pytest.mark.slow
def test_a_file_size_limit_at_a_record_file_is_one_line(tmp_path, tiny_corpus, tiny_vocab):
    out = tmp_path / "records"
    proc = run_python(["-m", "electra_tf.build_pretraining_data", f"--corpus={tiny_corpus}",
                       f"--vocab_file={tiny_vocab}", f"--output_dir={out}",
                       "--max_seq_length=32", "--num_shards=2"],
                      preexec_fn=_file_size_limit(4096))
    line = error_line(proc, "File too large", "lift the file size limit", returncode=1)
    assert line.endswith("fix the folder, then rerun)"), line  # (no training to resume)
    assert not out.exists() or not [p for p in os.listdir(out) if "tfrecord" in p]


def test_a_lock_file_the_disk_has_no_room_for_is_named_and_not_left(tmp_path):
    """A full disk at the lock file's holder line (the first write of every command that
    writes a folder) had been `error: No space left on device`, naming no file, and had
    left a 0-byte .lock. EFBIG from a file size limit of 0 bytes fails the same write."""
    folder = tmp_path / "model"
    proc = run_python(["-c", "import sys\nfrom electra_tf.core.fileio import FolderLock\n"
                       "try:\n    FolderLock(sys.argv[1], '--model_dir').__enter__()\n"
                       "except OSError as e:\n    print(e.errno, e.filename)\n", str(folder)],
                      preexec_fn=_file_size_limit(0))
    assert proc.returncode == 0 and proc.stdout.split() == [
        str(errno.EFBIG), str(folder / ".lock")], proc.stderr[-2000:]
    assert os.listdir(folder) == []


def test_weights_that_fit_are_written_though_the_bound_would_not_fit(tmp_path, monkeypatch):
    """The free-space check asked for weights_file_bytes, a bound about twice a tiny
    model's file: a run whose final weights would have fit stopped at them. It asks for
    the file's own size now (built in memory first)."""
    model = _discriminator(0)
    size = len(fileio_bytes := folders.files.weights_file_in_memory(model).getvalue())
    assert folders.files.weights_file_bytes(model) > size + 4096  # the bound is loose
    _no_space(monkeypatch, free=size + 1024)
    folders.pretraining.save_discriminator(str(tmp_path), model)
    assert (tmp_path / folders.files.DISCRIMINATOR_WEIGHTS).read_bytes() == fileio_bytes
    _no_space(monkeypatch, free=size - 1)
    with pytest.raises(OSError) as raised:
        folders.pretraining.save_discriminator(str(tmp_path), _discriminator(1))
    assert raised.value.errno == errno.ENOSPC
    assert (tmp_path / folders.files.DISCRIMINATOR_WEIGHTS).read_bytes() == fileio_bytes
