"""Raw text -> TFRecords -> tf.data: determinism, stats, errors, round trip."""

import dataclasses
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf
from helpers import decode, error_line, make_corpus, run_module, tiny_vocab_tokens, write_vocab

from electra_tf.core.errors import InputError, VocabError
from electra_tf.core.fileio import expand_files
from electra_tf.data import builder as builder_lib
from electra_tf.data import features as features_lib
from electra_tf.data.builder import STATS_FILE, BuildOptions, build_pretraining_data
from electra_tf.data.masking import MaskingConfig
from electra_tf.data.pipeline import check_records, pretraining_dataset
from electra_tf.objectives.corruption import scatter_at_positions
from electra_tf.text.tokenizer import Tokenizer
from electra_tf.text.vocab_builder import build_vocab


def unmask(batch):
    """The original input_ids of a masked batch, as a NumPy [batch, L] array."""
    return np.asarray(scatter_at_positions(batch["input_ids"], batch["masked_lm_positions"],
                                           batch["masked_lm_ids"], batch["masked_lm_weights"]))


def options(corpus, vocab, out, **kw):
    return BuildOptions(files=(corpus,), vocab_file=vocab, output_dir=str(out), **kw)


def shard_bytes(out):
    return {f: open(os.path.join(out, f), "rb").read()
            for f in sorted(os.listdir(out)) if f.startswith(features_lib.SHARD_PREFIX)}


def read_all(pattern, L):
    ds = tf.data.TFRecordDataset(sorted(tf.io.gfile.glob(pattern)))
    return [features_lib.parse_examples(tf.reshape(r, [1]), L) for r in ds]


@pytest.mark.slow  # three builds, one of them with two worker processes (11 s)
def test_same_bytes_for_same_seed_any_process_count(tiny_corpus, tiny_vocab, tmp_path,
                                                    capsys):
    a = build_pretraining_data(options(tiny_corpus, tiny_vocab, tmp_path / "a",
                                       max_seq_length=32, num_shards=3, seed=7))
    capsys.readouterr()
    b = build_pretraining_data(options(tiny_corpus, tiny_vocab, tmp_path / "b",
                                       max_seq_length=32, num_shards=3, seed=7,
                                       num_processes=2))
    # the workers' progress reaches 100% (it had stayed at 0% on a small corpus)
    assert f"{b['lines']:,}/{b['lines']:,} lines (100.0%)" in capsys.readouterr().err
    c = build_pretraining_data(options(tiny_corpus, tiny_vocab, tmp_path / "c",
                                       max_seq_length=32, num_shards=3, seed=8))
    assert shard_bytes(tmp_path / "a") == shard_bytes(tmp_path / "b")
    assert len(shard_bytes(tmp_path / "a")) == 3
    assert shard_bytes(tmp_path / "a") != shard_bytes(tmp_path / "c")
    assert a["examples"] == b["examples"] and a["examples"] > 50
    del c


def test_a_long_document_is_read_and_built_a_piece_at_a_time(tiny_corpus, tiny_vocab,
                                                              tmp_path, monkeypatch, capsys):
    """A document had been held whole (a file without blank lines: 24 times its size in
    memory, and no progress line until it was done); it is read in pieces of at most
    _TOKENIZE_BATCH_LINES lines, the examples the same bytes as the original's line by line."""
    lines = [x for x in open(tiny_corpus, encoding="utf-8").read().splitlines() if x.strip()]
    one_doc = tmp_path / "one_doc.txt"
    one_doc.write_text("\n".join(lines) + "\n\n" + open(tiny_corpus, encoding="utf-8").read(),
                       encoding="utf-8")
    pieces = list(builder_lib.iter_document_pieces([str(one_doc)], max_lines=7))
    assert max(len(p) for _, p, _ in pieces) == 7
    assert [(i, d) for i, d in builder_lib.iter_documents([str(one_doc)])] == [
        (i, [x for j, p, _ in pieces if j == i for x in p])
        for i in sorted({i for i, _, last in pieces if last})]
    assert builder_lib.iter_documents([str(one_doc)]).__next__()[1] == lines
    whole = build_pretraining_data(options(str(one_doc), tiny_vocab, tmp_path / "whole",
                                           max_seq_length=32, num_shards=3))
    monkeypatch.setattr(builder_lib, "_TOKENIZE_BATCH_LINES", 7)
    sizes, encode = [], Tokenizer.encode

    def counted(self, texts, *args, **kwargs):  # the real encode, its batches counted
        sizes.append(len(texts))
        return encode(self, texts, *args, **kwargs)

    monkeypatch.setattr(Tokenizer, "encode", counted)
    capsys.readouterr()
    pieced = build_pretraining_data(options(str(one_doc), tiny_vocab, tmp_path / "pieced",
                                            max_seq_length=32, num_shards=3))
    # the build's batches: pieces of at most 7 lines, gathered to 7 or more (the 730-line
    # document had been one batch); the [UNK] check before samples the first 1,000 lines
    assert sizes[0] == 1000 and len(sizes) > 100 and max(sizes[1:]) <= 13, sizes
    assert shard_bytes(tmp_path / "whole") == shard_bytes(tmp_path / "pieced")
    assert {k: whole[k] for k in ("documents", "lines", "examples", "tokens")} == \
        {k: pieced[k] for k in ("documents", "lines", "examples", "tokens")}
    assert whole["documents"] == 1 + sum(1 for _ in builder_lib.iter_documents([tiny_corpus]))


def test_stats_json_and_records(tiny_corpus, tiny_vocab, tmp_path):
    out = tmp_path / "out"
    stats = build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32,
                                           num_shards=2))
    on_disk = json.load(open(out / builder_lib.STATS_FILE))
    assert on_disk["examples"] == stats["examples"]
    text = open(tiny_corpus).read()
    assert stats["documents"] == 300
    assert stats["lines"] == sum(1 for line in text.splitlines() if line.strip())
    assert stats["tokens"] == sum(len(line.split()) for line in text.splitlines())
    assert stats["unk_rate"] == 0.0
    records = read_all(str(out / "pretrain_data.tfrecord*"), 32)
    assert len(records) == stats["examples"]
    real = sum(int(r["input_mask"].numpy().sum()) for r in records)
    assert real == stats["example_tokens"]
    assert stats["fill_ratio"] == pytest.approx(real / (32 * len(records)))
    # Every token of the corpus is in an example, or counted as truncated.
    special = sum(int(np.isin(r["input_ids"].numpy(), [101, 102]).sum()) for r in records)
    assert real - special + stats["truncated_tokens"] == stats["tokens"]
    for r in records:  # int64 features of length L under the original keys
        assert set(r) == {"input_ids", "input_mask", "segment_ids"}


