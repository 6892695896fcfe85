"""TaggingTask.read: CoNLL parsing, the tag set, and every bad-input error (file:line)."""

from __future__ import annotations

import pytest

from electra_tf.core.errors import TaskDataError
from electra_tf.tasks.tagging import TaggingTask
from tests.finetuning import original_tagging as original

CONLL03_TRAIN = """\
-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
-DOCSTART- -X- -X- O

Café NNP B-NP B-LOC
hellos NNS I-NP O


"""

CONLL2000_TRAIN = """\
He PRP B-NP
reckons VBZ B-VP
the DT B-NP
current JJ I-NP
account NN I-NP

. . O
"""

BIOES_TRAIN = "-DOCSTART- O\n\nthe O\nhello S-PER\nworld B-ORG\nmodel I-ORG\ntokens E-ORG\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_reads_conll2003_and_learns_sorted_tags_o_first(tmp_path):
    write(tmp_path, "train.txt", CONLL03_TRAIN)
    task = TaggingTask()
    assert task.label_names == ()
    examples = task.read(str(tmp_path), "train")
    assert [ex.words for ex in examples] == [
        ["EU", "rejects", "German", "call", "."], ["Peter", "Blackburn"], ["Café", "hellos"]]
    assert examples[0].tags == ["B-ORG", "O", "B-MISC", "O", "O"]
    assert examples[2].tags == ["B-LOC", "O"]
    # A -DOCSTART- line right after a word ends the sentence too.
    assert [ex.line for ex in examples] == [3, 9, 13]
    assert examples[1].where(1).endswith("train.txt:10")
    # every type's B- and I- (train has LOC, MISC and ORG spans of one word only)
    assert task.label_names == ("O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC",
                                "I-ORG", "I-PER")


def test_a_dev_span_may_take_a_prefix_train_has_not_for_its_type(tmp_path):
    """Train's LOC spans are one word each (B-LOC alone), dev's New York is B-LOC I-LOC;
    and an IOB1 file's types come with I- alone. The original maps the tags of every
    split; BIO had refused dev ('tag 'I-LOC' is not in the tag set'), as BIOES had
    before it learned every type's four tags."""
    write(tmp_path, "train.txt", "Paris B-LOC\nis O\n\nBob B-PER\nSmith I-PER\nsaw O\n"
                                 "Rome B-LOC\n\nthe O\nEU I-ORG\n")
    write(tmp_path, "dev.txt", "New B-LOC\nYork I-LOC\nis O\n\nthe O\nEU B-ORG\n")
    task = TaggingTask()
    task.read(str(tmp_path), "train")
    assert task.label_names == ("O", "B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER")
    assert [ex.tags for ex in task.read(str(tmp_path), "dev")] == [
        ["B-LOC", "I-LOC", "O"], ["O", "B-ORG"]]


def test_data_dir_may_be_the_file(tmp_path):
    path = write(tmp_path, "chunk.txt", CONLL2000_TRAIN)
    chunk = TaggingTask(name="chunking")  # CoNLL-2000: the chunk tag is the last column
    examples = chunk.read(path, "train")
    assert examples[0].words == ["He", "reckons", "the", "current", "account"]
    assert examples[0].tags == ["B-NP", "B-VP", "B-NP", "I-NP", "I-NP"]
    assert chunk.label_names == ("O", "B-NP", "B-VP", "I-NP", "I-VP")


def test_bioes_and_given_label_set(tmp_path):
    write(tmp_path, "train.txt", BIOES_TRAIN)
    labels = ["O", "S-PER", "B-ORG", "I-ORG", "E-ORG", "S-LOC"]
    task = TaggingTask(label_names=labels, scheme="BIOES")
    examples = task.read(str(tmp_path), "train")
    assert examples[0].tags == ["O", "S-PER", "B-ORG", "I-ORG", "E-ORG"]
    assert task.label_names == tuple(labels)  # a given set is never re-learned


