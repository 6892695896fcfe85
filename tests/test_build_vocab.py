"""build_vocab: BERT special ids, cased/uncased, bad input.

The learning runs in this process with the arguments build_vocab's main passes
(its flag defaults: lower-cased, accents as BERT, all lines); the command line
is checked once, on a missing corpus.
"""

import os
import re

import pytest
from helpers import error_line, run_module

from electra_tf.core.errors import InputError
from electra_tf.text.tokenizer import BERT_RESERVED_TOKENS, Tokenizer
from electra_tf.text.vocab_builder import build_vocab


def test_learns_vocab_with_bert_special_ids(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("Café au lait. Tokens and TOKENS and tokens!\n中国人\n\n" * 30, "utf-8")
    out = tmp_path / "vocab.txt"
    # --corpus=c.txt --vocab_size=200 --output=vocab.txt --min_count=2
    build_vocab(str(corpus), 200, str(out), True, None, 2, 0)
    vocab = out.read_text("utf-8").splitlines()
    assert vocab[:104] == BERT_RESERVED_TOKENS
    assert [vocab[i] for i in (0, 100, 101, 102, 103)] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                           "[MASK]"]
    assert "tokens" in vocab and "TOKENS" not in vocab and "cafe" in vocab
    assert len(vocab) <= 200
    tok = Tokenizer(str(out))
    assert tok.convert_ids_to_tokens(tok.encode(["TOKENS café"])[0]) == ["tokens", "cafe"]