def test_the_summary_line_counts_in_words(tiny_vocab, tmp_path, capsys):
    """"1 examples from 1 documents / 1 lines" had read as plurals of one."""
    corpus = tmp_path / "one.txt"
    corpus.write_text("the model reads a token\n")
    build_pretraining_data(options(str(corpus), tiny_vocab, tmp_path / "out",
                                   max_seq_length=16, num_shards=1))
    err = capsys.readouterr().err
    assert "[build_pretraining_data] 1 example from 1 document / 1 line in " in err
    # the progress reaches 100% before the summary (a small corpus had shown 0% alone)
    assert "[build_pretraining_data] 1/1 lines (100.0%)" in err
    # once, and in words (it had been printed twice, the second forced: "1 examples")
    [last] = [line for line in err.splitlines() if "1/1 lines (100.0%)" in line]
    assert last.endswith(", 1 example"), last


def test_round_trip_vocab_records_pipeline_text(tmp_path):
    # Short documents (<= 4 lines of <= 8 words) with L = 64 never truncate, so
    # the examples, read back in order, spell the corpus exactly.
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(make_corpus(120, seed=4), encoding="utf-8")
    vocab = str(tmp_path / "vocab.txt")
    build_vocab(str(corpus), 300, vocab, min_count=2)
    out = tmp_path / "records"
    stats = build_pretraining_data(options(str(corpus), vocab, out, max_seq_length=64))
    assert stats["truncated_tokens"] == 0
    tok = Tokenizer(vocab)
    masking = MaskingConfig.from_tokenizer(tok, 0.15, 9)
    ds = pretraining_dataset(str(out / "pretrain_data.tfrecord*"), 1, 64, masking,
                             is_training=False)
    words, masked = [], 0
    for batch in ds:
        ids = unmask(batch)[0]
        masked += int((batch["input_ids"][0].numpy() == tok.mask_id).sum())
        words.extend(decode(tok, ids[: int(batch["input_mask"][0].numpy().sum())]).split())
    assert masked > 0.1 * len(words)  # the pipeline did mask; unmask undid it
    assert words == open(corpus).read().split()


def test_interrupted_build_leaves_no_complete_looking_shard(tiny_corpus, tiny_vocab, tmp_path,
                                                            monkeypatch):
    calls = {"n": 0}
    real = features_lib.serialize

    def failing(features):
        calls["n"] += 1
        if calls["n"] > 20:
            raise KeyboardInterrupt("simulated kill")
        return real(features)

    monkeypatch.setattr(features_lib, "serialize", failing)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32,
                                       num_shards=2))
    assert not out.exists()  # the folder it created is removed, empty


def test_a_rerun_removes_what_a_killed_build_left(tiny_corpus, tiny_vocab, tmp_path, capsys):
    # A kill -9 runs no cleanup: hidden partial shards stay, and a glob of the
    # records ("*tfrecord*": TensorFlow's glob matches hidden names) took them in.
    out = tmp_path / "out"
    out.mkdir()
    left = [out / f".{features_lib.shard_name(0, 1)}.tmp-0badf00d",
            out / ".pretrain_data_stats.json.tmp-0badf00d"]
    for f in left:
        f.write_bytes(b"\x00" * 100)
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32))
    assert not any(f.exists() for f in left)
    assert sorted(os.listdir(out)) == [features_lib.shard_name(0, 1), STATS_FILE]
    assert "removed 2 partial file(s)" in capsys.readouterr().err


def test_a_build_writing_the_folder_refuses_a_second_and_keeps_its_files(
        tiny_corpus, tiny_vocab, tmp_path):
    """A second build on a folder in use would have removed the first's temporary shards
    as an interrupted build's: it is refused in one line, and the folder keeps them."""
    from electra_tf.core.fileio import FolderLock

    out = tmp_path / "out"
    running = out / f".{features_lib.shard_name(0, 1)}.tmp-0badf00d"  # the first's
    with FolderLock(str(out), "--output_dir"):
        running.write_bytes(b"\x00" * 100)
        with pytest.raises(InputError, match=rf"^--output_dir {out} is in use by host "):
            build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32))
        assert sorted(os.listdir(out)) == [".lock", running.name]
    running.unlink()
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32))
    assert sorted(os.listdir(out)) == [features_lib.shard_name(0, 1), STATS_FILE]  # no .lock


def folder_bytes(out):
    return {f: (out / f).read_bytes() for f in os.listdir(out)}


def earlier_build(corpus, vocab, out):
    """A build of 2 shards at L 32 in `out`, which the next build replaces; its files."""
    build_pretraining_data(options(corpus, vocab, out, max_seq_length=32, num_shards=2))
    return folder_bytes(out)


def test_a_folder_where_the_build_writes_a_file_is_refused_before_anything_is_written(
        tiny_corpus, tiny_vocab, tmp_path):
    """A folder named as a shard, the stats, the marker or the lock: an IsADirectoryError
    traceback, after the earlier build's stats were removed and shards replaced."""
    for i, name in enumerate((features_lib.shard_name(1, 2), STATS_FILE,
                              features_lib.UNFINISHED_FILE, ".lock")):
        out = tmp_path / f"out{i}"
        earlier_build(tiny_corpus, tiny_vocab, out)
        if (out / name).exists():
            (out / name).unlink()
        before = folder_bytes(out)
        (out / name).mkdir()
        with pytest.raises(InputError) as raised:
            build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32,
                                           num_shards=2, overwrite=True))
        assert str(raised.value) == (f"{out / name} is a folder where the build writes a "
                                     "file; move it away, then rerun"), name
        (out / name).rmdir()
        assert folder_bytes(out) == before, name


def test_more_processes_than_cpus_build_with_one_per_cpu(tiny_corpus, tiny_vocab, tmp_path,
                                                         monkeypatch, capsys):
    """--num_processes equal to a shard count of 1,000 had spawned TensorFlow workers until
    memory ran out: the build takes one per CPU it may use, and says so."""
    monkeypatch.setattr(builder_lib, "usable_cpus", lambda: 1)
    build_pretraining_data(options(tiny_corpus, tiny_vocab, tmp_path / "out",
                                   max_seq_length=32, num_shards=3, num_processes=3))
    assert "note: --num_processes=3 is more than the 1 CPU(s) this process may use: 1 " \
        "processes build the shards (the same bytes)" in capsys.readouterr().err
    assert len(shard_bytes(tmp_path / "out")) == 3


