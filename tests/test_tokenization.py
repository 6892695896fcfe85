"""Tokenizer: special ids, robustness, normalization modes, eager == tf.data."""

import os

import pytest
import tensorflow as tf
from helpers import decode, tiny_vocab_tokens, write_vocab

from electra_tf.core.errors import VocabError
from electra_tf.text.cleaning import without_lone_surrogates
from electra_tf.text.tokenizer import BERT_RESERVED_TOKENS, Tokenizer, load_vocab

ODD_INPUTS = [
    "Hello, world!",
    "中国人",  # CJK: one token per character
    "Café CAFÉ",  # accents
    "hello 😀 world",  # emoji
    "",
    "   \t ",
    "hello " * 5000,  # a very long line
    "x" * 1000,  # one over-long word -> [UNK]
]


def test_special_ids_sit_where_bert_has_them(tiny_vocab):
    tok = Tokenizer(tiny_vocab)
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 100, 101, 102, 103)
    assert BERT_RESERVED_TOKENS[1] == "[unused0]" and len(BERT_RESERVED_TOKENS) == 104


def test_odd_inputs_never_crash_and_cjk_splits(tiny_vocab):
    tok = Tokenizer(tiny_vocab)
    ids = tok.encode(ODD_INPUTS)
    assert len(ids) == len(ODD_INPUTS)
    assert tok.convert_ids_to_tokens(ids[1]) == ["中", "国", "人"]
    assert tok.convert_ids_to_tokens(ids[2]) == ["cafe", "cafe"]
    assert ids[4] == [] and ids[5] == []
    assert len(ids[6]) == 5000
    assert ids[7] == [tok.unk_id]
    assert tok.convert_ids_to_tokens(ids[3]) == ["hello", "[UNK]", "world"]


def test_invalid_utf8_is_dropped_not_fatal(tiny_vocab):
    """As the original: its convert_to_unicode drops invalid bytes ("ignore") and its
    _clean_text U+FFFD (they had been an [UNK] each)."""
    tok = Tokenizer(tiny_vocab)
    ids = tok.tokenize(tf.constant([b"hello \xff\xfe world", b"\xc3"])).to_list()
    assert tok.convert_ids_to_tokens(ids[0]) == ["hello", "world"]
    assert ids[1] == []


CLEANING = [  # (do_lower_case, text, the original FullTokenizer's tokens)
    # C0/C1 controls are deleted, not word breaks (cp1252's apostrophe read as Latin-1)
    (True, "don\x92t a\x00b x\x0cy", ["don", "##t", "ab", "x", "##y"]),
    (False, "don\x92t a\x00b x\x0cy", ["don", "##t", "ab", "x", "##y"]),
    # format characters: soft hyphen, zero-width space, ZWNJ, ZWJ, BOM (cased had split)
    (False, "wor\u00adld wor\u200bld wor\u200cld wor\u200dld wor\ufeffld", ["world"] * 5),
    (True, "wor\u0600ld", ["world"]),  # a "prepended" format mark
    # U+FFFD, private use and unassigned code points are deleted (had been [UNK] words)
    (True, "a\ufffdb \ufffd x\ue000y a\u0378b \U000f0000", ["ab", "x", "##y", "ab"]),
    (True, "tab\tand\nline\rends", ["tab", "and", "line", "ends"]),  # kept: whitespace
    (True, "a\ud800b", ["ab"]),  # a lone surrogate (Cs): had been TensorFlow's conversion error
    # a word is [UNK] past 200 characters (the original's max_input_chars_per_word),
    # not past 100 bytes: 2- and 3-byte scripts had become [UNK] from 51 and 34
    (True, "a" * 150, ["a"] + ["##a"] * 149),
    (True, "a" * 201 + " b", ["[UNK]", "b"]),
    (False, "\u00e9" * 60, ["\u00e9"] + ["##\u00e9"] * 59),
    (False, "\u0e01" * 200, ["\u0e01"] + ["##\u0e01"] * 199),
    (False, "\u0e01" * 201, ["[UNK]"]),
    (True, "hello " + "ab" * 101 + " world", ["hello", "[UNK]", "world"]),
    (True, "e\u0301" * 150, ["e"] + ["##e"] * 149),  # counted after the accents go
    # and after NFD: a Hangul syllable is its 2 or 3 jamo (67 are 201 characters there;
    # they had counted 67, and were no [UNK] up to 200 syllables)
    (True, "\ud55c" * 66, ["\u1112"] + ["##\u1161", "##\u11ab", "##\u1112"] * 65
     + ["##\u1161", "##\u11ab"]),
    (True, "ab " + "\ud55c" * 67 + " ab", ["ab", "[UNK]", "ab"]),
    (True, "a" * 198 + "\ud55c", ["[UNK]"]),
    (False, "\ud55c" * 67, ["\ud55c"] + ["##\ud55c"] * 66),  # cased: no NFD, 67
]


