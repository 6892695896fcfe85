"""The real-data study's pure text functions (studies/real_data/): markup stripping,
sentences, deduplication, the held-out choice and TSV writing. Tiny inline strings;
no network, no downloads."""

import gzip
import struct
import zlib

from studies.real_data import text as T
from studies.real_data.build_corpus import r_character_vectors
from studies.real_data.prepare_tasks import deduplicate, looks_romance, split_of


def test_split_sentences_keeps_abbreviations_and_quotes():
    text = ('Mr. Knightley came in. "Is it you?" she said. See No. 5 on p. 3, e.g. this one. '
            "J. Smith agreed.  It was late.")
    assert T.split_sentences(text) == [
        "Mr. Knightley came in.", '"Is it you?" she said.',
        "See No. 5 on p. 3, e.g. this one.", "J. Smith agreed.", "It was late."]


def test_is_prose():
    assert T.is_prose('"Well, I never did," said she.')
    assert not T.is_prose("Too short here.")
    assert not T.is_prose("x = foo(1, 2) + bar[3] * 4;")
    assert not T.is_prose("Это предложение написано по-русски, не по-английски.")
    assert T.paragraph_sentences("See also. This one is a real sentence.") == [
        "This one is a real sentence."]


def test_deduplicator_drops_repeated_paragraphs_and_long_sentences():
    d = T.Deduplicator(min_sentence_words=6)
    a = ["The first sentence is long enough to count.", "Short one here."]
    assert d.paragraph(a) == a
    assert d.paragraph(["the first sentence is LONG enough to count!", "Short one here."]) == []
    assert d.paragraph(["The first sentence is long enough to count.", "Short one here.",
                        "A new sentence follows it."]) == ["Short one here.",
                                                           "A new sentence follows it."]
    assert (d.duplicate_paragraphs, d.duplicate_sentences) == (1, 1)


def test_heldout_choice_is_a_fixed_hash():
    keys = [f"news/{i}" for i in range(3000)]
    chosen = [k for k in keys if T.is_heldout(k)]
    assert chosen == [k for k in reversed(keys) if T.is_heldout(k)][::-1]  # order-free
    assert 10 <= len(chosen) <= 60  # about 1%
    assert T.is_heldout("x/1", 100.0) and not T.is_heldout("x/1", 0.0)


def test_dictd_entry():
    entry = ('Affect \\Af*fect"\\, v. t. [imp. & p. p. {Affected}.] [L. affectus.]\n'
             "   1. To act upon; to produce an effect upon; see {Fact}. [Obs.]\n"
             "      [1913 Webster]\n\n"
             "            As might affect the earth with cold heat. --Milton.\n"
             "      [1913 Webster]\n")
    assert T.dictd_entry_paragraphs(entry) == [
        "To act upon; to produce an effect upon; see Fact.",
        "As might affect the earth with cold heat."]


def test_wordnet_gloss():
    line = ('08000304 14 n 03 image 0 range 1 003 @ 07999699 n 0000 | (mathematics) the set '
            'of values of the dependent variable; "the image of f is the set of all reals"  \n')
    assert T.wordnet_gloss_paragraph(line) == (
        "The set of values of the dependent variable. The image of f is the set of all reals.")


def test_man_page_drops_requests_and_code_blocks():
    page = (".TH LS 1\n.SH NAME\nls \\- list files\n.SH DESCRIPTION\n"
            "List information about the \\fBFILEs\\fR in the directory.\n.PP\n"
            ".nf\nint main(void) { return 0; }\n.fi\n"
            ".B Sort\nentries alphabetically by default.\n")
    assert T.man_paragraphs(page) == [
        "ls - list files", "List information about the FILEs in the directory.",
        "Sort entries alphabetically by default."]
    assert T.man_paragraphs(".so man3/other.3\n") == []


def test_rst():
    doc = ("Title\n=====\n\nIntro with ``code`` and :func:`spam`.  Example::\n\n"
           "    x = 1\n\nProse resumes.\n\n.. function:: spam(a)\n\n"
           "   Return the spam of *a*.\n\n.. code-block:: python\n\n   hidden()\n\n"
           "+---+---+\n| a | b |\n+---+---+\n\n- An item that\n  continues.\n\n"
           "term\n   The definition is prose.\n\n>>> 1 + 1\n2\n")
    assert T.rst_paragraphs(doc) == [
        "Intro with code and spam. Example:", "Prose resumes.", "Return the spam of a.",
        "An item that continues.", "The definition is prose."]