def _two_process_build(tmp_path, **popen):
    """build_pretraining_data started on a 600,000-line corpus (seconds of building)
    with --num_processes=2, its stderr a text pipe; `popen`: Popen's other arguments."""
    import random
    import subprocess

    from helpers import popen_python

    words = [t for t in tiny_vocab_tokens() if t.isalpha()]
    rng = random.Random(0)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(" ".join(rng.choice(words) for _ in range(12)) + "\n"
                              + ("\n" if i % 5 == 0 else "") for i in range(600_000)))
    vocab = write_vocab(tmp_path / "vocab.txt", tiny_vocab_tokens())
    return popen_python(["-m", "electra_tf.build_pretraining_data", f"--corpus={corpus}",
                         f"--vocab_file={vocab}", f"--output_dir={tmp_path / 'out'}",
                         "--max_seq_length=16", "--num_shards=4", "--num_processes=2"],
                        stderr=subprocess.PIPE, text=True, **popen)


@pytest.mark.slow
def test_ctrl_c_to_a_multi_process_build_is_one_line(tmp_path):
    """Ctrl-C reaches the build's process group: its workers had each printed the start of
    a KeyboardInterrupt traceback ("Process SpawnPoolWorker-2:") before the one line."""
    import signal

    from helpers import signal_after

    proc = _two_process_build(tmp_path, start_new_session=True)
    proc.send_signal = lambda sig: os.killpg(proc.pid, sig)  # the terminal's Ctrl-C
    [(code, stderr)] = signal_after([proc], r"\] [1-9][\d,]*/[\d,]+ lines",
                                    sig=signal.SIGINT)
    assert code == 130, stderr[-3000:]
    assert "Process " not in stderr and "Traceback" not in stderr, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == "interrupted; run the same command again to " \
        "finish", stderr[-3000:]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_build_process_killed_mid_build_is_one_line_not_a_hang(tmp_path):
    """A worker killed mid-build (the OOM killer, kill -9): multiprocessing's Pool had
    replaced it silently, its jobs never finished, and the build waited forever with its
    progress frozen. Now one line, status 1, and no output folder."""
    import signal

    from helpers import signal_after

    proc = _two_process_build(tmp_path)

    killed = []

    def kill_a_worker(sig):  # the first call: a worker; then (signal_after's clean-up) the build
        if proc.poll() is not None:
            return
        workers = [int(name) for name in os.listdir("/proc") if name.isdigit()
                   and _parent_pid(int(name)) == proc.pid and b"spawn_main" in _cmdline(name)]
        os.kill(proc.pid if killed else workers[0], sig)
        killed.append(sig)

    proc.send_signal = kill_a_worker
    [(code, stderr)] = signal_after([proc], r"\] [1-9][\d,]*/[\d,]+ lines",
                                    sig=signal.SIGKILL)
    assert code == 1, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert stderr.strip().splitlines()[-1].startswith("error: a build process (pid "), \
        stderr[-3000:]
    assert "was killed by SIGKILL before its shards were done" in stderr, stderr[-3000:]
    assert not (tmp_path / "out").exists()


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def test_a_failed_overwrite_keeps_the_earlier_build_whole(tiny_corpus, tiny_vocab, tmp_path,
                                                          monkeypatch):
    # The stats are written (where a full disk would fail) before any shard is
    # renamed: the earlier build's shards and stats stay together.
    out = tmp_path / "out"
    before = earlier_build(tiny_corpus, tiny_vocab, out)
    real_open = open

    def full_disk(path, *args, **kwargs):
        if STATS_FILE in os.fspath(path) and args and "w" in args[0]:
            raise OSError(28, "No space left on device")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", full_disk)
    with pytest.raises(OSError, match="No space"):
        build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=64,
                                       num_shards=3, overwrite=True))
    monkeypatch.undo()
    assert folder_bytes(out) == before


def test_a_full_disk_at_the_marker_leaves_the_earlier_build_as_it_was(
        tiny_corpus, tiny_vocab, tmp_path, monkeypatch):
    """The disk filling while the unfinished-marker was written had left it empty
    beside the earlier build, which every reader then refused ("some may be of the
    earlier build"), with an error naming no file."""
    out = tmp_path / "out"
    before = earlier_build(tiny_corpus, tiny_vocab, out)
    real_open = open

    def full_disk(path, *args, **kwargs):
        f = real_open(path, *args, **kwargs)
        if os.fspath(path).endswith(features_lib.UNFINISHED_FILE):
            f.close()  # created, then no room for its line
            raise OSError(28, "No space left on device")
        return f

    monkeypatch.setattr("builtins.open", full_disk)
    with pytest.raises(OSError, match="No space") as e:
        build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32,
                                       num_shards=2, seed=3, overwrite=True))
    monkeypatch.undo()
    assert e.value.filename == str(out / features_lib.UNFINISHED_FILE)
    assert folder_bytes(out) == before
    assert len(check_records(str(out / "pretrain_data.tfrecord*"), 32)) == 2


def test_a_wildcard_leaves_out_the_hidden_partial_shards_a_killed_build_leaves(tmp_path):
    """tf.io.gfile's glob matched `DIR/*tfrecord*` to the hidden partial shards of a
    killed build (.pretrain_data.tfrecord-*.tmp-*), which then read as data; a
    pattern whose name starts with "." still names them, as in a shell."""
    visible = tmp_path / "pretrain_data.tfrecord-00000-of-00001"
    hidden = tmp_path / ".pretrain_data.tfrecord-00000-of-00001.tmp-1234abcd"
    visible.write_bytes(b"")
    hidden.write_bytes(b"")
    for glob_fn, isfile in ((tf.io.gfile.glob, lambda p: not tf.io.gfile.isdir(p)),
                            (None, None)):
        fs = {} if glob_fn is None else {"glob_fn": glob_fn, "isfile": isfile}
        assert expand_files(f"{tmp_path}/*tfrecord*", "TFRecord", **fs) == [str(visible)]
        assert expand_files(f"{tmp_path}/.*tfrecord*", "TFRecord", **fs) == [str(hidden)]
        assert expand_files(str(hidden), "TFRecord", **fs) == [str(hidden)]


def _unreadable_run(path, args):
    """Runs `python -m electra_tf.build_pretraining_data args` with `path` unreadable
    to it (chmod 000; as root, without the capabilities that read any file)."""
    import shutil
    import subprocess
    import sys

    from helpers import REPO, child_env

    os.chmod(path, 0)
    prefix = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("as root, an unreadable file needs setpriv")
        caps = "-dac_override,-dac_read_search"
        prefix = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}"]
    try:
        return subprocess.run(prefix + [sys.executable, "-m",
                                        "electra_tf.build_pretraining_data", *args],
                              cwd=REPO, env=child_env(), capture_output=True, text=True,
                              timeout=300)
    finally:
        os.chmod(path, 0o644)