@pytest.mark.parametrize("lower,text,expected", CLEANING)
def test_text_is_cleaned_as_the_original_cleans_it(tmp_path, lower, text, expected):
    extra = ["world", "wor", "##ld", "don", "##t", "ab", "##y", "##a", "tab", "and", "line",
             "ends", "\u00e9", "##\u00e9", "\u0e01", "##\u0e01", "e", "##e", "\u1112",
             "##\u1112", "##\u1161", "##\u11ab", "\ud55c", "##\ud55c"]
    base = tiny_vocab_tokens()
    vocab = write_vocab(tmp_path / "v.txt", base + [t for t in extra if t not in base])
    tok = Tokenizer(vocab, do_lower_case=lower)
    assert tok.convert_ids_to_tokens(tok.encode([text])[0]) == expected
    text = without_lone_surrogates(text)  # as SQuAD's reader gives it (a str's UTF-8)
    ids, starts, ends, indexed = tok.tokenize_with_offsets([text])
    assert tok.convert_ids_to_tokens(ids[0].numpy()) == expected  # the same with offsets
    assert indexed.numpy()[0] == text.encode("utf-8")  # offsets index the text itself


def test_offsets_index_the_text_around_deleted_characters(tmp_path):
    """A token's span covers the deleted characters inside it, and the ones between
    tokens belong to none: the served word texts and SQuAD's answers are the input's."""
    base = tiny_vocab_tokens()
    vocab = write_vocab(tmp_path / "v.txt", base + [t for t in ("world", "ab") if t not in base])
    for lower in (True, False):
        tok = Tokenizer(vocab, do_lower_case=lower)
        text = "\u200bwor\u00adld \x00 ab\ufeff \ue000world"
        ids, starts, ends, indexed = tok.tokenize_with_offsets([text])
        raw = indexed.numpy()[0]
        spans = [raw[a:b].decode() for a, b in zip(starts[0].numpy(), ends[0].numpy())]
        assert spans == ["wor\u00adld", "ab", "world"], (lower, spans)
    # in a batch, each row's offsets are its own (a row's end had been taken for the
    # next row's start: a piece of no width at 0 got the row before's shift)
    tok = Tokenizer(vocab)
    texts = ["ab\u200b\u200b\u200b world", "\u2474 ab", "\u200b\u200bab"]
    ids, starts, ends, indexed = tok.tokenize_with_offsets(texts)
    for r, text in enumerate(texts):
        alone = tok.tokenize_with_offsets([text])
        assert starts[r].numpy().tolist() == alone[1][0].numpy().tolist()
        assert ends[r].numpy().tolist() == alone[2][0].numpy().tolist(), (r, ends[r], alone[2])
    # invalid bytes: offsets index the input with U+FFFD in their place
    tok = Tokenizer(vocab)
    ids, starts, ends, indexed = tok.tokenize_with_offsets([b"\xff ab"])
    assert indexed.numpy()[0] == "\ufffd ab".encode() and starts[0].numpy().tolist() == [4]


@pytest.mark.parametrize("lower,strip,expected", [
    (True, None, ["cafe", "cafe"]),  # BERT uncased
    (True, False, ["caf", "##é", "caf", "##é"]),  # case folding only
    (False, True, ["[UNK]", "[UNK]"]),  # NFD + no accents, case kept: Cafe / CAFE
    (False, None, ["[UNK]", "[UNK]"]),  # cased
])
def test_normalization_modes(tmp_path, lower, strip, expected):
    vocab = write_vocab(tmp_path / "v.txt", tiny_vocab_tokens() + ["##é", "caf"])
    tok = Tokenizer(vocab, do_lower_case=lower, strip_accents=strip)
    assert tok.convert_ids_to_tokens(tok.encode(["Café CAFÉ"])[0]) == expected