def test_bioes_reads_bio_files_as_the_original_converts_them(tmp_path, caplog):
    """--tagging_scheme=BIOES trains as the original's chunking (LABEL_ENCODING "BIOES"):
    a BIO file's tags are made BIOES, the tag set is learned from them, and dev tags
    are checked against it after the conversion. BIO files had been refused."""
    import random

    from electra_tf.tasks.tagging import to_bioes

    rng = random.Random(0)
    shapes = ["O", "B-NP", "I-NP", "B-VP", "I-VP", "E-NP", "S-VP"]
    for _ in range(500):
        tags = [rng.choice(shapes) for _ in range(rng.randint(1, 9))]
        assert to_bioes(tags) == original.get_tags(original.get_span_labels(tags), len(tags),
                                                   "BIOES"), tags
    write(tmp_path, "train.txt", CONLL2000_TRAIN)
    # a dev span of one word: B-VP is S-VP, which the train split has
    write(tmp_path, "dev.txt", "He PRP B-NP\nruns VBZ B-VP\n. . O\n")
    chunk = TaggingTask(name="chunking", scheme="BIOES")
    with caplog.at_level("WARNING"):
        train = chunk.read(str(tmp_path), "train")
    assert train[0].tags == ["S-NP", "S-VP", "B-NP", "I-NP", "E-NP"]
    # every type's four tags, as the original maps train, dev and test: a dev S-X of a
    # type train holds only longer (or B-X E-X of one it holds only as S-X) was refused
    assert chunk.label_names == ("O", "B-NP", "B-VP", "E-NP", "E-VP", "I-NP", "I-VP", "S-NP",
                                 "S-VP")
    assert chunk.read(str(tmp_path), "dev")[0].tags == ["S-NP", "S-VP", "O"]
    assert "did not form BIOES spans" not in caplog.text  # BIO made BIOES: no warning
    # BIOES tags come back as they are; ill-formed ones as the original reads them, once
    write(tmp_path, "dev.txt", BIOES_TRAIN + "\nEU B-ORG\nrejects I-ORG\nit O\n")
    task = TaggingTask(label_names=["O", "S-PER", "B-ORG", "I-ORG", "E-ORG"], scheme="BIOES")
    with caplog.at_level("WARNING"):
        dev = task.read(str(tmp_path), "dev")
    assert [ex.tags for ex in dev] == [["O", "S-PER", "B-ORG", "I-ORG", "E-ORG"],
                                       ["B-ORG", "E-ORG", "O"]]
    assert "1 tag(s) did not form BIOES spans" in caplog.text
    assert "dev.txt:10: I-ORG -> E-ORG" in caplog.text
    write(tmp_path, "dev.txt", "EU B-LOC\nrejects I-LOC\n")
    with pytest.raises(TaskDataError, match=r"dev.txt:1: tag 'B-LOC' \(the file's tags "
                                            r"made BIOES\) is not in the tag set"):
        task.read(str(tmp_path), "dev")


def test_words_only_file_is_unlabelled(tmp_path):
    write(tmp_path, "test.txt", "-DOCSTART-\n\nEU\nrejects\n\nPeter\n")
    examples = TaggingTask().read(str(tmp_path), "test")
    assert [ex.words for ex in examples] == [["EU", "rejects"], ["Peter"]]
    assert all(ex.tags is None for ex in examples)