@pytest.mark.parametrize("which", ["corpus", "vocab"])
def test_an_unreadable_corpus_or_vocab_file_is_one_line(which, tiny_corpus, tiny_vocab,
                                                        tmp_path):
    """Its permissions had fallen through to the file-system error of a full disk (exit
    1, with a hint about checkpoints): the corpus check opened it before the readable
    check did."""
    import shutil

    corpus, vocab = tmp_path / "c.txt", tmp_path / "vocab.txt"
    shutil.copy(tiny_corpus, corpus)
    shutil.copy(tiny_vocab, vocab)
    out = tmp_path / "out"
    proc = _unreadable_run(corpus if which == "corpus" else vocab,
                           [f"--corpus={corpus}", f"--vocab_file={vocab}",
                            f"--output_dir={out}", "--max_seq_length=32"])
    if which == "corpus":
        error_line(proc, f"corpus file {corpus}: cannot read it (Permission denied)")
    else:
        error_line(proc, f"vocab file {vocab}: cannot read it (Permission denied)")
    assert not out.exists() or not os.listdir(out)


def test_files_and_their_pages_are_read_in_an_order_the_seed_shuffles(tiny_vocab, tmp_path):
    """As the original's builders shuffle the corpus files (random.shuffle): files were
    read sorted by name, so every shard ran through books_* before wiki_*, and training
    met its sources one after the other. The order is the seed's, whatever the number
    of processes (test_same_bytes_for_same_seed_any_process_count)."""
    files = []
    for source in ("books", "news", "wiki"):
        for k in range(4):
            path = tmp_path / f"{source}_{k}.txt"
            path.write_text(f"{source} {k} first line.\nsecond line.\n")
            files.append(str(path))
    opts = BuildOptions(files=tuple(files), vocab_file=tiny_vocab, output_dir=str(tmp_path),
                        seed=3)
    order = [doc[0] for _, doc in builder_lib._documents(opts)]
    assert sorted(order) == sorted(f"{s} {k} first line." for s in ("books", "news", "wiki")
                                   for k in range(4))
    assert [line.split()[0] for line in order[:4]] != ["books"] * 4  # sources interleaved
    assert order == [doc[0] for _, doc in builder_lib._documents(opts)]  # the seed's
    other = [doc[0] for _, doc in builder_lib._documents(dataclasses.replace(opts, seed=4))]
    assert other != order


def test_a_build_stopped_while_it_renames_marks_its_folder_until_a_rebuild(
        tiny_corpus, tiny_vocab, tmp_path, monkeypatch):
    # An --overwrite build with the shard count of the earlier one, stopped after its
    # first rename: every name is of one count, but shard 0 is the new build's and
    # shard 1 the old one's. The marker it leaves has every reader refuse the folder.
    from electra_tf.data import packed
    from electra_tf.data.tfrecord_reader import LOCAL_FILES

    out = tmp_path / "out"
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32,
                                   num_shards=2))
    before = shard_bytes(out)
    real_replace, renamed = os.replace, []

    def stopped(src, dst):
        if renamed:
            raise KeyboardInterrupt  # a Ctrl-C
        renamed.append(dst)
        real_replace(src, dst)

    monkeypatch.setattr(builder_lib.os, "replace", stopped)
    with pytest.raises(KeyboardInterrupt) as stop:
        build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32,
                                       num_shards=2, seed=5, overwrite=True))
    monkeypatch.undo()
    # what the command says (cli.run_cli prints it): "run the same command again" alone
    # had been refused by the rerun, which needs --overwrite here
    assert str(stop.value) == (
        "interrupted while the shards were renamed into place (pretrain_data.unfinished "
        "marks the folder); run the same command again with --overwrite to finish")
    after = shard_bytes(out)
    assert sorted(after) == sorted(before)  # the same names: their counts cannot tell
    assert [after[f] == before[f] for f in sorted(after)] == [False, True]
    assert sorted(os.listdir(out)) == sorted(before) + [features_lib.UNFINISHED_FILE]
    line = (f"--train_data matches shards in {out}, where a build_pretraining_data run was "
            f"stopped while it replaced them ({features_lib.UNFINISHED_FILE}): some may be "
            "of the earlier build; run it again with --overwrite")
    pattern = f"{out}/pretrain_data.tfrecord*"
    for files in (None, LOCAL_FILES):  # the tf.data input and the NumPy one
        with pytest.raises(InputError) as e:
            check_records(pattern, 32, "--train_data", files)
        assert str(e.value) == line
    with pytest.raises(InputError, match=r"^--records matches shards in .* stopped while"):
        packed.pack(pattern, str(tmp_path / "p.packed"), progress=False)
    # without --overwrite (it had said "already holds pre-training data", as of a whole one)
    with pytest.raises(InputError, match=rf"^{out} holds the shards of a build that stopped "
                       rf"midway \({features_lib.UNFINISHED_FILE}\); pass --overwrite to "
                       r"build them again, or choose another --output_dir$"):
        build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32,
                                       num_shards=2))
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32,
                                   num_shards=2, seed=5, overwrite=True))
    assert sorted(os.listdir(out)) == sorted(before) + [STATS_FILE]
    assert check_records(pattern, 32) == [str(out / f) for f in sorted(before)]


def test_bytes_that_are_not_utf8_past_the_checked_start_are_named(tiny_vocab, tmp_path):
    """The check of a file's first 64 KiB cannot see a Latin-1 line further in, which
    had become U+FFFD ([UNK]) in the records, exit 0; its file:line is named now, and
    nothing is written (as the original's strict tf.io.gfile read)."""
    corpus = tmp_path / "mixed.txt"
    corpus.write_bytes(b"the model reads a token\n" * 3000 + b"un caf\xe9 noir\n")
    out = tmp_path / "out"
    with pytest.raises(InputError) as raised:
        build_pretraining_data(options(str(corpus), tiny_vocab, out, max_seq_length=32))
    assert str(raised.value).startswith(
        f"{corpus}:3001: not UTF-8 text (invalid continuation byte at byte 6 of the line: "
        "b'un caf\\xe9 noir\\n'); convert the file to UTF-8"), raised.value
    assert not out.exists()


def test_a_corpus_without_tokens_is_refused(tiny_vocab, tmp_path):
    corpus = tmp_path / "zw.txt"
    corpus.write_text("\u200b\n\n\u200b \u0301\n", encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(InputError, match="no examples"):
        build_pretraining_data(options(str(corpus), tiny_vocab, out, max_seq_length=32))
    assert not out.exists()


def test_a_negative_seed_is_refused(tiny_corpus, tiny_vocab, tmp_path):
    """Python's Random takes |seed|: --seed=-1 had built the very shards of --seed=1."""
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"^seed must be >= 0, got -1$"):
        build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32,
                                       seed=-1))
    assert not out.exists()