def test_cased_tokens_match_cased_vocab(tmp_path):
    vocab = write_vocab(tmp_path / "v.txt", tiny_vocab_tokens() + ["Cafe", "CAFE"])
    tok = Tokenizer(vocab, do_lower_case=False, strip_accents=True)
    assert tok.convert_ids_to_tokens(tok.encode(["Café CAFÉ"])[0]) == ["Cafe", "CAFE"]


def test_eager_equals_tf_data(tiny_vocab):
    tok = Tokenizer(tiny_vocab)
    texts = ODD_INPUTS + ["bad \xff bytes".encode("latin-1")]
    eager = tok.tokenize(tf.constant(texts)).to_list()
    ds = tf.data.Dataset.from_tensor_slices(tf.constant(texts)).batch(3).map(tok.tokenize)
    in_data = [row for batch in ds for row in batch.to_list()]
    assert in_data == eager
    graph = tf.function(tok.tokenize)(tf.constant(texts)).to_list()
    assert graph == eager


def _graph_nodes(fn) -> int:
    graph = tf.function(fn).get_concrete_function(tf.TensorSpec([None], tf.string)).graph
    graph_def = graph.as_graph_def()
    return len(graph_def.node) + sum(len(f.node_def) for f in graph_def.library.function)


def test_the_tokenizer_traces_to_a_small_graph(tiny_vocab):
    """An export's text signature holds this graph, and a server's graph optimizer
    spends its first request on every node: with RaggedTensor ops (the batched
    offset gather, boolean masks, row ids) tokenize_with_offsets traced to 2,839
    nodes and tokenize to 1,747; as flat values and row splits, 698 and 401."""
    tok = Tokenizer(tiny_vocab)
    assert _graph_nodes(tok.tokenize_with_offsets) < 1000
    assert _graph_nodes(tok.tokenize) < 600


@pytest.mark.parametrize("texts", [ODD_INPUTS[:6] + ["…⑴ ﷺ ㍻ Ｈｅｌｌｏ ß ﬁ", "a" * 199],
                                   ["", ""], []])
def test_pieces_and_offsets_are_fast_bert_tokenizers(tiny_vocab, texts):
    """The flat offset mapping gives what FastBertTokenizer.tokenize_with_offsets
    gives (texts without characters the cleaning deletes or words over the limit)."""
    import tensorflow_text as tf_text

    from electra_tf.text.tokenizer import MAX_CHARS_PER_WORD, trie_tokens

    tok = Tokenizer(tiny_vocab)
    fast = tf_text.FastBertTokenizer(vocab=trie_tokens(tok.vocab), token_out_type=tf.int64,
                                     max_bytes_per_word=4 * MAX_CHARS_PER_WORD,
                                     lower_case_nfd_strip_accents=True)
    batch = tf.constant(texts, tf.string)
    ours = tok.tokenize_with_offsets(batch)[:3]
    for graph in (False, True):
        run = tf.function(fast.tokenize_with_offsets) if graph else fast.tokenize_with_offsets
        for mine, theirs in zip(ours, run(batch)):
            assert mine.to_list() == theirs.to_list()
    if any("…" in t for t in texts):  # three pieces of one character: two are empty
        assert any(s == e for row_s, row_e in zip(ours[1].to_list(), ours[2].to_list())
                   for s, e in zip(row_s, row_e))


def test_offsets_point_into_text(tiny_vocab):
    tok = Tokenizer(tiny_vocab)
    ids, starts, ends, normalized = tok.tokenize_with_offsets(tf.constant(["Hello, world"]))
    text = normalized.numpy()[0]
    pieces = [text[s:e].decode() for s, e in zip(starts.to_list()[0], ends.to_list()[0])]
    assert pieces == ["Hello", ",", "world"]


def test_bert_layout_vocab_of_30522_tokens_works(tmp_path):
    # Same layout and size as BERT's uncased vocab.txt: specials at 0/100..103,
    # [unusedN] fill, then word pieces.
    tokens = tiny_vocab_tokens()
    tokens += [f"[unused{i}]" for i in range(99, 99 + 30522 - len(tokens))]
    assert len(tokens) == 30522
    tok = Tokenizer(write_vocab(tmp_path / "vocab.txt", tokens))
    assert tok.vocab_size == 30522
    assert tok.convert_ids_to_tokens(tok.encode(["The model"])[0]) == ["the", "model"]


