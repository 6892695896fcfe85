"""Electric's scores: the scoring command (one score per line, one pass) and the
--task=score export, loaded in a fresh process as the model server loads it and checked
against the Keras model to 1e-5."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from export_helpers import SCORE_REQUEST_TEXTS, SCORE_TEXTS, SEQ, score_ids
from helpers import error_line, run_module, run_python

ATOL = 1e-5
TEXTS = SCORE_TEXTS


def one_by_one(scorer, texts):
    """-sum of E(x)_t over each text's word pieces, each text alone (no padding)."""
    tok, out = scorer.tokenizer, []
    for ids in tok.encode(texts):
        ids = [tok.cls_id, *ids[:scorer.max_seq_length - 2], tok.sep_id]
        x = np.array([ids], np.int32)
        e = np.asarray(scorer.discriminator({"input_ids": x, "input_mask": np.ones_like(x),
                                             "segment_ids": np.zeros_like(x)})["rtd_logits"])
        out.append(-float(e[0, 1:-1].sum()))
    return np.array(out)


def test_scores_are_minus_the_summed_energies_whatever_the_batch(electric_dir):
    from electra_tf.serving.scoring import load_scorer

    scorer = load_scorer(electric_dir, max_seq_length=SEQ)
    want = one_by_one(scorer, TEXTS)
    for batch_size in (1, 2, 32):
        got = scorer.score(TEXTS, batch_size=batch_size)
        np.testing.assert_allclose([s.score for s in got], want, atol=ATOL, rtol=0)
    done = []
    got = scorer.score(TEXTS, batch_size=2, progress=done.append)
    assert done == list(range(2, len(TEXTS), 2)) + [len(TEXTS)]  # after every batch
    assert got[3].tokens == [] and got[3].score == 0.0  # an empty line scores 0
    assert math.copysign(1.0, got[3].score) == 1.0  # printed 0.000000, not -0.000000
    assert got[2].truncated and not got[0].truncated
    assert len(got[0].energies) == len(got[0].tokens) == 5
    assert len({round(s.score, 3) for s in got}) == len(TEXTS)


