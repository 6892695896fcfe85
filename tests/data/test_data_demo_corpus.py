"""The demo corpus: docstrings of the standard library and of installed packages."""

import pytest

from electra_tf.core.errors import InputError
from electra_tf.data import demo_corpus

MODULE = '''"""A module about parsing.

It reads the tokens of a sentence and returns them. Nothing is imported.
"""


def parse(text):
    """Parse the text into tokens.

    The tokens keep their order. Empty text gives no tokens.

    >>> parse("a b")
    """
'''


def fake_tree(root, names):
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(MODULE.replace("parsing", name), encoding="utf-8")
    return str(root)


def test_package_dirs_follow_the_stdlib_and_processes_do_not_change_the_bytes(tmp_path):
    stdlib = fake_tree(tmp_path / "lib", ["a.py", "b/c.py", "test/skipped.py"])
    site = fake_tree(tmp_path / "site", ["pkg/x.py", "pkg/tests/skipped.py", "other.py"])
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    stats = demo_corpus.write_corpus(str(one), stdlib_dir=stdlib, package_dirs=(site,),
                                     stdlib_output=str(tmp_path / "stdlib_part.txt"))
    demo_corpus.write_corpus(str(two), stdlib_dir=stdlib, package_dirs=(site,), processes=2)
    assert one.read_bytes() == two.read_bytes()
    # The stdlib part, written in the same pass, is what the stdlib alone gives.
    alone = demo_corpus.write_corpus(str(tmp_path / "alone.txt"), stdlib_dir=stdlib)
    assert (tmp_path / "stdlib_part.txt").read_bytes() == (tmp_path / "alone.txt").read_bytes()
    assert (stats["stdlib_documents"], stats["stdlib_lines"]) == (
        alone["documents"], alone["lines"]) == (2, alone["lines"])
    # One document per file, the stdlib's first; test/ and tests/ left out.
    assert stats["documents"] == 4
    docs = one.read_text(encoding="utf-8").strip().split("\n\n")
    assert [d.splitlines()[0] for d in docs] == [
        f"A module about {name}." for name in ("a.py", "b/c.py", "other.py", "pkg/x.py")]
    assert "Nothing is imported." in docs[0] and ">>>" not in one.read_text()


def test_a_data_dir_of_the_other_corpus_is_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.txt").write_text("One sentence here.\nAnother one there.\n")
    with pytest.raises(InputError, match="holds the 'stdlib' demo corpus, not 'installed'"):
        demo_corpus.prepare_demo_data(str(data), 100, 32, corpus="installed")
    with pytest.raises(InputError, match="demo corpus must be one of"):
        demo_corpus.prepare_demo_data(str(data), 100, 32, corpus="web")


def test_a_vocabulary_built_for_another_demo_vocab_size_is_refused(tmp_path):
    """--demo_vocab_size on a folder that holds the demo's vocabulary had been ignored,
    without a word."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.txt").write_text("One sentence here.\nAnother one there.\n")
    (data / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    (data / "demo_vocab_size.txt").write_text("4000\n")
    with pytest.raises(InputError) as raised:
        demo_corpus.prepare_demo_data(str(data), 1000, 32)
    assert str(raised.value) == (f"{data} holds a vocabulary built for --demo_vocab_size=4000, "
                                 "not 1000: use another --demo_data_dir, or delete it to "
                                 "rebuild")


def test_the_vocab_corpus_is_written_before_the_corpus_whose_presence_says_both_are(
        tmp_path, monkeypatch):
    """A kill between the two writes had left corpus.txt without stdlib_corpus.txt: the
    demo skipped the corpus step and failed on every rerun."""
    from electra_tf.core import fileio

    written, write = [], fileio.atomic_write_text
    monkeypatch.setattr(fileio, "atomic_write_text",
                        lambda path, text: (written.append(path), write(path, text)))
    stdlib = fake_tree(tmp_path / "lib", ["a.py"])
    site = fake_tree(tmp_path / "site", ["pkg/x.py"])
    demo_corpus.write_corpus(str(tmp_path / "corpus.txt"), stdlib_dir=stdlib,
                             package_dirs=(site,),
                             stdlib_output=str(tmp_path / "stdlib_corpus.txt"))
    assert written == [str(tmp_path / "stdlib_corpus.txt"), str(tmp_path / "corpus.txt")]