def test_a_corpus_mostly_cut_off_gets_a_warning(tiny_corpus, tiny_vocab, tmp_path, capsys):
    corpus = tmp_path / "cr.txt"  # old Mac line ends: the whole file is one line
    corpus.write_bytes(open(tiny_corpus, "rb").read().replace(b"\n", b"\r"))
    build_pretraining_data(options(str(corpus), tiny_vocab, tmp_path / "out", max_seq_length=32))
    err = capsys.readouterr().err
    assert "did not fit an example of 32" in err and "old Mac line ends" in err, err


def test_a_corpus_of_sentences_mostly_cut_off_names_the_length(tiny_corpus, tiny_vocab,
                                                               tmp_path, capsys):
    """A one-sentence-a-line corpus cut by a short --max_seq_length had been asked whether
    it held very long lines."""
    corpus = tmp_path / "sentences.txt"  # a document's lines joined: a sentence a line
    documents = open(tiny_corpus, encoding="utf-8").read().strip().split("\n\n")
    corpus.write_text("\n\n".join(" ".join(d.split("\n")) for d in documents) + "\n",
                      encoding="utf-8")
    build_pretraining_data(options(str(corpus), tiny_vocab, tmp_path / "out", max_seq_length=8))
    err = capsys.readouterr().err
    assert re.search(r"tokens did not fit an example of 8 and were dropped: its lines hold "
                     r"\d+ tokens on average: give a larger --max_seq_length \(the paper's 128 "
                     r"or 512\)", err), err
    # One very long line among short ones: its lines are short on average, and the
    # long line is what was cut (the length had been blamed)
    text = open(tiny_corpus, encoding="utf-8").read()
    outlier = tmp_path / "outlier.txt"
    words = text.split()
    outlier.write_text(text + "\n" + " ".join(words + words[:len(words) // 2]) + "\n",
                       encoding="utf-8")
    build_pretraining_data(options(str(outlier), tiny_vocab, tmp_path / "out2",
                                   max_seq_length=32))
    err = capsys.readouterr().err
    assert "did not fit an example of 32" in err and "very long lines" in err, err


def test_more_shards_than_open_files_is_refused_or_the_limit_raised(tiny_corpus, tiny_vocab,
                                                                    tmp_path, monkeypatch):
    resource = pytest.importorskip("resource")
    calls = []
    monkeypatch.setattr(resource, "getrlimit", lambda _: (256, 300))
    monkeypatch.setattr(resource, "setrlimit", lambda _, value: calls.append(value))
    from electra_tf.data import builder

    monkeypatch.setattr(builder, "usable_cpus", lambda: 4)
    with pytest.raises(InputError, match="keeps 300 shard files open in each process"):
        build_pretraining_data(options(tiny_corpus, tiny_vocab, tmp_path / "a",
                                       num_shards=600, num_processes=2))
    # more processes would fit: said; none would (at most 4 CPUs): fewer shards (50 + 64
    # had been called "above the limit of 100" with "raise --num_processes")
    with pytest.raises(InputError, match=r"300 shard files .*; raise --num_processes"):
        build_pretraining_data(options(tiny_corpus, tiny_vocab, tmp_path / "a",
                                       num_shards=600, num_processes=2))
    monkeypatch.setattr(resource, "getrlimit", lambda _: (64, 100))
    with pytest.raises(InputError, match=r"keeps 200 shard files open in each process, 264 "
                       r"open files .* above this system's limit of 100; give fewer "
                       r"--num_shards \(at most 4 processes run"):
        build_pretraining_data(options(tiny_corpus, tiny_vocab, tmp_path / "a",
                                       num_shards=200, num_processes=1))
    monkeypatch.setattr(resource, "getrlimit", lambda _: (256, 300))
    assert not calls and not (tmp_path / "a").exists()
    from electra_tf.data.builder import check_open_files

    check_open_files(options(tiny_corpus, tiny_vocab, tmp_path / "b", num_shards=230))
    assert calls == [(294, 300)]  # the soft limit raised to what 230 shards need
    # --num_processes past the CPUs: the processes that run, not the ones asked for (8
    # asked on 2 CPUs had raised the limit for 125 files a process, and the 2 processes'
    # 500 each had ended in "Too many open files" tracebacks)
    from electra_tf.data import builder

    monkeypatch.setattr(builder, "usable_cpus", lambda: 2)
    monkeypatch.setattr(resource, "getrlimit", lambda _: (256, 20000))
    check_open_files(options(tiny_corpus, tiny_vocab, tmp_path / "c", num_shards=1000,
                             num_processes=8))
    assert calls[-1] == (564, 20000)
    monkeypatch.setattr(resource, "getrlimit", lambda _: (256, 300))
    with pytest.raises(InputError, match=r"keeps 500 shard files open in each process, 564 "
                       r"open files with the corpus, the vocabulary and TensorFlow's, above "
                       r"this system's limit of 300; give fewer --num_shards \(at most 2 "
                       r"processes run, one per CPU it may use and shard\)"):
        check_open_files(options(tiny_corpus, tiny_vocab, tmp_path / "d", num_shards=1000,
                                 num_processes=8))


def test_an_output_dir_under_a_file_is_refused_before_reading(tiny_corpus, tiny_vocab, tmp_path):
    (tmp_path / "f").write_text("x")
    for out in (tmp_path / "f", tmp_path / "f" / "sub"):
        with pytest.raises(InputError, match="is a file, not a folder"):
            build_pretraining_data(options(tiny_corpus, tiny_vocab, out))


def test_existing_output_is_not_overwritten_silently(tiny_corpus, tiny_vocab, tmp_path):
    out = tmp_path / "out"
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32, num_shards=3))
    with pytest.raises(InputError, match="--overwrite"):
        build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32))
    # said before the corpus is read (an OpenWebText scan takes minutes): here a corpus
    # whose read would fail later
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(InputError, match="already holds pre-training data"):
        build_pretraining_data(options(str(empty), tiny_vocab, out, max_seq_length=32))
    # --overwrite replaces the shards a build names, and nothing else of the folder
    (out / "pretrain_data.tfrecord.bak").write_text("mine")
    (out / "pretrain_data.tfrecords.txt").write_text("mine")
    (out / "pretrain_data.tfrecord-old").mkdir()
    # the original's build_pretraining_dataset.py names its shards unpadded: replaced too
    # (they had been kept, and a run trained on both builds)
    (out / "pretrain_data.tfrecord-0-of-4").write_bytes(
        (out / features_lib.shard_name(0, 3)).read_bytes())
    from electra_tf.data.tfrecord_reader import LOCAL_FILES

    with pytest.raises(InputError, match=r"shards of 2 builds in .* \(-of-00003, -of-4\)"):
        features_lib.check_one_build([str(p) for p in out.iterdir()], "--train_data",
                                     LOCAL_FILES)
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32,
                                   overwrite=True))
    assert {p.name for p in out.iterdir()} == {
        STATS_FILE, features_lib.shard_name(0, 1), "pretrain_data.tfrecord-old",
        "pretrain_data.tfrecord.bak", "pretrain_data.tfrecords.txt"}
    assert (out / "pretrain_data.tfrecord.bak").read_text() == "mine"