@pytest.mark.slow
def test_the_command_prints_one_score_per_line(electric_dir, tmp_path):
    from electra_tf.serving.scoring import load_scorer

    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    proc = run_module("electra_tf.score", f"--model_dir={electric_dir}",
                      f"--input={sentences}", f"--max_seq_length={SEQ}", "--batch_size=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(TEXTS)
    want = one_by_one(load_scorer(electric_dir, max_seq_length=SEQ), TEXTS)
    np.testing.assert_allclose([float(x) for x in lines], want, atol=1e-4, rtol=0)
    # a pipe given by path (/dev/stdin, <(...), a FIFO) is read once, as it comes: it had
    # been read twice (checked, then scored) and scored nothing, exit 0
    piped = run_python(["-m", "electra_tf.score", f"--model_dir={electric_dir}",
                        "--input=/dev/stdin", f"--max_seq_length={SEQ}", "--batch_size=2"],
                       input=sentences.read_text(encoding="utf-8"))
    assert piped.returncode == 0 and piped.stdout == proc.stdout, piped.stderr[-3000:]
    output = tmp_path / "energies.jsonl"
    # what a score killed mid-write left (its temporary file) is named, not taken
    (tmp_path / ".tmp-k1ll3d00.energies.jsonl").write_text("half")
    proc = run_module("electra_tf.score", f"--model_dir={electric_dir}",
                      f"--input={sentences}", f"--max_seq_length={SEQ}", "--energies",
                      f"--output={output}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "" and f"[score] {len(TEXTS)} texts in" in proc.stderr
    assert f"[score] note: {tmp_path}/.tmp-k1ll3d00.energies.jsonl (0.0 MiB) is what a stopped " \
        "run writing energies.jsonl left half-written; remove it" in proc.stderr
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")
                and "k1ll3d" not in p]  # (its own temporary is gone)
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(TEXTS)
    assert rows[0]["tokens"] == ["the", "model", "reads", "a", "token"]
    for row in rows:
        assert row["score"] == pytest.approx(-sum(row["energies"]), abs=1e-4)


@pytest.mark.slow
def test_the_command_refuses_a_model_that_is_not_electric(export_pretrained_dir, tmp_path):
    """Before it reads --input (a million lines had been read first, for a minute): here
    a file it could not read, which the model's refusal comes before."""
    sentences = tmp_path / "s.txt"
    sentences.write_bytes(b"not UTF-8 \xff\n")
    proc = run_module("electra_tf.score", f"--model_dir={export_pretrained_dir}",
                      f"--input={sentences}")
    error_line(proc, "holds no Electric model")
    proc = run_module("electra_tf.score", f"--model_dir={export_pretrained_dir}",
                      f"--input={tmp_path / 'none.txt'}")  # the input's flag first
    error_line(proc, f"--input {tmp_path / 'none.txt'}: No such file or directory")


def test_a_missing_input_is_refused_before_tensorflow_loads(tmp_path):
    """A missing --input or a folder given as one is told in the first second, as the
    --output checks are (it had been told after TensorFlow and the model loaded)."""
    from helpers import run_module_reporting_tf

    for given, said in ((tmp_path / "none.txt", "No such file or directory"),
                        (tmp_path, "Is a directory")):
        proc, tf_imported = run_module_reporting_tf(
            "electra_tf.score", f"--model_dir={tmp_path}", f"--input={given}")
        error_line(proc, f"--input {given}: {said}")
        assert not tf_imported


def test_the_score_export_loads_fresh_and_matches_keras(score_export, electric_dir, fresh):
    from electra_tf.serving.scoring import load_scorer

    spec, path = score_export
    with open(os.path.join(path, "assets.extra", "export_info.json")) as f:
        assert json.load(f)["task"] == "score"
    scorer = load_scorer(electric_dir, max_seq_length=SEQ)
    want = one_by_one(scorer, SCORE_REQUEST_TEXTS)
    energies = scorer.energies(*score_ids(scorer, SCORE_REQUEST_TEXTS))
    for key in ("text", "ids"):
        for loader in ("tf2", "tf1"):
            out = fresh[("score", key)][loader]
            assert "error" not in out, out
            np.testing.assert_allclose(out["score"], want, atol=ATOL, rtol=0)
            np.testing.assert_allclose(out["token_energies"], energies, atol=ATOL, rtol=0)
    text = fresh[("score", "text")]["tf2"]
    assert [t.decode() for t in text["tokens"][0][:7]] == ["[CLS]", "the", "model", "reads",
                                                             "a", "token", "[SEP]"]
    assert list(text["truncated"]) == [False, False, True, False, False]
    for key in ("text", "ids"):  # the empty text: 0.0, not the graph's -0.0
        for loader in ("tf2", "tf1"):
            score = np.asarray(fresh[("score", key)][loader]["score"])
            assert SCORE_REQUEST_TEXTS[3] == "" and score[3] == 0.0
            assert not np.signbit(score[3]), (key, loader)


def test_the_window_defaults_to_the_length_the_model_was_pre_trained_at(
        electric_dir, export_pretrained_dir):
    """score and the score/rtd exports had defaulted to 128 whatever the folder records:
    a model pre-trained at 32 was scored on position embeddings it never trained, and a
    converted one with 32 positions refused as if it recorded 128."""
    from electra_tf.serving.export import load_spec
    from electra_tf.serving.scoring import load_scorer

    assert SEQ != 128
    assert load_scorer(electric_dir).max_seq_length == SEQ  # its pretraining_config.json
    assert load_spec("score", electric_dir).max_seq_length == SEQ
    assert load_scorer(electric_dir, max_seq_length=SEQ - 4).max_seq_length == SEQ - 4
    # a folder that records no pre-training config: 128, at most the model's positions
    assert load_spec("rtd", export_pretrained_dir).max_seq_length == 128


def test_a_window_past_the_pre_trained_length_is_warned(electric_dir):
    # --max_seq_length=128 on a model pre-trained at 32 had scored long texts on
    # positions never trained, without a word (score, and the score and rtd exports)
    from electra_tf.folders import PretrainingFolder

    folder = PretrainingFolder.open(electric_dir)
    assert folder.untrained_positions_warning(SEQ, "--max_seq_length") is None
    assert folder.untrained_positions_warning(SEQ + 8, "--max_seq_length") == (
        f"warning: --max_seq_length={SEQ + 8} is past the {SEQ} tokens the model was "
        f"pre-trained at: positions {SEQ + 1}-{SEQ + 8} were never trained, so the word "
        f"pieces of a text past the first {SEQ - 2} are judged on untrained positions "
        f"(give --max_seq_length={SEQ}, or leave it out)")


def test_the_score_export_refuses_a_model_that_is_not_electric(export_pretrained_dir):
    from electra_tf.core.errors import InputError
    from electra_tf.serving.export import load_spec

    with pytest.raises(InputError, match=r"holds no Electric model \(it records no "
                                         r"pre-training objective\)"):
        load_spec("score", export_pretrained_dir)
    from electra_tf.tasks.heads.scoring import ScoreHead

    with pytest.raises(InputError, match=r"DIR holds no Electric model \(its "
                                         r"pretraining_config.json records objective=electra\)"):
        ScoreHead.check_pretrained("DIR", {"objective": "electra"})


def test_the_command_reads_one_text_per_newline(tmp_path, monkeypatch):
    """Split at "\n" only: U+2028, a form feed or a lone "\r" inside a line had made
    str.splitlines print more scores than the file has lines."""
    import io

    from electra_tf.core.errors import InputError
    from electra_tf.score import read_lines

    path = tmp_path / "in.txt"
    path.write_bytes("a\u2028b\nc\x0cd\re\r\n\nlast".encode("utf-8"))
    assert read_lines(str(path)) == ["a\u2028b", "c\x0cd\re", "", "last"]
    path.write_bytes(b"one\ntwo\n")
    assert read_lines(str(path)) == ["one", "two"]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"ok\ncaf\xe9\n")))
    with pytest.raises(InputError, match=r"^--input -:2: not UTF-8 \(byte 0xe9 at column "
                                         r"4\); save the file as UTF-8$"):
        read_lines("-")