BAD_INPUTS = [
    # (file text, scheme, line, words in the message)
    ("EU NNP B-NP B-ORG\nrejects\n", "BIO", 2, "too few columns"),
    # a line that lost a column: its POS tag would become the tag
    ("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP\n", None, 3,
     "3 columns, but the file's other lines have 4"),
    ("EU NNP B-ORG\n\nrejects VBZ O\ncall NN O O\n", None, 4,
     "4 columns, but the file's other lines have 3"),
    ("EU\tB-ORG\nNew York\tB-LOC\nx\t\tO\n", None, 3, "empty column 2"),
    ("EU B-ORG\n\n\nx E-ORG\n", "BIO", 4, "not valid under BIO"),
    # a BIOES file under BIO (ner's default): the flag that reads it is named
    ("EU B-ORG\nx S-ORG\n", "BIO", 2, r"not valid under BIO \(O, B-X, I-X\); BIOES files: "
                                      r"--tagging_scheme=BIOES$"),
    ("EU B-ORG\nx X-ORG\n", "BIOES", 2, r"not valid under BIOES \(O, B-X, I-X, E-X, S-X\)$"),
    ("EU B-\n", "BIOES", 1, "not valid under BIOES"),
    ("EU b-org\n", "BIO", 1, r"not valid under BIO \(O, B-X, I-X\)$"),
    # a line break other than \n, \r\n or \r inside a line, which split() took for a space
    ("EU B-ORG\nrejects\u2028O\n", "BIO", 2, r"line-break character \(U\+2028\)"),
    ("EU B-ORG\x0crejects O\n", "BIO", 1, r"line-break character \(U\+000C\)"),
    ("EU B-\u200bORG\n", "BIO", 1, r"invisible or control character \(U\+200B\)"),
    # what the tokenizer deletes, as a data label's check (it let private-use pass)
    ("EU B-ORG\ue000\n", "BIO", 1, r"invisible or control character \(U\+E000\)"),
    ("EU B-ORG\ufffd\n", "BIO", 1, r"invisible or control character \(U\+FFFD\)"),
    ("EU\tB-ORG\x85\n", None, 1, r"(invisible or control character|line-break character) "
                                  r"\(U\+0085\)"),
    ("-DOCSTART- -X- O\n\n\n", "BIO", 3, "empty split"),
    ("", "BIO", 1, "empty split"),
]


@pytest.mark.parametrize("text,scheme,line,message", BAD_INPUTS)
def test_bad_input_names_file_and_line(tmp_path, text, scheme, line, message):
    path = write(tmp_path, "dev.txt", text)
    with pytest.raises(TaskDataError, match=message) as info:
        TaggingTask(scheme=scheme).read(str(tmp_path), "dev")
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_a_words_only_file_with_one_line_of_two_columns_names_that_line(tmp_path):
    """A test file of words whose one line holds a space: that line had made the file
    "tagged", and the error blamed line 1 for a missing tag."""
    path = write(tmp_path, "test.txt", "a\nb\nNew York\nc\n")
    with pytest.raises(TaskDataError) as info:
        TaggingTask().read(str(tmp_path), "test")
    assert str(info.value) == (
        f"{path}:3: 2 columns, but the file's other lines have 1 (the word first, the tag "
        "last; a word with a space in it? separate the columns with tabs): 'New York'")
    write(tmp_path, "test.txt", "a\nb\nc\n")
    assert TaggingTask().read(str(tmp_path), "test")[0].tags is None


def test_tag_outside_given_or_learned_set(tmp_path):
    write(tmp_path, "dev.txt", "EU B-ORG\n\nPeter B-PER\nBlackburn I-PER\n")
    given = TaggingTask(label_names=["O", "B-ORG", "I-ORG", "B-PER"])
    with pytest.raises(TaskDataError, match=r"dev.txt:4: tag 'I-PER' is not in the tag set"):
        given.read(str(tmp_path), "dev")

    train = write(tmp_path, "train.txt", "EU B-ORG\nrejects O\n")
    learned = TaggingTask()
    learned.read(train, "train")  # the file alone: dev's tags are not learned
    with pytest.raises(TaskDataError, match=r"dev.txt:3: tag 'B-PER' is not in the tag set"):
        learned.read(str(tmp_path), "dev")


