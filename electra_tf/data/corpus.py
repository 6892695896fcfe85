"""What a corpus file holds: plain text, or an OpenWebText archive of text files.

OpenWebText (Gokaslan and Cohen 2019, the corpus of the original's quickstart)
is distributed as `openwebtext.tar.xz`, which extracts to a folder
`openwebtext/` of some 20,000 `.xz` files, each a tar archive of web pages,
one `.txt` file per page. The original's build_openwebtext_pretraining_dataset.py
extracts each archive to a temporary folder and builds from its files with
`blanks_separate_docs=False`: every page is one document, its blank lines
(paragraph breaks) are skipped.

Here an archive is read in memory, never extracted: its regular files in the
order of their names (an archive holds a few MB of text), each one text unit.
A plain text file is one unit. A unit's document rule is `blanks_separate_docs`:
a blank line ends a document (True, the default for plain text files), or the
unit is one document (False, the default for archive members, as the
original's OpenWebText builder). So archives give the same documents as the
folders `tar xf` makes of them, one per archive, built with
`--blanks_separate_docs=false`; not the same records byte for byte, since the
shuffle of the units runs over archive members in one case and over files in
the other.

`corpus_format`: "text" reads every file as text, "openwebtext" every file as
an archive, "auto" (the default) an archive where the file starts with the xz
magic bytes.
"""

from __future__ import annotations

import io
import lzma
import os
import random
import tarfile
import zlib
from typing import Callable, Iterator

from electra_tf.core.errors import InputError
from electra_tf.core.fileio import check_text_sample

CORPUS_FORMATS = ("auto", "text", "openwebtext")
XZ_MAGIC = b"\xfd7zXZ\x00"
_ARCHIVE_ERRORS = (tarfile.TarError, lzma.LZMAError, EOFError, OSError, zlib.error)


def is_archive(path: str, corpus_format: str = "auto") -> bool:
    """Whether `path` is read as an OpenWebText archive under `corpus_format`."""
    if corpus_format not in CORPUS_FORMATS:
        raise InputError(f"corpus_format must be one of {', '.join(CORPUS_FORMATS)}, "
                         f"got {corpus_format!r}")
    if corpus_format != "auto":
        return corpus_format == "openwebtext"
    try:  # the first open of a corpus file: its permissions are said here
        head = _head(path)
    except OSError as e:
        raise InputError(f"corpus file {path}: cannot read it ({e.strerror or e})") from None
    # an empty .xz (a download that wrote nothing) is a damaged archive, not an empty text
    return head == XZ_MAGIC or (not head and path.endswith(".xz"))


def _head(path: str) -> bytes:
    """The first bytes of `path`, as many as XZ_MAGIC holds (fewer in a shorter file)."""
    with open(path, "rb") as f:
        return f.read(len(XZ_MAGIC))


def _damaged(path: str, error: Exception) -> InputError:
    if isinstance(error, tarfile.ReadError) and _xz_text(path):
        return InputError(f"{path}: an xz-compressed file that is not a tar archive (an "
                          "OpenWebText archive is a tar of text files); decompress it "
                          f"(xz -dk {path}) and give the text file instead")
    if _xz_size(path) == 0:  # (tarfile's reason had been "could not be opened successfully:")
        return InputError(f"{path}: an xz-compressed file that holds nothing (it decompresses "
                          "to 0 bytes), not an OpenWebText archive; leave it out")
    try:
        head = _head(path)
    except OSError:
        head = XZ_MAGIC
    if not head:
        return InputError(f"{path}: an empty file (0 bytes), not an OpenWebText archive (a "
                          "download cut short?); download it again, or leave it out")
    if head != XZ_MAGIC:  # (--corpus_format=openwebtext given a text file)
        return InputError(f"{path}: not an OpenWebText archive: it is not xz-compressed "
                          "(a text file? --corpus_format=auto reads it as text)")
    # tarfile's reason: a first line ending in ':', then one line per method it tried
    lines = [line.strip(" -") for line in str(error).splitlines() if line.strip()]
    reason = next((line for line in lines if line.startswith("method xz")), lines[0] if lines
                  else "").rstrip(":")
    return InputError(f"{path}: not a readable OpenWebText archive (a tar, xz-compressed, of "
                      f"text files): {type(error).__name__}: {reason}; download or extract it "
                      "again, or leave it out")


def _xz_size(path: str) -> int | None:
    """The bytes `path` decompresses to (xz), up to 1; None where it cannot be read."""
    try:
        with lzma.open(path) as f:
            return len(f.read(1))
    except (OSError, EOFError, lzma.LZMAError):
        return None


def _xz_text(path: str) -> bool:
    """Whether `path` decompresses (xz) to something that is not a tar: no "ustar"
    magic at byte 257 of its first block."""
    try:
        with lzma.open(path) as f:
            block = f.read(512)
    except (OSError, EOFError, lzma.LZMAError):
        return False
    return len(block) > 0 and block[257:262] != b"ustar"