def test_cased_keeps_case_and_can_strip_accents(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("Café au lait. Tokens and TOKENS and tokens!\n\n" * 30, "utf-8")
    out = tmp_path / "vocab.txt"
    # ... --min_count=2 --nodo_lower_case --strip_accents=true
    build_vocab(str(corpus), 200, str(out), False, True, 2, 0)
    vocab = out.read_text("utf-8").splitlines()
    assert "TOKENS" in vocab and "Tokens" in vocab and "Cafe" in vocab and "Café" not in vocab
    tok = Tokenizer(str(out), do_lower_case=False, strip_accents=True)
    assert tok.convert_ids_to_tokens(tok.encode(["TOKENS Café"])[0]) == ["TOKENS", "Cafe"]


def test_cli_missing_corpus_is_one_line(tmp_path):
    """The one command-line test of build_vocab: `error: ...`, status 2, no traceback."""
    proc = run_module("electra_tf.build_vocab", f"--corpus={tmp_path}/none*.txt",
                      f"--output={tmp_path}/v.txt")
    error_line(proc, f"{tmp_path}/none*.txt", "matches no file")
    assert not (tmp_path / "v.txt").exists()


@pytest.mark.parametrize("case", ["binary", "utf16"])
def test_a_corpus_that_is_not_utf8_text_is_refused(case, tmp_path):
    """Not a vocabulary of only the reserved tokens (binary), nor documents merged (UTF-16)."""
    from electra_tf.core.errors import InputError

    corpus = tmp_path / "corpus.txt"
    if case == "binary":
        corpus.write_bytes(bytes(range(256)) * 64)
    else:
        corpus.write_bytes(("the model reads a token\n\n" * 300).encode("utf-16"))
    with pytest.raises(InputError, match=rf"^corpus file {corpus} is not UTF-8 text"):
        build_vocab(str(corpus), 200, str(tmp_path / "vocab.txt"))
    assert not (tmp_path / "vocab.txt").exists()


def test_an_openwebtext_archive_is_refused_with_advice_that_leads_to_text(tmp_path):
    """The xz archive's advice (decompress it) led to a tar whose advice was to compress it
    with xz again: build_vocab reads text files, and says to extract the pages."""
    import io
    import lzma
    import tarfile

    from electra_tf.core.errors import InputError

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("0001.txt")
        info.size = 11
        tar.addfile(info, io.BytesIO(b"just words\n"))
    (tmp_path / "pages.tar").write_bytes(buf.getvalue())
    (tmp_path / "pages.xz").write_bytes(lzma.compress(buf.getvalue()))
    for name, said in (("pages.xz", "is xz-compressed, not text; decompress it and extract its "
                                    "text files (an OpenWebText archive's pages: tar -xJf); "
                                    "this command reads text files only"),
                       ("pages.tar", "is a tar archive, not text; extract it (tar -xf) and give "
                                     "its text files: this command reads text files only")):
        with pytest.raises(InputError, match=re.escape(f"corpus file {tmp_path / name} {said}")):
            build_vocab(str(tmp_path / name), 200, str(tmp_path / "vocab.txt"))
    # an empty .xz (a download that wrote nothing) had been read as an empty text file
    (tmp_path / "zero.xz").write_bytes(b"")
    with pytest.raises(InputError, match=re.escape(
            f"corpus file {tmp_path / 'zero.xz'}: an empty file (0 bytes) named as a compressed "
            "one (a download cut short?); download it again, or leave it out")):
        build_vocab(str(tmp_path / "zero.xz"), 200, str(tmp_path / "vocab.txt"))


def test_output_that_is_a_directory_is_refused_before_reading(tmp_path):
    from electra_tf.core.errors import InputError

    with pytest.raises(InputError, match=r"--output .* is a directory; give the vocab file's"):
        build_vocab(str(tmp_path / "no_corpus.txt"), 100, str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_outputs_and_sizes_are_checked_before_the_corpus_is_read(tmp_path):
    """An existing vocabulary is replaced only with overwrite (records and models built
    with it need it as it is); a path under a file and a size with no room past the
    reserved tokens are refused before counting (no corpus exists here)."""
    from electra_tf.core.errors import InputError

    corpus = str(tmp_path / "no_corpus.txt")
    (tmp_path / "vocab.txt").write_text("kept\n")
    with pytest.raises(InputError, match=r"vocab.txt exists; .* pass --overwrite"):
        build_vocab(corpus, 200, str(tmp_path / "vocab.txt"))
    assert (tmp_path / "vocab.txt").read_text() == "kept\n"
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="is a file, not a folder"):
        build_vocab(corpus, 200, str(tmp_path / "f" / "vocab.txt"))
    with pytest.raises(InputError, match="vocab_size must exceed the 104 reserved tokens"):
        build_vocab(corpus, 104, str(tmp_path / "new.txt"))
    with pytest.raises(InputError, match=r"--max_lines must be >= 0 \(0: every line\), got -3"):
        build_vocab(corpus, 200, str(tmp_path / "new.txt"), max_lines=-3)
    with pytest.raises(InputError, match=r"--min_count must be >= 1 \(a word seen once is 1\), "
                                         "got 0"):
        build_vocab(corpus, 200, str(tmp_path / "new.txt"), min_count=0)
    blank = tmp_path / "blank.txt"  # three lines, one of spaces (it had said "1 lines")
    blank.write_text("\n\n  \n")
    with pytest.raises(InputError, match=r"has no words \(1 file\(s\); its 1 non-empty "
                                         r"line\(s\) hold only whitespace or characters the "
                                         r"tokenizer drops\)$"):
        build_vocab(str(blank), 200, str(tmp_path / "new.txt"))
    assert not (tmp_path / "new.txt").exists()


def test_overwrite_replaces_and_a_size_below_the_alphabet_is_noted(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("Café au lait. Tokens and TOKENS and tokens!\n\n" * 30, "utf-8")
    out = tmp_path / "vocab.txt"
    out.write_text("old\n")
    vocab = build_vocab(str(corpus), 110, str(out), min_count=1, overwrite=True)
    assert out.read_text("utf-8").splitlines() == vocab and len(vocab) > 110
    assert f"note: {len(vocab)} tokens, above --vocab_size=110" in capsys.readouterr().err
    # Far below the size (a small corpus, --min_count's default): said, with the flag
    # that made it so; one word seen more than --min_count times would still be kept.
    rare = tmp_path / "rare.txt"  # words seen once beside the corpus' 30 times
    rare.write_text(corpus.read_text("utf-8") + " ".join(f"w{i}x" for i in range(50)) + "\n",
                    "utf-8")
    vocab = build_vocab(str(rare), 400, str(out), overwrite=True)
    assert (f"note: {len(vocab)} tokens, well below --vocab_size=400: --min_count=10 leaves "
            "out the rarer words; lower it for a small corpus") in capsys.readouterr().err
    vocab = build_vocab(str(corpus), 400, str(out), overwrite=True)  # none rarer than 10
    assert "--min_count=10 leaves out" not in capsys.readouterr().err
    vocab = build_vocab(str(corpus), 400, str(out), min_count=1, overwrite=True)
    assert (f"note: {len(vocab)} tokens, well below --vocab_size=400: the corpus has no more "
            "words to learn from") in capsys.readouterr().err
    vocab = build_vocab(str(corpus), 400, str(out), min_count=1, max_lines=1, overwrite=True)
    assert (f"note: {len(vocab)} tokens, well below --vocab_size=400: --max_lines=1 read part "
            "of the corpus") in capsys.readouterr().err


def test_bytes_that_are_not_utf8_past_the_checked_start_are_refused(tmp_path):
    """The first 64 KiB are checked before the read; a Latin-1 part after them had been
    counted as U+FFFD tokens ("�", "##�") in the vocabulary, exit 0."""
    from electra_tf.core.errors import InputError

    corpus = tmp_path / "mixed.txt"
    corpus.write_bytes(b"the model reads a token\n" * 3000 + b"un caf\xe9 noir\n")
    with pytest.raises(InputError, match=rf"^{corpus}:3001: not UTF-8 text \(invalid "
                                         r"continuation byte\); convert the file to UTF-8"):
        build_vocab(str(corpus), 120, str(tmp_path / "vocab.txt"), min_count=1)
    assert not (tmp_path / "vocab.txt").exists()


def test_the_utf8_check_reads_in_chunks_and_counts_lines(tmp_path):
    from electra_tf.core.errors import InputError
    from electra_tf.core.fileio import check_utf8_file

    path = tmp_path / "t.txt"
    path.write_bytes("é\nzé\n".encode() * 5)  # 2-byte characters cut by 3-byte chunks
    check_utf8_file(str(path), chunk_bytes=3)
    path.write_bytes("é\nzé\n".encode() * 5 + b"ok\nbad \xff\n")
    with pytest.raises(InputError, match=r"t.txt:12: not UTF-8 text \(invalid start byte\)"):
        check_utf8_file(str(path), chunk_bytes=3)


def test_a_folder_given_as_the_corpus_says_so(tmp_path):
    from electra_tf.core.errors import InputError
    from electra_tf.core.fileio import expand_files

    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(InputError, match=rf"corpus pattern '{tmp_path}' is a folder; give its "
                                         rf"files, e.g. '{tmp_path}/\*'"):
        expand_files(str(tmp_path))
    assert expand_files(f"{tmp_path}/*") == [str(tmp_path / "a.txt")]
    fifo = tmp_path / "fifo"  # (had "matches no file")
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=rf"corpus '{fifo}' is a pipe \(FIFO\), not a regular "
                                         "file; give a file"):
        expand_files(str(fifo))
    bracket = tmp_path / "corpus[1].txt"  # a file whose name reads as a wildcard class
    bracket.write_text("x\n")
    with pytest.raises(InputError, match=re.escape(
            f"corpus pattern '{bracket}' matches no file, but names one: its name holds a "
            f"wildcard character ([, ], * or ?); give '{tmp_path}/corpus[[]1].txt'")):
        expand_files(str(bracket))
    assert expand_files(f"{tmp_path}/corpus[[]1].txt") == [str(bracket)]


def test_a_file_named_twice_is_read_once_however_spelled(tmp_path):
    """`--corpus=c.txt,./c.txt` (or a//b, or a link to it) had read its documents twice,
    into the train and held-out shards alike."""
    from electra_tf.core.fileio import expand_files

    (tmp_path / "a.txt").write_text("x\n")
    (tmp_path / "b.txt").write_text("y\n")
    (tmp_path / "link.txt").symlink_to(tmp_path / "a.txt")
    got = expand_files(f"{tmp_path}/a.txt,{tmp_path}//a.txt,{tmp_path}/./a.txt,"
                       f"{tmp_path}/link.txt,{tmp_path}/*.txt")
    assert len(got) == 2 and sorted(os.path.realpath(p) for p in got) == [
        os.path.realpath(tmp_path / "a.txt"), os.path.realpath(tmp_path / "b.txt")]
    # a hard link is the same file too (it had been read twice), and the same files
    # spelled otherwise come in the same order (they had been shuffled otherwise)
    os.link(tmp_path / "b.txt", tmp_path / "hard.txt")
    got = expand_files(f"{tmp_path}/b.txt,{tmp_path}/hard.txt,{tmp_path}/a.txt")
    assert got == [f"{tmp_path}/a.txt", f"{tmp_path}/b.txt"]
    assert [os.path.realpath(p) for p in expand_files(
        f"{tmp_path}/./b.txt,{tmp_path}/a.txt")] == [os.path.realpath(p) for p in expand_files(
        f"{tmp_path}/b.txt,{tmp_path}//a.txt")]
    # links keep their own names' order, not their targets' (a cache of hashed blobs,
    # snapshots/x/part-1 -> blobs/f00..., had been read in hash order)
    (tmp_path / "blobs").mkdir()
    (tmp_path / "snap").mkdir()
    for name, blob in (("part-1", "ffff"), ("part-2", "0000")):
        (tmp_path / "blobs" / blob).write_text(name)
        (tmp_path / "snap" / name).symlink_to(tmp_path / "blobs" / blob)
    assert [os.path.basename(p) for p in expand_files(f"{tmp_path}/snap/*")] == [
        "part-1", "part-2"]
    # a file reached by a link and by its own name: one order whichever pattern comes
    # first (the name kept had been the first matched, and the order with it)
    (tmp_path / "d").mkdir()
    (tmp_path / "z").mkdir()
    for name in ("1.txt", "2.txt"):
        (tmp_path / "d" / name).write_text(name)
    (tmp_path / "z" / "l.txt").symlink_to(tmp_path / "d" / "1.txt")
    orders = {tuple(open(p).read() for p in expand_files(patterns)) for patterns in (
        f"{tmp_path}/d/*,{tmp_path}/z/l.txt", f"{tmp_path}/z/l.txt,{tmp_path}/d/*")}
    assert orders == {("1.txt", "2.txt")}, orders


def test_words_split_at_every_unicode_space_as_the_tokenizer_splits(tmp_path):
    """The tokenizer splits words at every Unicode space and separator (\\p{Z}); the
    learner's word splitter (BERT's basic tokenizer) only at ASCII whitespace, and a
    cased vocabulary of web text had learned pieces such as '78\\xa0km' that no text
    tokenizes to (uncased, U+2028 had come through)."""
    import re

    from electra_tf.text.vocab_builder import count_words

    corpus = tmp_path / "c.txt"
    corpus.write_text("12\u00a0km from Paris\u3000London\u2028by\u2029air\u202fnow\n" * 3,
                      "utf-8")
    for lower in (True, False):
        counts, lines = count_words([str(corpus)], lower, lower)
        assert lines == 3
        assert not [w for w in counts if re.search(r"[\u00a0\u3000\u2028\u2029\u202f]", w)]
        assert counts["12"] == counts["km"] == counts["by"] == counts["air"] == 3


def test_an_output_that_is_a_pipe_or_a_corpus_file_is_refused(tmp_path):
    """--overwrite had renamed the new vocabulary over a device or a pipe (as root,
    /dev/null itself would have become a regular file) and over one of the corpus files
    it read; a corpus file whose name is not UTF-8 (TensorFlow reads the corpus) had
    been a ValueError traceback."""
    import stat

    from electra_tf.core.errors import InputError

    corpus = tmp_path / "c.txt"
    corpus.write_text("tokens and more tokens\n" * 20, "utf-8")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"--output .*pipe is a device or a pipe, not a file"):
        build_vocab(str(corpus), 200, str(fifo), min_count=1, overwrite=True)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(InputError, match=r"--output=.*c.txt is one of the --corpus files it "
                                         r"would read; write the vocabulary elsewhere"):
        build_vocab(str(tmp_path / "*.txt"), 200, str(corpus), min_count=1, overwrite=True)
    assert corpus.read_text("utf-8").startswith("tokens and more")
    odd = os.path.join(str(tmp_path), os.fsdecode(b"odd_\xff.txt"))
    with open(odd, "w", encoding="utf-8") as f:
        f.write("tokens\n")
    with pytest.raises(InputError, match=r"corpus file .*odd_\\xff.txt: its name is not UTF-8"):
        build_vocab(odd, 200, str(tmp_path / "vocab.txt"), min_count=1)
    assert not (tmp_path / "vocab.txt").exists()