def test_the_tag_set_is_learned_from_train_dev_and_test_as_the_originals(tmp_path, caplog):
    """A tag only dev or test holds gets an output (the original's label mapping reads
    train, dev and test), where it had stopped the run; the generic task's BIO-shaped
    tags too. A words-only or unreadable test file is left to its own read."""
    write(tmp_path, "train.txt", "EU B-ORG\nrejects O\n")
    write(tmp_path, "dev.txt", "EU B-ORG\n\nPeter B-PER\nBlackburn I-PER\n")
    write(tmp_path, "test.txt", "EU\nrejects\n")
    learned = TaggingTask()
    with caplog.at_level("WARNING"):
        learned.read(str(tmp_path), "train")
    assert learned.label_names == ("O", "B-ORG", "B-PER", "I-ORG", "I-PER")
    assert "the tag set holds 2 tag(s) only the dev or test split has" in caplog.text
    assert "B-PER, I-PER" in caplog.text
    assert [ex.tags for ex in learned.read(str(tmp_path), "dev")] == [
        ["B-ORG"], ["B-PER", "I-PER"]]

    write(tmp_path, "train.txt", "replaced B-MISC\n\nmodel B-ORG\nreads I-ORG\n")
    write(tmp_path, "dev.txt", "replaced B-MISC\nmodel I-MISC\n")
    write(tmp_path, "test.txt", "bad\tcolumns here\tB-X\tO\nok O\n\n")
    generic = TaggingTask(scheme=None, name="tagging")
    generic.read(str(tmp_path), "train")
    assert generic.label_names == ("B-MISC", "B-ORG", "I-MISC", "I-ORG")
    generic.read(str(tmp_path), "dev")
    with pytest.raises(TaskDataError, match="test.txt"):
        generic.read(str(tmp_path), "test")


def test_train_must_be_labelled_and_exist(tmp_path):
    write(tmp_path, "train.txt", "\nEU\nrejects\n")
    with pytest.raises(TaskDataError, match=r"train.txt:2: the train split has no tag column"):
        TaggingTask().read(str(tmp_path), "train")
    with pytest.raises(TaskDataError, match=r"dev.txt: no such file"):
        TaggingTask().read(str(tmp_path), "dev")
    # dev is scored: a words-only dev file had failed after training, in a traceback
    write(tmp_path, "dev.txt", "EU\nrejects\n")
    with pytest.raises(TaskDataError, match=r"dev.txt:1: the dev split has no tag column"):
        TaggingTask().read(str(tmp_path), "dev")
    write(tmp_path, "test.txt", "EU\nrejects\n")
    assert TaggingTask().read(str(tmp_path), "test")[0].tags is None


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "dev.txt"
    path.write_bytes(b"EU B-ORG\nbad\xff O\n")
    with pytest.raises(TaskDataError, match=r"dev.txt:2: not valid UTF-8"):
        TaggingTask().read(str(tmp_path), "dev")


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="scheme"):
        TaggingTask(scheme="IOB1")
    with pytest.raises(ValueError, match="BIO tags"):
        TaggingTask(label_names=["O", "S-PER"])
    with pytest.raises(ValueError, match="distinct"):
        TaggingTask(label_names=["O", "O"])


def test_a_line_with_fewer_columns_names_the_line_whichever_comes_first(tmp_path):
    """The file's column count is that of most of its lines: a first line that lost its
    last column is the one named (not every line after it)."""
    path = write(tmp_path, "train.txt", "EU NNP B-NP\nrejects VBZ B-VP O\nGerman JJ B-NP "
                                        "B-MISC\n\nPeter NNP B-NP B-PER\n")
    with pytest.raises(TaskDataError) as raised:
        TaggingTask(scheme=None, name="tagging").read(str(tmp_path), "train")
    assert str(raised.value).startswith(
        f"{path}:1: 3 columns, but the file's other lines have 4"), raised.value


def test_a_byte_order_mark_is_dropped(tmp_path):
    """As classification files: a BOM does not make -DOCSTART- (or the first word) a word."""
    (tmp_path / "train.txt").write_bytes(
        "\ufeff-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n".encode())
    (tmp_path / "dev.txt").write_bytes("\ufeffEU B-ORG\nrejects O\n".encode())
    task = TaggingTask()
    train = task.read(str(tmp_path), "train")
    assert [ex.words for ex in train] == [["EU", "rejects"]] and train[0].line == 3
    assert task.label_names == ("O", "B-ORG", "I-ORG")
    assert task.read(str(tmp_path), "dev")[0].words == ["EU", "rejects"]