def test_the_command_reads_its_input_a_chunk_at_a_time(tmp_path):
    """score had read the whole --input before scoring (a corpus of any size was held in
    memory): read_chunks yields `size` texts at a time, counted by count_lines, which
    refuses a bad line by its number before anything is scored."""
    from electra_tf.core.errors import InputError
    from electra_tf.score import count_lines, read_chunks

    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nb\r\n\nd\re")
    chunks = read_chunks(str(path), size=2)
    assert next(chunks) == ["a", "b"]  # a generator: the rest is not read yet
    assert list(chunks) == [["", "d\re"]]
    assert count_lines(str(path)) == 4
    path.write_bytes(b"ok\nok\n\xff tail\n")
    with pytest.raises(InputError, match=r":3: not UTF-8 \(byte 0xff at column 1\)"):
        count_lines(str(path))
    with pytest.raises(InputError, match=r"^--input .*: Is a directory$"):
        count_lines(str(tmp_path))
    with pytest.raises(InputError, match=r"^--input .*none: No such file or directory$"):
        count_lines(str(tmp_path / "none"))


def test_a_long_line_is_read_to_a_space_within_the_limit_and_chunks_hold_few_bytes(
        tmp_path, monkeypatch):
    """A one-line file of 20 MB had been read and tokenized whole (35 bytes of memory a
    byte, for 14 scored pieces): a line is read to its last space within MAX_LINE_BYTES,
    the rest passed over, and a chunk ends once it holds _CHUNK_BYTES."""
    from electra_tf import score
    from electra_tf.core.errors import InputError

    monkeypatch.setattr(score, "MAX_LINE_BYTES", 16)
    monkeypatch.setattr(score, "_CHUNK_BYTES", 20)
    path = tmp_path / "in.txt"
    path.write_bytes(("one two three four five six\nshort\na" + "\u00e9" * 10
                      + "\nlast").encode())
    # cut at the last space within 16 bytes; a line without one at a character's end
    assert list(score.read_chunks(str(path), size=100)) == [
        ["one two three", "short", "a" + "\u00e9" * 7], ["last"]]
    assert score.count_lines(str(path)) == 4
    path.write_bytes(b"a" * 16 + b"\n" + b"b" * 16)  # 16 bytes: not over the limit
    assert score.read_lines(str(path)) == ["a" * 16, "b" * 16]
    path.write_bytes(b"ab cdefgh\xffzzzzzzzzzzzz\n")  # a bad byte past the last space
    with pytest.raises(InputError, match=r":1: not UTF-8 \(byte 0xff at column 10\)"):
        score.count_lines(str(path))
    path.write_bytes(b"ok\nzz\xff" + b"z" * 30 + b"\n")  # a bad byte within the limit
    with pytest.raises(InputError, match=r":2: not UTF-8 \(byte 0xff at column 3\)"):
        score.count_lines(str(path))