def test_every_character_of_a_readable_word_is_kept(tmp_path):
    """The learner's defaults dropped words holding a character outside the corpus's 1,000
    most frequent (a CJK corpus of 1,200 characters came out with 200 of them [UNK], and
    build_pretraining_data then refused it) and the characters of words over 50
    characters (a 60-character word of its own letter was [UNK]). Every character of a
    word of at most 200 characters is a token now; a corpus of longer words only is
    refused, where a vocabulary of special tokens alone was written."""
    corpus = tmp_path / "c.txt"
    chars = [chr(0x4E00 + i) for i in range(1200)]
    lines = ["".join(chars[(7 * i + j) % 1200] for j in range(30)) for i in range(200)]
    corpus.write_text("\n".join(lines + ["x" * 60 + " " + "q" * 55, "hello world"]) + "\n",
                      "utf-8")
    out = tmp_path / "vocab.txt"
    build_vocab(str(corpus), 300, str(out), True, None, 1, 0)
    tok = Tokenizer(str(out))
    ids = tok.encode(lines + ["x" * 60, "q" * 55, "x" * 201])
    assert [list(row).count(100) for row in ids] == [0] * 202 + [1]
    long_only = tmp_path / "long.txt"
    long_only.write_text("a" * 201 + "\n", "utf-8")
    with pytest.raises(InputError) as raised:
        build_vocab(str(long_only), 300, str(tmp_path / "none.txt"), True, None, 1, 0)
    assert str(raised.value) == (
        f"corpus '{long_only}' has no word the tokenizer reads (every one is longer than 200 "
        "characters, one [UNK]): no vocabulary to learn")
    assert not (tmp_path / "none.txt").exists()


