"""OpenWebText as distributed (data/corpus.py): .xz tars of .txt pages, read without
extracting them, give the records the extracted pages give; a damaged one is one line."""

import io
import os
import re
import tarfile

import pytest
from helpers import error_line, make_corpus, run_module

from electra_tf.core.errors import InputError
from electra_tf.data import corpus as corpus_lib
from electra_tf.data.builder import BuildOptions, build_pretraining_data, iter_documents


def shards(out):
    return {f: open(os.path.join(out, f), "rb").read()
            for f in sorted(os.listdir(out)) if f.startswith("pretrain_data.tfrecord")}


def one_member_tar(path, mode: str, data: bytes) -> str:
    """A tar at `path` (`mode`: "w", or "w:xz" compressed) of one member, 0001.txt."""
    with tarfile.open(path, mode) as tar:
        info = tarfile.TarInfo("0001.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return str(path)


def write_owt(root, archives=3, pages=4):
    """openwebtext/NAME.xz: tars (xz) of .txt web pages whose paragraphs are separated by
    blank lines, members stored out of name order; and each extracted to extracted/NAME/,
    as `tar xf` would. Returns (archive paths, extracted page paths), each sorted."""
    owt, extracted = root / "openwebtext", root / "extracted"
    owt.mkdir()
    seed = 0
    for a in range(archives):
        name = f"urlsf_subset00-{a}_data.xz"
        (extracted / name).mkdir(parents=True)
        with tarfile.open(owt / name, "w:xz") as tar:
            for p in reversed(range(pages)):  # stored out of order: read sorted by name
                seed += 1
                text = make_corpus(3, seed=seed).encode()  # 3 paragraphs, blank-separated
                info = tarfile.TarInfo(f"{p:07d}-{seed:04x}.txt")
                info.size = len(text)
                tar.addfile(info, io.BytesIO(text))
                (extracted / name / info.name).write_bytes(text)
    return (sorted(str(p) for p in owt.iterdir()),
            sorted(str(p) for p in extracted.glob("*/*.txt")))


def test_archives_give_the_records_of_their_extracted_pages(tiny_vocab, tmp_path):
    archives, pages = write_owt(tmp_path)
    common = dict(vocab_file=tiny_vocab, max_seq_length=32, num_shards=3, seed=5)
    direct = build_pretraining_data(BuildOptions(
        files=tuple(archives), output_dir=str(tmp_path / "direct"), **common))
    flagged = build_pretraining_data(BuildOptions(
        files=tuple(archives), output_dir=str(tmp_path / "flagged"),
        corpus_format="openwebtext", **common))
    from_text = build_pretraining_data(BuildOptions(
        files=tuple(pages), output_dir=str(tmp_path / "text"), blanks_separate_docs=False,
        **common))
    assert shards(tmp_path / "direct") == shards(tmp_path / "flagged")
    assert len(shards(tmp_path / "direct")) == 3
    # each page is one document (the original's OpenWebText builder), its paragraphs joined
    assert direct["documents"] == from_text["documents"] == len(pages) == 12
    assert direct["examples"] == flagged["examples"] > 0
    # the extracted text read with blank lines as boundaries is another corpus
    docs = list(iter_documents(pages))
    assert len(docs) == 36
    # members in the order of their names, the extracted files' order
    units = [name for name, _, _ in corpus_lib.text_units(archives)]
    assert units == [f"{a}:{os.path.basename(p)}" for a, p in zip(
        [a for a in archives for _ in range(4)], pages)]
    # The build reads the archives, and each one's pages, in an order its seed shuffles
    # (the original's random.shuffle of files and pages): each page's document is the
    # extracted page's, and an archive's pages stay together.
    page_of = {f"{os.path.basename(os.path.dirname(p))}:{os.path.basename(p)}": p
               for p in pages}
    shuffled = [name for name, _, _ in corpus_lib.text_units(archives, shuffle_seed=5)]
    assert sorted(shuffled) == sorted(units) and shuffled != units
    assert shuffled == [name for name, _, _ in corpus_lib.text_units(archives, shuffle_seed=5)]
    archive_runs = [name.rsplit(":", 1)[0] for name in shuffled]
    assert [a for i, a in enumerate(archive_runs) if i == 0 or a != archive_runs[i - 1]] \
        == sorted(set(archive_runs), key=archive_runs.index)  # one run per archive
    docs = [d for _, d in iter_documents(archives, "auto", shuffle_seed=5)]
    assert docs == [d for name in shuffled for _, d in iter_documents(
        [page_of[os.path.basename(name)]], blanks_separate_docs=False)]


# Slow (spawned TensorFlow workers, seconds each): the default suite holds the builder's
# own any-process-count test (test_data_builder.py) and the archives read in-process.
@pytest.mark.slow
def test_archives_read_in_worker_processes_give_the_same_shards(tiny_vocab, tmp_path):
    archives, _ = write_owt(tmp_path)
    common = dict(files=tuple(archives), vocab_file=tiny_vocab, max_seq_length=32,
                  num_shards=3, seed=5)
    build_pretraining_data(BuildOptions(output_dir=str(tmp_path / "one"), **common))
    build_pretraining_data(BuildOptions(output_dir=str(tmp_path / "two"), num_processes=2,
                                        **common))
    assert shards(tmp_path / "one") == shards(tmp_path / "two")
    assert len(shards(tmp_path / "two")) == 3


def test_a_damaged_archive_is_refused_naming_it_and_nothing_is_written(tiny_vocab, tmp_path):
    archives, _ = write_owt(tmp_path, archives=2)
    raw = open(archives[1], "rb").read()
    with open(archives[1], "wb") as f:
        f.write(raw[:len(raw) // 2])  # a download cut short
    with pytest.raises(InputError) as raised:
        build_pretraining_data(BuildOptions(files=tuple(archives), vocab_file=tiny_vocab,
                                            output_dir=str(tmp_path / "out")))
    message = str(raised.value)
    assert message.startswith(f"{archives[1]}: not a readable OpenWebText archive"), message
    assert "\n" not in message and not (tmp_path / "out").exists()
    # a text file read as an archive, and an archive member that is not text
    text = tmp_path / "page.txt"
    text.write_text("just words\n")
    with pytest.raises(InputError, match=r"page.txt: not an OpenWebText archive: it is not "
                       r"xz-compressed \(a text file\? --corpus_format=auto reads it as text\)$"
                       ) as raised:  # (it had been told to download it again)
        build_pretraining_data(BuildOptions(files=(str(text),), vocab_file=tiny_vocab,
                                            output_dir=str(tmp_path / "out"),
                                            corpus_format="openwebtext"))
    # an empty .xz had been read as an empty text file under auto, exit 0
    empty = tmp_path / "zero.xz"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match=r"zero.xz: an empty file \(0 bytes\), not an "
                                         r"OpenWebText archive \(a download cut short\?\)"):
        build_pretraining_data(BuildOptions(files=(archives[0], str(empty)),
                                            vocab_file=tiny_vocab,
                                            output_dir=str(tmp_path / "out")))
    # the xz magic, then garbage: tarfile's reason for xz, not its "...successfully:" line
    garbage = tmp_path / "garbage.xz"
    garbage.write_bytes(raw[:6] + bytes(range(200)))
    with pytest.raises(InputError) as raised:
        build_pretraining_data(BuildOptions(files=(str(garbage),), vocab_file=tiny_vocab,
                                            output_dir=str(tmp_path / "out")))
    assert re.search(r"garbage.xz: not a readable OpenWebText archive \(a tar, xz-compressed, "
                     r"of text files\): ReadError: method xz: \w+\(.+\); download or "
                     r"extract it again", str(raised.value)), str(raised.value)
    assert "\n" not in str(raised.value)  # tarfile's reason had held five lines
    # xz-compressed text (no tar inside), and a tar that is not compressed
    import lzma

    compressed = tmp_path / "pages.txt.xz"
    compressed.write_bytes(lzma.compress(b"just words\n" * 100))
    with pytest.raises(InputError, match=r"pages.txt.xz: an xz-compressed file that is not a "
                                         r"tar archive .* decompress it \(xz -dk "):
        build_pretraining_data(BuildOptions(files=(str(compressed),), vocab_file=tiny_vocab,
                                            output_dir=str(tmp_path / "out")))
    empty = tmp_path / "empty.xz"  # tarfile's reason had been "could not be opened
    empty.write_bytes(lzma.compress(b""))  # successfully:"
    with pytest.raises(InputError, match=r"empty.xz: an xz-compressed file that holds "
                                         r"nothing \(it decompresses to 0 bytes\), not an "
                                         r"OpenWebText archive; leave it out$"):
        build_pretraining_data(BuildOptions(files=(str(empty),), vocab_file=tiny_vocab,
                                            output_dir=str(tmp_path / "out")))
    plain_tar = one_member_tar(tmp_path / "pages.tar", "w", b"just words\n")
    with pytest.raises(InputError, match=r"pages.tar is a tar archive, not text"):
        build_pretraining_data(BuildOptions(files=(plain_tar,), vocab_file=tiny_vocab,
                                            output_dir=str(tmp_path / "out")))
    binary = one_member_tar(tmp_path / "binary.xz", "w:xz", b"\x00\x01" * 32)
    with pytest.raises(InputError, match=r"binary.xz:0001.txt is not UTF-8 text"):
        build_pretraining_data(BuildOptions(files=(binary,), vocab_file=tiny_vocab,
                                            output_dir=str(tmp_path / "out")))
    # the outer download, a tar of those .xz archives: named as such (it had been called
    # a member that is not UTF-8 text, with an iconv hint)
    outer = tmp_path / "openwebtext.tar.xz"
    with tarfile.open(outer, "w:xz") as tar:
        tar.add(archives[0], arcname="openwebtext/" + os.path.basename(archives[0]))
    with pytest.raises(InputError, match=r"openwebtext.tar.xz: its member openwebtext/"
                                         r"urlsf_subset00-0_data.xz is itself an xz archive: "
                                         r"this is the outer OpenWebText download"):
        build_pretraining_data(BuildOptions(files=(str(outer),), vocab_file=tiny_vocab,
                                            output_dir=str(tmp_path / "out")))


def test_an_archive_holding_no_file_is_named_once(tiny_vocab, tmp_path, capsys):
    """An empty archive (or one of folders alone) beside good ones had added nothing
    without a word."""
    archives, _ = write_owt(tmp_path, archives=1, pages=2)
    empty = tmp_path / "empty.xz"
    with tarfile.open(empty, "w:xz") as tar:
        folder = tarfile.TarInfo("pages")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
    build_pretraining_data(BuildOptions(files=(*archives, str(empty)), vocab_file=tiny_vocab,
                                        output_dir=str(tmp_path / "out"), max_seq_length=32))
    err = capsys.readouterr().err
    assert err.count(f"[build_pretraining_data] note: {empty} holds no file (an empty "
                     "archive, or folders alone): it adds nothing") == 1, err


def test_a_damaged_member_header_past_the_first_is_refused(tmp_path):
    """tarfile ends its iteration quietly at a bad header after the first member: the
    rest of the archive had been dropped without a word (exit 0). The archive's end
    (zero blocks), or data ending at a member's end, is no damage."""
    import lzma

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i in range(3):
            data = f"page {i}\n".encode()
            info = tarfile.TarInfo(f"{i:04d}.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    whole = buf.getvalue()
    damaged = bytearray(whole)
    damaged[1024 + 148] ^= 0xFF  # the second member's header checksum
    for name, raw in (("whole", whole), ("no_end_blocks", whole[:3 * 1024]),
                      ("damaged", bytes(damaged)), ("cut_in_a_header", whole[:1024 + 300])):
        path = tmp_path / f"{name}.xz"
        path.write_bytes(lzma.compress(raw))
        if name in ("whole", "no_end_blocks"):
            assert [n for n, _ in corpus_lib.archive_texts(str(path))] == [
                "0000.txt", "0001.txt", "0002.txt"]
            continue
        with pytest.raises(InputError) as e:
            corpus_lib.archive_texts(str(path))
        assert str(e.value).startswith(
            f"{path}: not a readable OpenWebText archive (a tar, xz-compressed, of text "
            "files): ReadError: a damaged member header at byte 1024"), str(e.value)


def test_the_command_reads_archives_and_says_a_damaged_one_in_one_line(tiny_vocab, tmp_path):
    archives, _ = write_owt(tmp_path, archives=2, pages=2)
    with open(archives[0], "r+b") as f:
        f.seek(40)
        f.write(b"\xff" * 64)  # corrupt compressed data
    proc = run_module("electra_tf.build_pretraining_data",
                      f"--corpus={tmp_path}/openwebtext/*.xz", f"--vocab_file={tiny_vocab}",
                      f"--output_dir={tmp_path}/out", "--max_seq_length=32")
    error_line(proc, archives[0], "not a readable OpenWebText archive")
    assert not (tmp_path / "out").exists()


def test_an_archive_reads_as_its_extraction_repeated_names_and_links_included(tmp_path):
    """The original extracts each archive and reads its files: a name stored twice is
    the last member's bytes, a hard or symbolic link its target's (both had differed:
    the first was read twice, the links not at all)."""
    import subprocess

    def add(tar, name, data=None, link=None, kind=tarfile.REGTYPE):
        info = tarfile.TarInfo(name)
        info.type = kind
        if link:
            info.linkname = link
        if data is not None:
            info.size = len(data)
        tar.addfile(info, io.BytesIO(data) if data is not None else None)

    path = tmp_path / "a.xz"
    with tarfile.open(path, "w:xz") as tar:
        add(tar, "p1.txt", b"the first version of the page.\n")
        add(tar, "p2.txt", b"another page.\n")
        add(tar, "./p1.txt", b"the second version replaces it.\n")
        add(tar, "hard.txt", link="p2.txt", kind=tarfile.LNKTYPE)
        add(tar, "soft.txt", link="p2.txt", kind=tarfile.SYMTYPE)
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run(["tar", "xf", str(path), "-C", str(out)], check=True)
    extracted = sorted((n, (out / n).read_bytes()) for n in os.listdir(out))
    assert corpus_lib.archive_texts(str(path)) == extracted
    assert dict(extracted)["p1.txt"] == b"the second version replaces it.\n"

    outside = tmp_path / "b.xz"
    with tarfile.open(outside, "w:xz") as tar:
        add(tar, "p1.txt", b"a page.\n")
        add(tar, "away.txt", link="/etc/hostname", kind=tarfile.SYMTYPE)
    with pytest.raises(InputError, match=r"b.xz: its member away.txt links to /etc/hostname, "
                                         "which the archive does not hold"):
        corpus_lib.archive_texts(str(outside))