@pytest.mark.parametrize("to", ["stdout", "output", "device"])
def test_an_interrupt_says_what_was_written_and_that_a_rerun_starts_over(
        to, electric_dir, tmp_path, monkeypatch, capsys):
    """The command's interrupt line had been the generic "run the same command again to
    finish", read as a resume; stdout then held whole lines of the first chunks."""
    import types

    from electra_tf import cli, score

    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    output = tmp_path / "scores.txt"
    output.write_text("before\n")
    monkeypatch.setattr(score, "FLAGS", types.SimpleNamespace(
        model_dir=str(electric_dir), input=str(sentences), batch_size=2, energies=False,
        max_seq_length=SEQ, vocab_file="",
        output={"output": str(output), "device": "/dev/null"}.get(to, "")))
    monkeypatch.setattr(score, "_CHUNK_BYTES", 1)  # a chunk a line
    written = []

    def write_stdout(piece, lines_out=None):
        written.append(piece)
        lines_out(piece.count("\n"))

    monkeypatch.setattr(cli, "write_stdout", write_stdout)

    class Stopped:  # a Ctrl-C as the third text is scored
        def __init__(self, *args, **kwargs):
            pass

        def update(self, done):
            if done >= 3:
                raise KeyboardInterrupt

    monkeypatch.setattr(score.fileio, "Progress", Stopped)
    with pytest.raises(KeyboardInterrupt) as raised:
        score.main(["score"])
    if to == "output":
        assert output.read_text() == "before\n"
        assert str(raised.value) == (f"interrupted; --output {output} is as it was (it is "
                                     "written once every text is scored); rerun the "
                                     "command: it starts from the first line")
    else:  # stdout, or a device written as it goes
        assert len(written) == (2 if to == "stdout" else 0)
        assert str(raised.value) == ("interrupted: the scores of the first 2 texts were "
                                     "written whole, and the lines after them may be cut "
                                     "short; rerun the command for the rest: it starts from "
                                     "the first line")


def test_stdout_counts_the_lines_its_descriptor_took(monkeypatch):
    """A signal or a full disk in the middle of a chunk written to stdout (a pipe): the
    lines counted are those the descriptor took (Python's text layer, stopped inside a
    write, had told none: "the first 0 texts" where thousands were out; unbuffered, it
    had taken a partial write for the whole)."""
    import errno
    import io

    from electra_tf import cli

    read_fd, write_fd = os.pipe()
    try:
        monkeypatch.setattr("sys.stdout", io.TextIOWrapper(io.FileIO(write_fd, "w",
                                                                     closefd=False)))
        calls, counted = [], []
        real_write = os.write

        def seven_bytes_then(stop):
            def write(fd, data):
                calls.append(1)
                if len(calls) == 3:
                    raise stop
                return real_write(fd, bytes(data[:7]))
            return write

        for stop in (KeyboardInterrupt(), OSError(errno.EFBIG, "File too large")):
            calls.clear()
            counted.clear()
            monkeypatch.setattr(cli.os, "write", seven_bytes_then(stop))
            with pytest.raises(type(stop)):
                cli.write_stdout("-1.5\n-22.25\n-3.0\n", counted.append)
            assert sum(counted) == 2  # "-1.5\n-2" and "2.25\n-3": two whole lines
        monkeypatch.setattr(cli.os, "write", real_write)
        counted.clear()
        cli.write_stdout("-0.5\n", counted.append)
        assert counted == [1]
    finally:
        os.close(write_fd)
        os.read(read_fd, 1 << 16)
        os.close(read_fd)


def test_a_stream_says_how_many_scores_were_out_before_a_stop(electric_dir, tmp_path,
                                                             monkeypatch):
    """A full disk under stdout, or a bad line of stdin, met after scores were out: the
    line says how many (a signal's line: the test above and the interrupt test)."""
    import errno
    import types

    from electra_tf import cli, score
    from electra_tf.core.errors import InputError

    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    monkeypatch.setattr(score, "FLAGS", types.SimpleNamespace(
        model_dir=str(electric_dir), input=str(sentences), batch_size=2, energies=False,
        max_seq_length=SEQ, vocab_file="", output=""))
    monkeypatch.setattr(score, "_CHUNK_BYTES", 1)  # a chunk a line
    written = []

    def full_at_the_third(piece, lines_out):
        if len(written) == 3:
            raise OSError(errno.EFBIG, "File too large", cli.STDOUT)
        written.append(piece)
        lines_out(1)

    monkeypatch.setattr(cli, "write_stdout", full_at_the_third)
    with pytest.raises(OSError) as raised:
        score.main(["score"])
    assert raised.value.strerror == ("File too large; the scores of the first 3 texts were "
                                     "written whole, and the lines after them may be cut "
                                     "short")
    assert raised.value.filename == cli.STDOUT

    def bad_third_line(path):
        yield ["a"]
        yield ["b"]
        raise InputError("--input -:3: not UTF-8 (byte 0xff at column 1); save it as UTF-8")

    written.clear()
    monkeypatch.setattr(cli, "write_stdout", lambda piece, lines_out: lines_out(1))
    monkeypatch.setattr(score, "read_chunks", bad_third_line)
    score.FLAGS.input = "-"  # (a file is checked whole before any score is out)
    with pytest.raises(InputError) as raised:
        score.main(["score"])
    assert str(raised.value).endswith("save it as UTF-8 (the scores of the first 2 texts were "
                                      "written before it)")