def test_a_killed_writes_leftover_is_named_and_the_write_is_named_after_its_file(
        tmp_path, capsys, monkeypatch):
    """A kill during the final write had left a `.tmp-XXXXXXXX` that no later run named
    (the other commands' single-file outputs, pack and score, say theirs): it is written
    as `.tmp-XXXXXXXX.vocab.txt` now, and a later run names one left beside it."""
    from electra_tf.core import fileio

    corpus = tmp_path / "c.txt"
    corpus.write_text("tokens and more tokens\n" * 30, "utf-8")
    out = tmp_path / "vocab.txt"
    names = []
    real = fileio.tempfile.mkstemp

    def mkstemp(**kwargs):
        fd, path = real(**kwargs)
        names.append(os.path.basename(path))
        return fd, path

    monkeypatch.setattr(fileio.tempfile, "mkstemp", mkstemp)
    build_vocab(str(corpus), 110, str(out), min_count=1)
    assert len(names) == 1 and re.fullmatch(r"\.tmp-[a-z0-9_]{8}\.vocab\.txt", names[0])
    left = tmp_path / ".tmp-abcd1234.vocab.txt"  # as a kill mid-write leaves it
    left.write_text("[PAD]\n")
    capsys.readouterr()
    build_vocab(str(corpus), 110, str(out), min_count=1, overwrite=True)
    assert (f"[build_vocab] note: {left} (0.0 MiB) is what a stopped run writing vocab.txt "
            "left half-written; remove it") in capsys.readouterr().err
    assert left.exists()  # (another run may be writing it)