def test_pod():
    pod = ("=head1 NAME\n\nperlfoo - a thing\n\n=head1 DESCRIPTION\n\n"
           "Use B<bold> and C<< $x->y >> with L<perlfunc/open> or L<the docs|perldoc>, "
           "E<lt>ok E<gt>.\n\n    my $code = 1;\n\n=begin html\n\n<p>hidden</p>\n\n"
           "=end html\n\n=cut\n\nsub not_pod { }\n")
    assert T.pod_paragraphs(pod) == [
        "perlfoo - a thing", "Use bold and $x->y with open or the docs, <ok >."]


def test_html():
    page = ('<html><head><title>T</title></head><body><div class="navheader">Prev Next</div>'
            "<h1>Heading</h1><p>First &amp; <code>inline</code> paragraph.</p>"
            "<pre>code()</pre><table><tr><td>cell</td></tr></table><ul><li>An item.</li>"
            "</ul></body></html>")
    assert T.html_paragraphs(page) == ["First & inline paragraph.", "An item."]


def test_vim_help_osis_fortunes_novels_news():
    vim = ("*intro.txt*\tFor Vim\n\nUse |:help| to read *tag* the help.\nExample: >\n"
           "\t:set nocp\n<\nAfter the example.\n\nCOMMANDS\nname\tcolumn\ttable\n")
    assert T.vim_help_paragraphs(vim) == ["For Vim", "Use :help to read the help. Example:",
                                          "After the example."]
    osis = ('<div type="x-p"/><w lemma="x">In</w> the <note>a note</note>beginning'
            '<title>Title</title> &amp; end.')
    assert T.osis_text(osis).split() == ["In", "the", "beginning", "&", "end."]
    assert T.fortune_paragraphs("A fortune\n  on two lines.\n\t-- Someone\n%\nAnother.\n") == [
        "A fortune on two lines.", "Another."]
    assert T.novel_paragraphs(["It was _very_ odd,", "she said.", "", "Next."]) == [
        "It was very odd, she said.", "Next."]
    assert T.news_text('DeVos"?highly and "Hard,"?Sen. said') == (
        "DeVos' highly and \"Hard,\" Sen. said")


def test_tsv_escaping():
    assert T.tsv_field(" a\tb\nc\r\nd  e ") == "a b c d e"
    assert T.tsv_lines([("x\ty", "pos"), ("z", "neg")]) == "text\tlabel\nx y\tpos\nz\tneg\n"


def test_task_dedup_and_split():
    kept, counts = deduplicate([("Good  film.", "pos"), ("good film.", "pos"),
                                ("Odd one", "pos"), ("odd ONE", "neg"), ("Bad.", "neg")])
    assert kept == [("Bad.", "neg"), ("Good film.", "pos")]
    assert counts == {"read": 5, "unique_texts": 3, "conflicting_labels_dropped": 1}
    assert split_of("Good film.") == split_of("good  FILM.")
    splits = [split_of(f"text {i}", seed=1) for i in range(2000)]
    assert 0.7 < splits.count("train") / 2000 < 0.9 and splits.count("dev") > 100
    assert looks_romance("Uno de los policiales más interesantes de los últimos tiempos.")
    assert not looks_romance("A film of the year, and the best of them.")


def test_r_character_vectors():
    def serialized(lines):
        body = struct.pack(">Ii", 16, len(lines))
        for line in lines:
            data = line.encode()
            body += struct.pack(">Ii", 0x40009, len(data)) + data
        raw = b"X\n" + struct.pack(">iii", 3, 0x40201, 0x30500) + struct.pack(">i", 5) + \
            b"UTF-8" + body
        return struct.pack(">I", len(raw)) + zlib.compress(raw)

    a, b = serialized(["EMMA", "", "Chapter one."]), serialized(["PERSUASION"])
    index = gzip.compress(b"".join(b"\x00\x00\x00\x0d\x00\x00\x00\x02" + struct.pack(
        ">ii", off, len(blob)) for off, blob in ((0, a), (len(a), b))))
    assert list(r_character_vectors(index, a + b)) == [["EMMA", "", "Chapter one."],
                                                       ["PERSUASION"]]