@pytest.mark.parametrize("case", ["missing_corpus", "empty_corpus", "no_mask_token", "short_L",
                                  "huge_L"])
def test_bad_input_is_one_clear_error_and_no_output(case, tiny_corpus, tiny_vocab, tmp_path):
    """build_pretraining_data's main in this process: its --corpus globs, then the build.
    (The command line's one `error:` line: test_cli_binary_corpus_is_refused_in_one_line.)"""
    corpus, vocab, L = tiny_corpus, tiny_vocab, 32
    error, expected = {
        "missing_corpus": (InputError, "matches no file"),
        "empty_corpus": (InputError, "corpus is empty"),
        "no_mask_token": (VocabError, "lacks the special token(s) [MASK]"),
        "short_L": (InputError, "max_seq_length must be 8 to 65,535, got 7"),
        # it had written gigabytes of padding (or raised MemoryError) for a tiny corpus
        "huge_L": (InputError, "max_seq_length must be 8 to 65,535, got 100000000")}[case]
    if case == "missing_corpus":
        corpus = str(tmp_path / "nothing*.txt")
    elif case == "empty_corpus":
        corpus = str(tmp_path / "empty.txt")
        open(corpus, "w").write("\n\n   \n")
    elif case == "no_mask_token":
        vocab = write_vocab(tmp_path / "v.txt", [t for t in tiny_vocab_tokens() if t != "[MASK]"])
    else:
        L = 7 if case == "short_L" else 100_000_000
    out = tmp_path / "out"
    with pytest.raises(error) as raised:
        build_pretraining_data(BuildOptions(files=tuple(expand_files(corpus)), vocab_file=vocab,
                                            output_dir=str(out), max_seq_length=L))
    assert expected in str(raised.value), raised.value
    assert not out.exists()


def binary_file(path, size=20000, seed=0):
    import random

    rng = random.Random(seed)
    path.write_bytes(bytes(rng.randrange(256) for _ in range(size)))
    return str(path)


def test_cli_binary_corpus_is_refused_in_one_line(tiny_vocab, tmp_path):
    """The one command-line test of build_pretraining_data: `error: ...`, status 2."""
    corpus = binary_file(tmp_path / "model.bin")
    out = tmp_path / "out"
    proc = run_module("electra_tf.build_pretraining_data", f"--corpus={corpus}",
                      f"--vocab_file={tiny_vocab}", f"--output_dir={out}", "--max_seq_length=32")
    error_line(proc, f"corpus file {corpus} is not UTF-8 text", "(a binary file?)")
    assert not out.exists()


# Runs an entry point on bad input in this process and says whether TensorFlow was imported.
@pytest.mark.parametrize("module", ["electra_tf.build_vocab", "electra_tf.build_pretraining_data"])
def test_bad_corpus_is_refused_before_tensorflow_is_imported(module, tiny_vocab, tmp_path):
    """The corpus checks run before the TensorFlow import (seconds): a binary corpus is
    one line, status 2, and TensorFlow never loaded."""
    from helpers import run_module_reporting_tf

    corpus = binary_file(tmp_path / "model.bin")
    args = ([f"--output={tmp_path / 'vocab.txt'}"] if module.endswith("vocab")
            else [f"--vocab_file={tiny_vocab}", f"--output_dir={tmp_path / 'out'}"])
    proc, tf_imported = run_module_reporting_tf(module, f"--corpus={corpus}", *args)
    error_line(proc, f"corpus file {corpus} is not UTF-8 text")
    assert not tf_imported


def utf16_corpus(path, text):
    path.write_bytes(text.encode("utf-16"))  # with a byte-order mark
    return str(path)