@pytest.mark.parametrize("tokens,message", [
    ([], "empty"),
    (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"], "[MASK]"),
    (["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"], "id 0"),
    (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"], "repeats"),
])
def test_bad_vocab_is_a_clear_error(tmp_path, tokens, message):
    path = write_vocab(tmp_path / "v.txt", tokens)
    with pytest.raises(VocabError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_vocab(path)


def test_a_byte_order_mark_is_named(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("\ufeff" + "\n".join(tiny_vocab_tokens()) + "\n", encoding="utf-8")
    with pytest.raises(VocabError, match="byte-order mark"):  # not "lacks [PAD]"
        load_vocab(str(path))


@pytest.mark.parametrize("tail,line", [(b"caf\xe9\nthe\n", 6), (b"\xe9\n", 6),
                                       (b"ok\r\n\xff", 7)])
def test_a_vocab_that_is_not_utf8_is_refused_naming_the_line(tmp_path, tail, line):
    """A Latin-1 vocabulary had been read with its bytes replaced (U+FFFD), so its
    tokens matched no text; the corpus reader refuses such bytes too."""
    path = tmp_path / "v.txt"
    path.write_bytes(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n" + tail)
    with pytest.raises(VocabError, match=rf"v.txt:{line}: not UTF-8 \(byte 0x"):
        load_vocab(str(path))


def test_tokens_with_whitespace_or_controls_never_match(tmp_path):
    # tensorflow-text had matched a token across a space, and a NUL in a token ended in
    # a traceback; the tokens keep their ids.
    tokens = tiny_vocab_tokens() + ["a\tb", "x\x00y"]
    tok = Tokenizer(write_vocab(tmp_path / "v.txt", tokens))
    ids = tok.encode(["a\tb x\x00y"])
    assert not set(tok.convert_ids_to_tokens(ids[0])) & {"a\tb", "x\x00y"}
    assert tok.vocab[-2:] == ["a\tb", "x\x00y"] and tok.vocab_size == len(tokens)


def test_a_token_longer_than_tensorflow_texts_limit_never_matches(tmp_path):
    """A token of more than 256 UTF-8 bytes (a web vocabulary's URL) had ended every
    command reading the vocabulary in tensorflow-text's traceback ("Vocab token utf8
    length ... exceeds the max supported (256)"); it keeps its id and matches nothing."""
    over, at = "ж" * 129, "ж" * 128  # 258 and 256 bytes, both words of under 200 characters
    tokens = tiny_vocab_tokens() + [over, "##" + over, at]
    tok = Tokenizer(write_vocab(tmp_path / "v.txt", tokens), do_lower_case=False)
    ids = tok.encode([over, at])
    assert tok.vocab_size == len(tokens) and not {len(tokens) - 3, len(tokens) - 2} & set(ids[0])
    assert ids[1] == [len(tokens) - 1]  # 256 bytes: in the trie
    with pytest.raises(VocabError, match="holds no word piece"):
        Tokenizer(write_vocab(tmp_path / "w.txt", list(BERT_RESERVED_TOKENS) + [over]))


@pytest.mark.parametrize("token, named", [("the ", "U+0020 SPACE"), ("world\t", "U+0009 CONTROL"),
                                          (" wide", "U+0020 SPACE")])
def test_a_token_with_whitespace_at_its_ends_is_refused(tmp_path, token, named):
    """The original's load_vocab strips each line; kept as written, such a token had
    matched no word ("hello world" became [UNK] [UNK]), silently."""
    path = write_vocab(tmp_path / "v.txt", tiny_vocab_tokens() + [token])
    with pytest.raises(VocabError) as raised:
        load_vocab(path)
    assert str(raised.value) == (f"{path}:{len(tiny_vocab_tokens()) + 1}: token {token!r} has "
                                 f"whitespace at its ends ({named}), which no word piece "
                                 "holds (the original's load_vocab strips it: its model read "
                                 f"{token.strip()!r} there); remove it (sed -i "
                                 "'s/^[[:space:]]*//; s/[[:space:]]*$//' FILE)")


def test_whitespace_sed_does_not_match_is_named_without_the_sed_command(tmp_path):
    """GNU sed's [[:space:]] leaves out U+00A0: its command had left the file as it was."""
    path = write_vocab(tmp_path / "v.txt", tiny_vocab_tokens() + ["\u00a0x\u202f \u00a0"])
    with pytest.raises(VocabError) as raised:
        load_vocab(path)
    assert str(raised.value).endswith(
        "has whitespace at its ends (U+00A0 NO-BREAK SPACE, U+202F NARROW NO-BREAK SPACE, "
        "U+0020 SPACE), which no word piece holds (the original's load_vocab strips it: its "
        "model read 'x' there); remove it (sed's [[:space:]] does not match every one of "
        "them: edit the line)")


def test_an_empty_line_among_the_tokens_is_refused(tmp_path):
    """The original reads it as the token "", silently: in a damaged file, one whose
    line lost its token, every later id one up; empty lines at the end are dropped, as
    before."""
    tokens = tiny_vocab_tokens()
    path = write_vocab(tmp_path / "v.txt", tokens[:6] + [""] + tokens[6:] + ["", ""])
    with pytest.raises(VocabError) as raised:
        load_vocab(path)
    assert str(raised.value) == (f"{path}:7: an empty line among the tokens (a damaged "
                                 "file? a line lost its token, and every later id moved one "
                                 "up); restore the file, or, where a model was trained with "
                                 "the line as a token, write a placeholder on it "
                                 "([unused_line7])")
    assert load_vocab(write_vocab(tmp_path / "w.txt", tokens + ["", ""])) == tokens


def test_a_json_vocabulary_is_named(tmp_path):
    path = tmp_path / "vocab.json"
    path.write_text('{"[PAD]": 0, "hello": 1}\n', encoding="utf-8")
    with pytest.raises(VocabError, match=r"lacks the special token\(s\) .* \(a JSON file\? a "
                                         r"vocabulary is one token per line"):
        load_vocab(str(path))
    path.write_text('["[PAD]", "hello"]\n', encoding="utf-8")  # a JSON list too
    with pytest.raises(VocabError, match=r"\(a JSON file\?"):
        load_vocab(str(path))
    # A vocab.txt cut short also starts with "[": it is no JSON (it had been asked so)
    path.write_text("[PAD]\n[unused0]\nhello\n", encoding="utf-8")
    with pytest.raises(VocabError) as raised:
        load_vocab(str(path))
    assert str(raised.value) == f"{path} lacks the special token(s) [UNK], [CLS], [SEP], [MASK]"


def test_a_character_newer_than_pythons_unicode_tables_is_visible_text():
    """U+31350 (CJK Extension H, Unicode 15) is unassigned to Python 3.11's tables but
    TensorFlow's tokenizer keeps it ([UNK]): a text of it had been refused as empty; one
    of a code point both leave unassigned is refused where it is tokenized."""
    from electra_tf.text.cleaning import has_visible_text

    assert has_visible_text("\U00031350") and has_visible_text("\u0378")
    assert not has_visible_text("\u200b \x07")


def test_missing_vocab_file(tmp_path):
    with pytest.raises(VocabError, match="not found"):
        Tokenizer(str(tmp_path / "nope.txt"))
    with pytest.raises(VocabError, match=f"vocab file {tmp_path} is a folder; give the "
                                         "vocab.txt in it"):
        Tokenizer(str(tmp_path))
    os.mkfifo(tmp_path / "fifo")  # (had "not found")
    with pytest.raises(VocabError, match=f"vocab file {tmp_path}/fifo is a pipe \\(FIFO\\), not "
                                         "a regular file; give the vocab.txt file"):
        Tokenizer(str(tmp_path / "fifo"))


def test_decode_helper_of_the_tests_joins_pieces(tiny_vocab):
    tok = Tokenizer(tiny_vocab)
    ids = [tok.cls_id] + tok.encode(["hello"])[0] + [tok.token_to_id["##s"], tok.sep_id]
    assert decode(tok, ids) == "hellos"


def test_encode_takes_a_list_and_says_so_for_a_single_text(tiny_vocab):
    # encode("John") had returned one row per character, and encode(b"John") a
    # TensorFlow TypeError
    tok = Tokenizer(tiny_vocab)
    for single in ("the model", b"the model", None):
        with pytest.raises(TypeError, match=r"encode takes a list of texts, got a single "
                                            r"\w+: encode\(\[text\]\)\[0\] for one"):
            tok.encode(single)
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str or UTF-8 bytes, got int"):
        tok.encode(["the", 3])
    assert tok.encode(("the model", b"the model")) == [tok.encode(["the model"])[0]] * 2
    assert tok.encode([]) == []