def archive_texts(path: str) -> list[tuple[str, bytes]]:
    """(name, bytes) of every file of the archive, sorted by name: what extracting it
    gives, as the original's builder does (tar's extractall, then each file): a name
    repeated in the archive is its last member's bytes, a hard or symbolic link the
    bytes of its target.

    Raises:
      InputError: one line naming the archive (damaged, truncated, not a tar), a link
        to a file the archive does not hold, or a member that is not UTF-8 text.
    """
    texts = {}
    try:
        # xz, gz, bz2 or none: detected
        with tarfile.open(path, tarinfo=_HeaderCheckedInfo) as tar:
            for member in tar:
                if not (member.isfile() or member.islnk() or member.issym()):
                    continue
                try:
                    data = tar.extractfile(member).read()
                except KeyError:  # tarfile: a link whose target is not in the archive
                    raise InputError(f"{path}: its member {member.name} links to "
                                     f"{member.linkname}, which the archive does not hold"
                                     ) from None
                _check_member(path, member.name, data)  # refused at the first
                texts[os.path.normpath(member.name)] = data  # ./a.txt is a.txt, extracted
            damaged = getattr(tar, "damaged_header", None)
    except _ARCHIVE_ERRORS as e:
        raise _damaged(path, e) from None
    if damaged:
        raise _damaged(path, tarfile.ReadError(damaged))
    return sorted(texts.items())


class _HeaderCheckedInfo(tarfile.TarInfo):
    """A TarInfo that notes a damaged member header on its TarFile (`damaged_header`):
    past the first member, tarfile ends the iteration there without a word, and the
    rest of the archive had been dropped (the original's extractall drops it too). An
    empty block (the archive's end) or the data's end is no damage."""

    @classmethod
    def fromtarfile(cls, tar):
        try:
            return super().fromtarfile(tar)
        except (tarfile.InvalidHeaderError, tarfile.TruncatedHeaderError) as e:
            tar.damaged_header = f"a damaged member header at byte {tar.offset} ({e})"
            raise


def _check_member(path: str, name: str, data: bytes) -> None:
    """Refuses an archive member that is not UTF-8 text, naming the outer OpenWebText
    archive (a tar of .xz archives of text files) for what it is."""
    if data[:6] == b"\xfd7zXZ\x00":
        raise InputError(f"{path}: its member {name} is itself an xz archive: this is the "
                         "outer OpenWebText download (a tar of .xz archives); extract it "
                         f"(tar -xf {path}) and give the inner *.xz files as --corpus")
    check_text_sample(data, f"{path}:{name}", "corpus archive member")


def _lines(raw_lines, name: str) -> Iterator[str]:
    """Stripped lines of UTF-8 text (strict, as the original's tf.io.gfile read: the
    check of a file's start cannot see a Latin-1 part further in, which had become
    U+FFFD in the records and the vocabulary).

    Raises:
      InputError: `name`:line of the first bytes that are not UTF-8.
    """
    for number, raw in enumerate(raw_lines, start=1):
        try:
            yield raw.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            raise InputError(f"{name}:{number}: not UTF-8 text ({e.reason} at byte {e.start} "
                             f"of the line: {raw[max(0, e.start - 20):e.start + 20]!r}); "
                             "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
                             ) from None


def text_units(files, corpus_format: str = "auto", shuffle_seed: int | None = None,
               on_empty_archive: Callable[[str], None] | None = None
               ) -> Iterator[tuple[str, bool, Iterator[str]]]:
    """(name, from_archive, lines) per text unit: a text file, or an archive's member.

    Args:
      files: corpus files, in order.
      corpus_format: one of CORPUS_FORMATS.
      shuffle_seed: None: the files in the given order, an archive's members by name;
        a seed: both in an order shuffled by it, as the original's builders shuffle
        the files and each archive's pages (random.shuffle), so that a corpus whose
        names cluster its sources (books_*, then wiki_*) is not read source by source.
      on_empty_archive: called with each archive that holds no file (none, or folders
        alone), which adds nothing to the corpus.
    """
    files = list(files)
    if shuffle_seed is not None:
        random.Random(f"files:{shuffle_seed}").shuffle(files)
    for position, path in enumerate(files):
        if is_archive(path, corpus_format):
            members = archive_texts(path)
            if not members and on_empty_archive is not None:
                on_empty_archive(path)
            if shuffle_seed is not None:
                random.Random(f"members:{shuffle_seed}:{position}").shuffle(members)
            for name, data in members:
                yield f"{path}:{name}", True, _lines(io.BytesIO(data), f"{path}:{name}")
        else:
            with open(path, "rb") as f:
                yield path, False, _lines(f, path)


def first_lines(path: str, corpus_format: str, limit: int) -> list[str]:
    """Up to `limit` non-blank lines from the start of a file (of an archive: of its
    members in stored order, read as a stream, so that only its start is decompressed).

    Raises:
      InputError: a damaged archive, naming it.
    """
    sample: list[str] = []
    if not is_archive(path, corpus_format):
        with open(path, "rb") as f:
            for line in _lines(f, path):
                if line:
                    sample.append(line)
                    if len(sample) == limit:
                        break
        return sample
    try:
        with tarfile.open(path, mode="r|*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                for line in _lines(io.BytesIO(tar.extractfile(member).read()),
                                   f"{path}:{member.name}"):
                    if line:
                        sample.append(line)
                        if len(sample) == limit:
                            return sample
    except _ARCHIVE_ERRORS as e:
        raise _damaged(path, e) from None
    return sample