def test_a_stray_nul_in_text_is_deleted_as_the_original_deletes_it(tiny_corpus, tiny_vocab,
                                                                   tmp_path):
    """A web page holding a NUL byte (OpenWebText's) had stopped the whole build as "a
    binary file"; the original's tokenizer deletes it (_clean_text), as ours does."""
    text = open(tiny_corpus, encoding="utf-8").read()
    cut = text.index(" ", len(text) // 2) + 3  # inside a word
    with_nul = tmp_path / "nul.txt"
    with_nul.write_text(text[:cut] + "\x00" + text[cut:], encoding="utf-8")
    build_pretraining_data(options(str(with_nul), tiny_vocab, tmp_path / "a", max_seq_length=32))
    build_pretraining_data(options(tiny_corpus, tiny_vocab, tmp_path / "b", max_seq_length=32))
    assert shard_bytes(tmp_path / "a") == shard_bytes(tmp_path / "b")
    # A short page (an OpenWebText archive's members are checked one by one) with a NUL
    # had stopped the build: a few are text at any length; UTF-16 is not.
    from electra_tf.core.fileio import check_text_sample

    check_text_sample("a short page\x00 of text\n".encode(), "page.txt")
    with pytest.raises(InputError, match="UTF-16 or UTF-32 text"):
        check_text_sample("a short page\n".encode("utf-16-le"), "page.txt")
    with pytest.raises(InputError, match="a binary file"):
        check_text_sample(b"\x00" * 5 + b"abc", "page.bin")
    # UTF-8 text with many NULs: removing them is the advice (iconv's would garble it)
    with pytest.raises(InputError) as raised:
        check_text_sample("héllo\x00wörld\n".encode() * 20, "page.txt")
    assert str(raised.value) == ("corpus file page.txt holds 20 NUL bytes in its first 280, "
                                 "in text that is UTF-8 otherwise: remove them (tr -d '\\000' "
                                 "< FILE > NEW) or leave it out")


@pytest.mark.parametrize("case", ["binary", "utf16", "utf16_no_bom", "latin1"])
def test_a_corpus_file_that_is_not_utf8_text_is_refused(case, tiny_corpus, tiny_vocab, tmp_path):
    """Even with --max_unk_rate=1: decoded with U+FFFD, it would still tokenize (UTF-16's
    blank lines are not blank: its documents would merge)."""
    text = open(tiny_corpus, encoding="utf-8").read()
    path = tmp_path / "bad.txt"
    if case == "binary":
        binary_file(path)
    elif case == "utf16":
        utf16_corpus(path, text)
    elif case == "utf16_no_bom":
        path.write_bytes(text.encode("utf-16-le"))
    else:
        path.write_bytes(("café naïve über " * 400).encode("latin-1"))
    kind = {"binary": "(a binary file?)", "utf16": "(UTF-16 or UTF-32 text?)",
            "utf16_no_bom": "(UTF-16 or UTF-32 text?)",
            "latin1": "another encoding such as Latin-1?); convert it to UTF-8 (e.g. iconv -f "
                      "LATIN1 -t UTF-8)"}[case]
    with pytest.raises(InputError) as raised:
        build_pretraining_data(options(str(path), tiny_vocab, tmp_path / "out",
                                       max_seq_length=32, max_unk_rate=1.0))
    assert str(raised.value).startswith(f"corpus file {path} is not UTF-8 text"), raised.value
    assert kind in str(raised.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["gzip", "bzip2", "zip"])
def test_a_compressed_corpus_file_is_named_for_what_it_is(kind, tiny_corpus, tiny_vocab,
                                                          tmp_path):
    """A gzip tar named .xz (auto reads xz archives only) had been called "not UTF-8 text
    (a binary file?)"; a text file that starts "BZh" is still text."""
    import bz2
    import gzip
    import zipfile

    text = open(tiny_corpus, "rb").read()
    path = tmp_path / "pages.xz"
    if kind == "zip":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("a.txt", text)
    else:
        path.write_bytes({"gzip": gzip.compress, "bzip2": bz2.compress}[kind](text))
    with pytest.raises(InputError) as raised:
        build_pretraining_data(options(str(path), tiny_vocab, tmp_path / "out",
                                       max_seq_length=32))
    assert str(raised.value) == (
        f"corpus file {path} is {kind}-compressed, not text; decompress it (a tar of text "
        "files, as an OpenWebText archive is: --corpus_format=openwebtext reads it)")
    assert not (tmp_path / "out").exists()
    plain = tmp_path / "bzh.txt"
    plain.write_bytes(b"BZh is how a line may start.\n\n" + text)
    build_pretraining_data(options(str(plain), tiny_vocab, tmp_path / "ok", max_seq_length=32))


def test_max_unk_rate_sets_the_limit(tiny_corpus, tiny_vocab, tmp_path):
    # Greek: UTF-8 text, but hardly a piece of the tiny (English) vocabulary.
    corpus = tmp_path / "greek.txt"
    corpus.write_text("το μοντέλο διαβάζει κάθε πρόταση του κειμένου\n\n" * 200,
                      encoding="utf-8")
    with pytest.raises(InputError, match=r"greek.txt: \d+% of the tokens .* are \[UNK\]"):
        build_pretraining_data(options(str(corpus), tiny_vocab, tmp_path / "refused",
                                       max_seq_length=32))
    stats = build_pretraining_data(options(str(corpus), tiny_vocab, tmp_path / "forced",
                                           max_seq_length=32, max_unk_rate=1.0))
    assert stats["unk_rate"] > 0.3 and stats["examples"] > 0
    # Good text is far below the default limit; a zero limit refuses any [UNK].
    assert build_pretraining_data(options(tiny_corpus, tiny_vocab, tmp_path / "good",
                                          max_seq_length=32))["unk_rate"] < 0.01
    with_unk = tmp_path / "unk.txt"
    with_unk.write_text("the model reads αβγ\n")
    with pytest.raises(InputError, match="unk.txt: \\d+% of the tokens of its first 1 line are "
                                         "\\[UNK\\]"):  # (had said "first 1 lines")
        build_pretraining_data(options(str(with_unk), tiny_vocab, tmp_path / "none",
                                       max_seq_length=32, max_unk_rate=0.0))
    assert not (tmp_path / "none").exists()


def test_a_mostly_unk_corpus_past_the_sampled_lines_is_refused_before_renaming(
        tiny_vocab, tmp_path, monkeypatch):
    corpus = tmp_path / "late.txt"
    corpus.write_text("the model reads a token\n" * 3 + "αβγ δεζ ηθι\n" * 40)
    monkeypatch.setattr(builder_lib, "UNK_SAMPLE_LINES", 2)  # the sample sees good lines only
    out = tmp_path / "out"
    with pytest.raises(InputError, match="of the corpus's tokens are \\[UNK\\], nothing was"):
        build_pretraining_data(options(str(corpus), tiny_vocab, out, max_seq_length=32))
    assert not out.exists()


def test_pipeline_shapes_and_replica_sharding(tiny_corpus, tiny_vocab, tmp_path):
    out = tmp_path / "out"
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32, num_shards=4))
    tok = Tokenizer(tiny_vocab)
    masking = MaskingConfig.from_tokenizer(tok, 0.15, 5)
    pattern = str(out / "pretrain_data.tfrecord*")

    def batches(ctx, n=6, **kw):
        ds = pretraining_dataset(pattern, 8, 32, masking, input_context=ctx, seed=1, **kw)
        return [{k: v.numpy() for k, v in b.items()} for b in ds.take(n)]

    first = batches(None)
    assert first[0]["input_ids"].shape == (8, 32)
    assert first[0]["masked_lm_positions"].shape == (8, 5)
    assert first[0]["masked_lm_weights"].dtype == np.float32
    again = batches(None)
    for x, y in zip(first, again):  # deterministic for a seed
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])

    def originals(bs):
        return {tuple(row) for b in bs for row in unmask(b)}

    ctxs = [tf.distribute.InputContext(2, i, 2) for i in range(2)]
    p0, p1 = batches(ctxs[0], n=3, shuffle_buffer=1, is_training=False), \
        batches(ctxs[1], n=3, shuffle_buffer=1, is_training=False)
    assert not originals(p0) & originals(p1), "pipelines must read disjoint shards"
    assert not np.array_equal(p0[0]["masked_lm_positions"], p1[0]["masked_lm_positions"])


def test_fewer_files_than_pipelines_shards_records(tiny_corpus, tiny_vocab, tmp_path):
    out = tmp_path / "out"
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32))
    pattern = str(out / "pretrain_data.tfrecord*")
    seen = []
    for i in range(2):
        ds = pretraining_dataset(pattern, 4, 32, None, is_training=False,
                                 input_context=tf.distribute.InputContext(2, i, 2))
        seen.append({tuple(r) for b in ds for r in b["input_ids"].numpy()})
    assert seen[0] and seen[1] and not seen[0] & seen[1]