def test_a_line_with_tabs_is_split_on_tabs(tmp_path):
    """A word may hold spaces where the columns are tab-separated: "New York" stays one
    word (it used to be "New", with York dropped)."""
    write(tmp_path, "train.txt", "-DOCSTART- -X- O\n\nNew York\tNNP\tB-LOC\n"
                                 "  lives \t VBZ\tO \t\r\nthere RB O\n")
    task = TaggingTask(name="tagging", scheme=None)
    examples = task.read(str(tmp_path), "train")
    assert examples[0].words == ["New York", "lives", "there"]
    assert examples[0].tags == ["B-LOC", "O", "O"]


def test_predictions_of_words_with_spaces_are_tab_separated_and_read_back(tmp_path):
    """A tab-separated file's "New York" is one word in the predictions file too: its
    columns are then joined by tabs throughout, so the file reads back the same."""
    write(tmp_path, "train.txt", "New York\tB-LOC\nis\tO\n\nthere\tO\n")
    task = TaggingTask()
    examples = task.read(str(tmp_path), "train")
    preds = [["B-LOC", "B-LOC"], ["O"]]
    out = tmp_path / "dev_predictions.txt"
    task.write_predictions(preds, examples, str(out))
    assert out.read_text(encoding="utf-8") == ("New York\tB-LOC\tB-LOC\nis\tO\tB-LOC\n\n"
                                               "there\tO\tO\n\n")
    back = TaggingTask(label_names=task.label_names).read_file(str(out))
    assert [ex.words for ex in back] == [ex.words for ex in examples]
    assert [ex.tags for ex in back] == preds


def test_lone_carriage_returns_end_lines(tmp_path):
    """An old Mac file ("\\r" line ends) was one line: its words became one sentence of
    one word, trained and scored without a word."""
    (tmp_path / "train.txt").write_bytes(b"EU B-ORG\rrejects O\r\rPeter B-PER\r")
    (tmp_path / "dev.txt").write_bytes(b"EU\tB-ORG\r\n\r\nPeter\tB-PER")
    task = TaggingTask()
    train = task.read(str(tmp_path), "train")
    assert [(ex.words, ex.tags, ex.line) for ex in train] == [
        (["EU", "rejects"], ["B-ORG", "O"], 1), (["Peter"], ["B-PER"], 4)]
    dev = task.read(str(tmp_path), "dev")
    assert [(ex.words, ex.line) for ex in dev] == [(["EU"], 1), (["Peter"], 3)]


def test_doubled_carriage_returns_and_a_trailing_tab_read_as_the_original_reads_them(
        tmp_path):
    """"\r\r\n" (a CRLF file converted once more) had made every word its own sentence,
    silently (the original's reader strips the "\r"s of a line); a tab trailing a
    space-separated line had made it one column ("too few columns")."""
    (tmp_path / "train.txt").write_bytes(
        b"New B-ORG\r\r\nYork I-ORG\r\r\nis O \t\r\r\n\r\r\nbig O\r\r\n")
    task = TaggingTask()
    assert [(ex.words, ex.tags, ex.line) for ex in task.read(str(tmp_path), "train")] == [
        (["New", "York", "is"], ["B-ORG", "I-ORG", "O"], 1), (["big"], ["O"], 5)]


def test_a_byte_order_mark_inside_a_file_is_dropped(tmp_path):
    """Two files saved with a BOM and joined by cat: the second BOM made
    "\\ufeff-DOCSTART-" a word."""
    (tmp_path / "train.txt").write_bytes(
        "\ufeffEU B-ORG\n\n\ufeff-DOCSTART- -X- O\n\nrejects O\n".encode())
    task = TaggingTask()
    assert [ex.words for ex in task.read(str(tmp_path), "train")] == [["EU"], ["rejects"]]