def test_a_bad_line_is_refused_before_an_output_is_touched(electric_dir, tmp_path):
    sentences = tmp_path / "s.txt"
    sentences.write_bytes(b"a token\nthe model\nnot UTF-8 \xff\n")
    output = tmp_path / "scores.txt"
    output.write_text("earlier scores\n")
    proc = run_module("electra_tf.score", f"--model_dir={electric_dir}",
                      f"--input={sentences}", f"--output={output}")
    error_line(proc, f"--input {sentences}:3: not UTF-8 (byte 0xff at column 11)")
    assert output.read_text() == "earlier scores\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.txt", "scores.txt"]


def test_the_command_checks_its_output_before_loading_a_model(tmp_path):
    sentences = tmp_path / "s.txt"
    sentences.write_text("a token\n", encoding="utf-8")
    (tmp_path / "f").write_text("x")
    # the model's own files (its weights had been replaced by the scores, exit 0)
    model = tmp_path / "model"
    (model / "checkpoints").mkdir(parents=True)
    for name in ("discriminator.weights.h5", "vocab.txt", "checkpoints/ckpt-2.index"):
        (model / name).write_text("kept")
    for output, message in ((tmp_path, "is a folder; give a file's path"),
                            (tmp_path / "f" / "out.txt", "is a file, not a folder"),
                            (sentences, "is the --input file it would replace"),
                            (model / "discriminator.weights.h5", "is a file of the model "
                             "--model_dir names (discriminator.weights.h5)"),
                            (model / "vocab.txt", "is a file of the model --model_dir names"),
                            (model / "checkpoints" / "ckpt-2.index", "is a file of the model "
                             "--model_dir names (checkpoints/ckpt-2.index)")):
        proc = run_module("electra_tf.score", f"--model_dir={model}",
                          f"--input={sentences}", f"--output={output}")
        error_line(proc, message)
    proc = run_module("electra_tf.score", f"--model_dir={tmp_path / 'none'}",
                      f"--vocab_file={model / 'vocab.txt'}", f"--input={sentences}",
                      f"--output={model / 'vocab.txt'}")
    error_line(proc, "is the --vocab_file; write the scores elsewhere")
    assert {p.read_text() for p in model.rglob("*") if p.is_file()} == {"kept"}


def test_an_empty_text_scores_zero_not_negative_zero():
    """The export's score had been -0.0 for an empty text (the negated empty sum) where
    the score command prints 0.0."""
    import types

    import tensorflow as tf

    from electra_tf.tasks.heads.scoring import ScoreHead, sequence_scores

    ids = tf.constant([[1, 2, 7, 3], [1, 2, 0, 0]])  # [CLS]=1 [SEP]=2; the second is empty
    mask = tf.constant([[1, 1, 1, 1], [1, 1, 0, 0]])
    logits = tf.constant([[0.5, 0.25, 0.75, 1.0], [0.5, 0.25, 0.0, 0.0]])
    spec = types.SimpleNamespace(tokenizer=types.SimpleNamespace(cls_id=1, sep_id=2))
    score = ScoreHead._scores(spec, {"rtd_logits": logits}, ids, mask)["score"].numpy()
    assert score.tolist() == [-1.75, 0.0] and not np.signbit(score[1])
    direct = sequence_scores(logits, ids, mask, 1, 2).numpy()
    assert direct.tolist() == [-1.75, 0.0] and not np.signbit(direct[1])
    for jit in (False, True):  # traced, as served: `0.0 - sum` had become `-sum` there
        traced = tf.function(sequence_scores, jit_compile=jit)(logits, ids, mask, 1, 2)
        assert traced.numpy().tolist() == [-1.75, 0.0] and not np.signbit(traced.numpy()[1])


def test_an_electric_model_written_for_transformers_says_its_logits_are_energies(
        electric_dir, tmp_path, caplog):
    """convert --to=hf of an Electric folder gave no sign that ElectraForPreTraining's
    logits are its energies, nor that the folder reads back as an ELECTRA discriminator
    that score refuses (transformers' config has no field for the objective)."""
    pytest.importorskip("safetensors")
    from electra_tf.interop import hf

    with caplog.at_level("WARNING"):
        hf.export_model(electric_dir, str(tmp_path / "hf"))
    assert f"{electric_dir}: an Electric model: ElectraForPreTraining's logits are its " \
        "energies" in caplog.text, caplog.text
    assert (tmp_path / "hf" / "model.safetensors").exists()