def test_empty_shards_take_no_pipeline_share_and_are_named(tiny_corpus, tiny_vocab, tmp_path,
                                                           capsys):
    """A corpus of one document in 4 shards leaves 3 empty: each of 2 input pipelines
    (workers) still reads examples (one given only empty files waited forever)."""
    corpus = tmp_path / "one_document.txt"
    lines = open(tiny_corpus, encoding="utf-8").read().splitlines()
    corpus.write_text("\n".join(line for line in lines if line.strip()) + "\n")
    out = tmp_path / "out"
    stats = build_pretraining_data(options(str(corpus), tiny_vocab, out, max_seq_length=32,
                                           num_shards=4))
    assert stats["documents"] == 1
    assert sorted(stats["examples_per_shard"].values())[:3] == [0, 0, 0]
    err = capsys.readouterr().err
    assert "warning: 3 of the 4 shards hold no example" in err
    # under --blanks_separate_docs=auto (None), where it had said "a file is one"
    assert "the corpus has 1 document(s) (a blank line ends one in a text file; an " \
        "archive's page is one)" in err, err
    pattern = str(out / "pretrain_data.tfrecord*")
    seen = []
    for i in range(2):  # pipeline 1 would get shards 1 and 3 by file, both empty
        ds = pretraining_dataset(pattern, 2, 32, None, is_training=False,
                                 input_context=tf.distribute.InputContext(2, i, 2))
        seen.append({tuple(r) for b in ds for r in b["input_ids"].numpy()})
    assert seen[0] and seen[1] and not seen[0] & seen[1]


def test_pipeline_missing_files_is_clear(tmp_path):
    with pytest.raises(InputError, match="TFRecord pattern .* matches no file"):
        pretraining_dataset(str(tmp_path / "none*"), 2, 16, None)


def test_skip_batches_resumes_the_same_stream(tiny_corpus, tiny_vocab, tmp_path):
    out = tmp_path / "out"
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32, num_shards=2))
    masking = MaskingConfig.from_tokenizer(Tokenizer(tiny_vocab), 0.15, 4)
    pattern = str(out / "pretrain_data.tfrecord*")
    full = list(pretraining_dataset(pattern, 4, 32, masking, seed=2).take(7))
    rest = list(pretraining_dataset(pattern, 4, 32, masking, seed=2, skip_batches=4).take(3))
    for a, b in zip(full[4:], rest):
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


def test_check_records_reads_one_record_per_file_and_names_the_bad_one(tiny_corpus, tiny_vocab,
                                                                       tmp_path):
    out = tmp_path / "out"
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32, num_shards=3))
    pattern = str(out / "pretrain_data.tfrecord*")
    assert len(check_records(pattern, 32)) == 3
    with pytest.raises(InputError, match="--eval_data: .*-00000-of-00003 holds records of "
                                         "max_seq_length 32, but --max_seq_length=16"):
        check_records(pattern, 16, "--eval_data")
    with pytest.raises(InputError, match="holds records of max_seq_length 32, but "
                                         "--phase2_max_seq_length=64 .* train with "
                                         "--phase2_max_seq_length=32"):
        check_records(pattern, 64, "--phase2_train_data")
    with pytest.raises(InputError, match="pretrain_data_stats.json is not a TFRecord file"):
        check_records(str(out / "*"), 32)
    shard = out / features_lib.shard_name(2, 3)
    shard.write_bytes(shard.read_bytes()[:9])
    with pytest.raises(InputError, match="-00002-of-00003 is not a TFRecord file or is corrupt "
                                         r"\(truncated record at byte 0\)"):
        check_records(pattern, 32)
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="all 1 file"):
        check_records(str(empty), 32)
    assert check_records([str(empty), str(out / features_lib.shard_name(0, 3))], 32)


@pytest.mark.parametrize("damage", ["data_bit", "length_bit", "truncated"])
def test_a_corrupt_record_is_traced_to_its_file(damage, tiny_corpus, tiny_vocab, tmp_path):
    import struct

    from electra_tf.data.pipeline import locate_corrupt_record

    out = tmp_path / "out"
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32, num_shards=3))
    files = sorted(str(p) for p in out.glob("pretrain_data.tfrecord*"))
    raw = bytearray(open(files[1], "rb").read())
    start = 0
    for _ in range(10):  # the 11th record
        start += 16 + struct.unpack("<Q", bytes(raw[start:start + 8]))[0]
    if damage == "data_bit":
        raw[start + 20] ^= 1
    elif damage == "length_bit":
        raw[start + 1] ^= 1
    else:
        raw = raw[:start + 30]
    open(files[1], "wb").write(bytes(raw))
    with pytest.raises(tf.errors.DataLossError) as caught:
        for _ in tf.data.TFRecordDataset(files):
            pass
    assert "-00001-of-" not in caught.value.message  # tf.data does not name it
    assert locate_corrupt_record(files, caught.value.message) == files[1]
    assert locate_corrupt_record(files, "something else") is None


def test_the_shards_are_on_the_disk_before_any_replaces_the_old(tiny_corpus, tiny_vocab,
                                                                  tmp_path, monkeypatch):
    """Every shard and the stats are synced before the first rename (a power loss then
    keeps the marker beside whole files), and the renames before the marker goes."""
    from helpers import sync_log

    out = tmp_path / "out"
    events = sync_log(monkeypatch)
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32,
                                   num_shards=2))
    renames = [e for e in events if e[0] == "rename"]
    assert sorted(os.path.basename(e[2]) for e in renames) == sorted(
        [features_lib.shard_name(s, 2) for s in range(2)] + [STATS_FILE])
    first = events.index(renames[0])
    assert sorted(e[1] for e in events[:first] if e[0] == "fsync") == sorted(
        e[1] for e in renames)
    assert events[events.index(renames[-1]) + 1] == ("fsync", str(out))


def test_an_empty_shard_its_stats_record_examples_in_is_refused(tiny_corpus, tiny_vocab,
                                                               tmp_path):
    """A shard emptied by a copy cut short had been read as one the build left empty: the
    run and pack_pretraining_data went on with fewer examples, without a word. A shard
    the build did leave empty (its stats say 0) is still read."""
    import json

    from electra_tf.data.tfrecord_reader import LOCAL_FILES, check_records

    out = tmp_path / "out"
    build_pretraining_data(options(tiny_corpus, tiny_vocab, out, max_seq_length=32, num_shards=3))
    stats = json.loads((out / STATS_FILE).read_text())
    cut = out / features_lib.shard_name(1, 3)
    assert stats["examples_per_shard"][cut.name] > 0
    cut.write_bytes(b"")
    with pytest.raises(InputError, match=rf"^--train_data: {cut} is empty, but {out / STATS_FILE} "
                                         r"records [\d,]+ examples in it \(a copy or download "
                                         r"cut short\?\): copy it again, or leave it out"):
        check_records(f"{out}/pretrain_data.tfrecord*", 32, "--train_data", LOCAL_FILES)
    stats["examples_per_shard"][cut.name] = 0  # as a build that left it empty records it
    (out / STATS_FILE).write_text(json.dumps(stats))
    assert len(check_records(f"{out}/pretrain_data.tfrecord*", 32, "--train_data",
                             LOCAL_FILES)) == 3