def test_a_train_split_of_one_tag_and_odd_tags_are_refused(tmp_path):
    path = write(tmp_path, "train.txt", "EU O\nrejects O\n")
    with pytest.raises(TaskDataError) as raised:
        TaggingTask().read(str(tmp_path), "train")
    assert str(raised.value) == (
        f"{path}: every word of the train split has the tag 'O': nothing to learn (are its "
        "tags in the last column, one word per line?); give --label_names to train on it "
        "anyway")
    assert TaggingTask(label_names=["O", "B-ORG"]).read(str(tmp_path), "train")
    # the generic task: a tab-separated tag holding a space had raised KeyError: None
    path = write(tmp_path, "train.txt", "the\tDT\nmodel\tNN P\n")
    with pytest.raises(TaskDataError) as raised:
        TaggingTask(name="tagging", scheme=None).read(str(tmp_path), "train")
    assert str(raised.value) == f"{path}:2: tag 'NN P' holds whitespace; a tag is one word"


def test_unreadable_or_folder_splits_are_named(tmp_path):
    import os

    (tmp_path / "dev.txt").mkdir()
    with pytest.raises(TaskDataError, match=r"dev.txt: a folder, not a file \(split 'dev'"):
        TaggingTask().read(str(tmp_path), "dev")
    path = write(tmp_path, "train.txt", "EU B-ORG\n")
    os.chmod(path, 0)
    try:
        if os.access(path, os.R_OK):  # root reads it anyway
            pytest.skip("this user reads files of mode 000")
        with pytest.raises(TaskDataError, match=r"train.txt: cannot read it \(Permission"):
            TaggingTask().read(str(tmp_path), "train")
    finally:
        os.chmod(path, 0o644)


def test_a_failed_predictions_write_keeps_the_earlier_file(tmp_path, monkeypatch):
    write(tmp_path, "train.txt", "EU B-ORG\nrejects O\n")
    task = TaggingTask()
    examples = task.read(str(tmp_path), "train")
    out = tmp_path / "dev_predictions.txt"
    task.write_predictions([["B-ORG", "O"]], examples, str(out))
    before = out.read_bytes()

    import builtins
    real_open = builtins.open

    class Full:  # a file that the disk fills up under: truncated, then nothing fits
        def __init__(self, f):
            self.f = f

        def write(self, text):
            raise OSError(28, "No space left on device")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    def full_disk(path, mode="r", *args, **kwargs):
        f = real_open(path, mode, *args, **kwargs)
        return Full(f) if "w" in mode else f

    monkeypatch.setattr(builtins, "open", full_disk)
    with pytest.raises(OSError, match="No space"):
        task.write_predictions([["O", "O"]], examples, str(out))
    monkeypatch.undo()
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev_predictions.txt", "train.txt"]


def test_the_chunking_flagfile_is_the_originals_chunk_task():
    """configs/chunking.flags: configure_finetuning.py's "chunk" (256 tokens, 3 epochs,
    batch 32, LABEL_ENCODING "BIOES")."""
    from helpers import finetuning_from_flags

    task, config, _ = finetuning_from_flags("--flagfile=configs/chunking.flags",
                                            "--init_checkpoint=m", "--data_dir=d",
                                            "--model_dir=o")
    assert (task.name, task.scheme, config.max_seq_length, config.num_train_epochs,
            config.train_batch_size) == ("chunking", "BIOES", 256, 3.0, 32)


def test_lines_of_two_column_counts_as_common_as_each_other_name_both(tmp_path):
    """One line of each: which one lost (or gained) a column cannot be told (the larger
    count had been taken as right, and the line of the smaller blamed)."""
    path = write(tmp_path, "train.txt", "the O\nmodel B-ORG extra\n")
    with pytest.raises(TaskDataError) as raised:
        TaggingTask().read(path, "train")
    assert str(raised.value) == (
        f"{path}:1: 2 columns, but as many of the file's lines have 3 (the first: line 2); "
        "every line has the word first and the tag last, in as many columns")
