"""Small file helpers shared by library modules: globs, atomic writes, progress.

Everything that writes a file others read (configs, vocabularies, stats,
predictions, weights) writes it under a temporary name in the same folder and
renames it, so a kill mid-write never leaves a truncated file behind; the
file's bytes reach the disk before the rename, and the rename itself after
(`sync_file`, `sync_folder`), so a power loss does not leave an empty file
under the final name either. The file gets the mode a plain open() gives
(0666 less the umask), not the 0600 of the temporary file, so other users (a
TF Serving process) can read it.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from typing import Any, Callable, Iterable

from electra_tf.core.errors import InputError


def expand_files(patterns: str | list[str], what: str = "corpus",
                 glob_fn: Callable[[str], list[str]] = glob.glob,
                 isfile: Callable[[str], bool] = os.path.isfile) -> list[str]:
    """Comma-separated globs (or a list of them) -> sorted unique file paths (a file
    the patterns name twice, however spelled, once: its documents had been built twice,
    into train and held-out shards alike).

    Directories are skipped, and hidden files unless the pattern names them.

    Args:
      patterns: "a/*.txt,b.txt" or ["a/*.txt", "b.txt"].
      what: names the files in error messages ("corpus", "--train_data").
      glob_fn, isfile: the file system; the TFRecord reader passes
        `tf.io.gfile`'s so that remote paths (gs://) work.

    Raises:
      InputError: a pattern matches nothing, or no pattern is given.
    """
    items = patterns.split(",") if isinstance(patterns, str) else list(patterns)
    # One file named two ways (a/b, a//b, ./a/b, a symbolic or hard link) is one: by its
    # inode, kept under the least of its names made absolute, in their order (the
    # same files, spelled or listed otherwise, are read in the same order; links keep
    # their own names' order, not their targets', which a cache of hashed blobs would
    # shuffle).
    files: dict[object, tuple[str, str]] = {}
    for pattern in (p.strip() for p in items):
        if not pattern:
            continue
        # A wildcard does not match a hidden name unless the pattern's name starts with
        # ".", as in a shell and Python's glob: tf.io.gfile's glob matched the hidden
        # partial shards a killed build leaves (.pretrain_data.tfrecord-*.tmp-*).
        name = os.path.basename(pattern)
        hidden_too = name.startswith(".") or not any(c in name for c in "*?[")
        matched = [f for f in glob_fn(os.path.expanduser(pattern)) if isfile(f)
                   and (hidden_too or not os.path.basename(f).startswith("."))]
        if not matched:
            folder = os.path.expanduser(pattern)
            if "://" not in pattern and os.path.isdir(folder):
                raise InputError(f"{what} pattern {pattern!r} is a folder; give its files, "
                                 f"e.g. {os.path.join(pattern, '*')!r}")
            if "://" not in pattern and os.path.isfile(folder):  # [1] read as a class
                raise InputError(f"{what} pattern {pattern!r} matches no file, but names one: "
                                 "its name holds a wildcard character ([, ], * or ?); give "
                                 f"{glob.escape(pattern)!r}")
            if "://" not in pattern and os.path.exists(folder):  # (had "matched no file")
                raise InputError(f"{what} {pattern!r} is {not_a_file(folder)}, not a regular "
                                 "file; give a file")
            raise InputError(f"{what} pattern {pattern!r} matches no file")
        for f in matched:
            real = f if "://" in f else os.path.realpath(f)
            name = (f if "://" in f else os.path.abspath(f), f)
            key = _identity(real)
            files[key] = min(files.get(key, name), name)  # (whatever the patterns' order)
    if not files:
        raise InputError(f"no {what} file given")
    return [f for _, f in sorted(files.values())]


def _identity(real: str):
    """A local file's (device, inode), else its real path (a remote path, or a file
    gone between the glob and here)."""
    if "://" in real:
        return real
    try:
        st = os.stat(real)
    except OSError:
        return real
    return (st.st_dev, st.st_ino)


TEXT_SAMPLE_BYTES = 1 << 16  # what check_text_file reads of each file
MAX_INVALID_UTF8 = 0.01  # of the sample's characters: more is not UTF-8 text
MAX_NUL = 1 / 1024  # of the sample's bytes: more is not text ...
MAX_NUL_ANY = 4  # ... unless a short sample (a short web page) holds this many or fewer


def is_file(path: str) -> bool:
    """Whether `path` is a file to read: a remote one (gs://... through TensorFlow's
    file system, imported for it) that exists, or a local one that is no folder (a
    pipe, such as a shell's <(...), is read as a file)."""
    if "://" in path:
        import tensorflow as tf

        return tf.io.gfile.exists(path)
    return os.path.exists(path) and not os.path.isdir(path)


def check_input_file(path: str, what: str) -> None:
    """Refuses a local path that names nothing, or a folder, before it is opened; a pipe
    (a shell's <(...), /dev/stdin) is read as a file.

    Raises:
      InputError: "{what} file not found: {path}", or "{what} {path} is a folder".
    """
    if not os.path.exists(path):
        raise InputError(f"{what} file not found: {path}")
    if os.path.isdir(path):
        raise InputError(f"{what} {path} is a folder, not a file")


def check_text_file(path: str, what: str = "corpus file", compressed_hint: str = "",
                    reads_archives: bool = True) -> None:
    """Refuses a file that is not UTF-8 text, from its first TEXT_SAMPLE_BYTES
    (`compressed_hint`: what the message adds for a compressed file; `reads_archives`:
    whether the command reads OpenWebText's tar.xz archives, which a tar's refusal
    advises then, and, where not, extracting the pages).

    Text decoded with U+FFFD for bad bytes still tokenizes, so a binary file
    or UTF-16 text would otherwise be read as a few odd "words" (or, UTF-16,
    as one document: its blank lines are not blank).

    Raises:
      InputError: naming the file and what it looks like.
    """
    try:
        with open(path, "rb") as f:
            sample = f.read(TEXT_SAMPLE_BYTES)
    except OSError as e:
        raise InputError(f"{what} {path}: cannot read it ({e.strerror or e})") from None
    if not sample and path.lower().endswith(_COMPRESSED_NAMES):  # (read as an empty text)
        raise InputError(f"{what} {path}: an empty file (0 bytes) named as a compressed one "
                         "(a download cut short?); download it again, or leave it out")
    check_text_sample(sample, path, what, compressed_hint, reads_archives)


_COMPRESSED_NAMES = (".xz", ".gz", ".bz2", ".zst", ".zip")


# What compressed files start with (an xz corpus file is read as an archive before this).
_COMPRESSED = ((b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"),
               (b"PK\x03\x04", "zip"))
_BZIP2 = re.compile(rb"BZh[1-9]1AY&SY")  # text may start "BZh": its block magic too


def _compressed_kind(sample: bytes) -> str | None:
    if _BZIP2.match(sample):
        return "bzip2"
    return next((kind for magic, kind in _COMPRESSED if sample.startswith(magic)), None)


def check_text_sample(data: bytes, path: str, what: str = "corpus file",
                      compressed_hint: str = "", reads_archives: bool = True) -> None:
    """`check_text_file` on bytes already read (their first TEXT_SAMPLE_BYTES), e.g. a
    member of an archive; `path` names them in the error.

    Raises:
      InputError: naming `path` and what the bytes look like.
    """
    sample = data[:TEXT_SAMPLE_BYTES]
    compressed = _compressed_kind(sample)
    if compressed:  # NUL bytes or invalid UTF-8 below would say "another encoding?"
        raise InputError(f"{what} {path} is {compressed}-compressed, not text; decompress "
                         f"it{compressed_hint}")
    if sample[257:262] == b"ustar":  # an uncompressed tar: not text of any encoding
        raise InputError(f"{what} {path} is a tar archive, not text; extract it, or compress "
                         "it with xz if it is an OpenWebText archive (a tar of text files)"
                         if reads_archives else
                         f"{what} {path} is a tar archive, not text; extract it (tar -xf) and "
                         "give its text files: this command reads text files only")
    # A NUL byte or two in text (a web page's) is deleted by the tokenizer's cleaning, as
    # the original's; more are a binary file or UTF-16/32 (every other byte, for ASCII).
    nuls = sample.count(0)
    if sample[:2] in _UTF16_MARKS or nuls > max(MAX_NUL_ANY, MAX_NUL * len(sample)):
        if sample[:2] not in _UTF16_MARKS and nuls <= len(sample) / 8 \
                and not looks_utf16(sample) and _utf8_but_nuls(sample):  # (not iconv's)
            raise InputError(f"{what} {path} holds {nuls:,} NUL bytes in its first "
                             f"{len(sample):,}, in text that is UTF-8 otherwise: remove them "
                             "(tr -d '\\000' < FILE > NEW) or leave it out")
        kind = "UTF-16 or UTF-32 text" if looks_utf16(sample) else "a binary file"
        raise InputError(f"{what} {path} is not UTF-8 text: it holds NUL bytes or a UTF-16 "
                         f"byte-order mark ({kind}?); convert it to UTF-8 (e.g. iconv -f "
                         "UTF-16 -t UTF-8) or leave it out")
    text = sample.decode("utf-8", errors="replace")
    if len(sample) == TEXT_SAMPLE_BYTES:  # a character cut at the sample's end
        text = text[:-1]
    bad = text.count("\ufffd") - sample.count("\ufffd".encode())
    if bad > MAX_INVALID_UTF8 * max(len(text), 1):
        raise InputError(f"{what} {path} is not UTF-8 text: {bad:,} of the first "
                         f"{len(text):,} characters are invalid UTF-8 (a binary file, or "
                         "another encoding such as Latin-1?); convert it to UTF-8 (e.g. "
                         "iconv -f LATIN1 -t UTF-8) or leave it out")


def check_utf8_file(path: str, chunk_bytes: int = 1 << 24) -> None:
    """Refuses a file holding bytes that are not UTF-8 anywhere (check_text_file reads its
    start only), reading it in chunks.

    Raises:
      InputError: path:line of the first such bytes.
    """
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    line = 1
    with open(path, "rb") as f:
        while True:
            chunk = f.read(chunk_bytes)
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as e:
                where = line + chunk[:max(0, e.start)].count(b"\n")
                raise InputError(f"{path}:{where}: not UTF-8 text ({e.reason}); convert the file "
                                 "to UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None
            if not chunk:
                return
            line += chunk.count(b"\n")


def not_a_file(path: str) -> str:
    """What `path`, which exists and is not a regular file or folder, is: "a pipe (FIFO)",
    "a device", "a socket", or "not a regular file"."""
    import stat

    mode = os.stat(path).st_mode
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def parse_json(text: str, path: str, first_line: int = 1, unique_keys: bool = False) -> Any:
    """json.loads, anything it cannot read told as InputError naming `path`: malformed
    JSON (path:line:column; `first_line` is the file's line that `text` starts on), an
    integer of more than Python's 4,300 digits, or nesting deeper than the
    interpreter's recursion limit (path:first_line where `text` is one line of many).
    `unique_keys`: an object that names a key twice is refused too (JSON keeps the last,
    silently; in a file of {question id: answer} that hides which one was meant). A
    UTF-8 byte-order mark before the JSON is skipped (RFC 8259 lets a parser ignore it;
    Windows editors write it)."""
    if text.startswith("\ufeff"):
        text = text[1:]

    def pairs(items):
        seen = set()
        for key, _ in items:
            if key in seen:
                raise InputError(f"{path}: the key {key!r} repeats in one object")
            seen.add(key)
        return dict(items)

    try:
        return json.loads(text, object_pairs_hook=pairs if unique_keys else None)
    except json.JSONDecodeError as e:
        # Python's "Unterminated string starting at" gives the place in its own numbers
        msg = "Unterminated string (it starts there)" if e.msg.startswith(
            "Unterminated string") else e.msg.removesuffix(" at")
        gap = text[len(text[:e.pos].rstrip()):e.pos]  # what ends the value before
        if msg == "Extra data" and "\r" in gap and "\n" not in gap:  # a JSONL file's lines
            msg += " (its lines end in \\r alone, which reads as one line: save it with \\n " \
                   "line ends)"
        raise InputError(f"{path}:{first_line + e.lineno - 1}:{e.colno}: malformed JSON: "
                         f"{msg}") from None
    except InputError:  # a repeated key (unique_keys)
        raise
    except (ValueError, RecursionError) as e:
        where = path if first_line == 1 else f"{path}:{first_line}"
        reason = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise InputError(f"{where}: unreadable JSON ({reason})") from None


def atomic_write(path: str, write: Callable[[str], None], suffix: str = "") -> None:
    """Calls `write(tmp_path)` for a temporary path beside `path`, then renames.

    Args:
      path: the final file.
      write: writes the whole file to the path it is given.
      suffix: the temporary name's ending, for writers that insist on one
        (Keras' save_weights wants ".weights.h5").

    Raises:
      InputError: `path` is a folder (nothing is written).
    """
    if os.path.isdir(path):  # the rename would fail after the whole write (EISDIR)
        raise InputError(f"{path} is a folder where a file belongs; move it away, then rerun")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=folder)
    os.close(fd)
    try:
        write(tmp)
        sync_file(tmp)  # (while mkstemp's 0600 lets it be opened, whatever the umask)
        if os.path.isfile(path):  # the file it replaces keeps its mode (a 0600 had become
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))  # 0644)
        else:
            honour_umask(tmp)
        os.replace(tmp, path)
        sync_folder(folder)
    except BaseException as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(e, OSError) and e.filename is None:
            e.filename = path  # a write refused at close names no file (a full disk)
        raise


def sync_file(path: str) -> None:
    """Asks the OS to put `path`'s bytes on the disk (fsync) before it is renamed: a
    rename can reach the disk before the data it names, and a power loss then leaves
    an empty file under the final name."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_folder(folder: str) -> None:
    """Puts `folder`'s entries (a rename into it) on the disk, where the OS can: a
    folder opened for reading cannot be fsynced on some systems (EINVAL, EBADF, EACCES:
    nothing to do there)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.EBADF, errno.EACCES, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def sync_tree(folder: str) -> None:
    """`sync_file` on every file under `folder` and `sync_folder` on each folder, before
    the whole folder is renamed into place (an export's version)."""
    for parent, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(parent, name)
            if os.path.isfile(path) and not os.path.islink(path):
                sync_file(path)
        sync_folder(parent)


def check_free_space(path: str, nbytes: int, what: str = "it") -> None:
    """Refuses a write of about `nbytes` to `path` that its file system has no room for.

    Some writers do not fail cleanly on a full disk (safetensors; h5py, which
    crashes the process in File.close, exit 139, and which folders.files now
    runs in memory), so such a write asks first and fails before anything is
    written. Local paths only (a gs:// path is left to its file system).

    Args:
      what: what `nbytes` is of, as the message names it ("it": `path` alone).
    Raises:
      OSError(ENOSPC) naming `path`, the size needed and the space free
      (cli.run_cli prints it as one line, exit status 1).
    """
    if "://" in path:
        return
    probe = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    free = shutil.disk_usage(probe).free
    if free < nbytes:
        raise OSError(errno.ENOSPC, f"No space left on device: writing {what} needs about "
                      f"{_size(nbytes)}, {_size(free)} free", path)


def _size(nbytes: int) -> str:
    for unit in ("KiB", "MiB", "GiB"):
        nbytes /= 1024
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.1f} {unit}"


def write_bytes(path: str, data: bytes) -> None:
    """Writes `data` to `path` atomically, asking for the room first (`check_free_space`)."""
    check_free_space(path, len(data))

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)

    atomic_write(path, write)


def current_umask() -> int:
    """The process's umask, read without changing it where Linux's /proc gives it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (not thread-safe)
    os.umask(mask)
    return mask


def honour_umask(path: str, directory: bool = False) -> None:
    """Gives `path` the mode open() or mkdir() would have: 0666 (0777) less the umask.

    mkstemp and mkdtemp create 0600 and 0700 whatever the umask; what is
    written under a temporary name and then renamed must not keep that.
    """
    os.chmod(path, (0o777 if directory else 0o666) & ~current_umask())


def atomic_write_text(path: str, text: str | Iterable[str], suffix: str = "") -> None:
    """Writes a UTF-8 text file atomically (temporary name, then rename). `text` may
    be an iterable of pieces, written as they come (the file appears once all are)."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            _write_pieces(f, text)

    atomic_write(path, write, suffix)


def write_suffix(path: str) -> str:
    """The ending of the temporary name a user's output file is written under
    (.tmp-XXXX.NAME): what a later write of NAME finds of a killed one (`stale_writes`).
    Empty for a name so long that the temporary one would pass the file system's 255
    bytes (the name itself fits)."""
    name = os.path.basename(path)
    return "." + name if len(os.fsencode(name)) <= 200 else ""


def stale_writes(path: str) -> list[str]:
    """The temporary files (`write_suffix`) a killed write of `path` left beside it.
    Not removed here: another process may be writing `path` now."""
    folder = os.path.dirname(os.path.abspath(path))
    suffix = write_suffix(path)
    if not suffix:
        return []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    # mkstemp's: ".tmp-" and 8 characters of [a-z0-9_] before the suffix (a suffix match
    # alone had named .tmp-XXXXXXXX.en.wiki.packed as wiki.packed's)
    mine = re.compile(r"\.tmp-[a-z0-9_]{8}" + re.escape(suffix))
    return [os.path.join(folder, n) for n in sorted(names)
            if mine.fullmatch(n) and os.path.isfile(os.path.join(folder, n))]


def stale_write_note(path: str) -> list[str]:
    """One line for each of `stale_writes(path)`: what it is and what to do."""
    return [f"note: {stale} ({os.path.getsize(stale) / 2**20:,.1f} MiB) is what a stopped run "
            f"writing {os.path.basename(path)} left half-written; remove it"
            for stale in stale_writes(path)]


def _write_pieces(f, text: str | Iterable[str]) -> None:
    if isinstance(text, str):
        f.write(text)
        return
    for piece in text:
        f.write(piece)


def atomic_write_json(path: str, value: Any, sort_keys: bool = True) -> None:
    """Writes `value` as indented JSON, atomically: key-sorted, or (sort_keys=False)
    in the order its dicts hold."""
    atomic_write_text(path, json.dumps(value, indent=2, sort_keys=sort_keys) + "\n")


UNDO_PREFIX = ".undo-"  # undo_on_failure's snapshot folder: left by a kill only


def _tree(folder: str) -> set[str]:
    """The paths under `folder`, relative to it (folders, files and links; links not
    followed), less undo_on_failure's own snapshots."""
    paths = set()
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not (root == folder and d.startswith(UNDO_PREFIX))]
        for name in dirs + files:
            paths.add(os.path.relpath(os.path.join(root, name), folder))
    return paths


def _snapshot(folder: str, paths: set[str]) -> tuple[str | None, list[str]]:
    """Hard links to the files among `paths` in a hidden folder of `folder`: (that
    folder, the paths linked). The project's writers replace a file by renaming a new
    one over it, so a link keeps the old content. Where links cannot be made (a file
    system without them), nothing is kept."""
    files = sorted(p for p in paths if (not os.path.isdir(os.path.join(folder, p))
                                        or os.path.islink(os.path.join(folder, p)))
                   and p != FolderLock.NAME)  # (a run's lock is no file to put back)
    if not files:
        return None, []
    try:
        snapshot = tempfile.mkdtemp(prefix=UNDO_PREFIX, dir=folder)
    except OSError:
        return None, []
    linked = []
    for path in files:
        target = os.path.join(snapshot, path)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.link(os.path.join(folder, path), target, follow_symlinks=False)
        except OSError:
            continue
        linked.append(path)
    return snapshot, linked


def _restore(folder: str, snapshot: str, linked: list[str]) -> None:
    """Puts back each linked file that was replaced or removed."""
    for path in linked:
        current, kept = os.path.join(folder, path), os.path.join(snapshot, path)
        with contextlib.suppress(OSError):
            if os.path.lexists(current) and os.path.samestat(
                    os.lstat(current), os.lstat(kept)):
                continue
            os.makedirs(os.path.dirname(current), exist_ok=True)
            if os.path.isdir(current) and not os.path.islink(current):
                shutil.rmtree(current)
            os.replace(kept, current)


_UNDOING: set[str] = set()  # the folders an undo_on_failure block is open on


@contextlib.contextmanager
def undo_on_failure(folder: str):
    """Leaves `folder` as it was if the block raises anything (a refusal, a full disk,
    Ctrl-C or SIGTERM): the folder itself goes where it did not exist before; in one
    that did, what the block added goes (at any depth) and the files it replaced or
    removed come back. Replaced files are kept as hard links for the block's length,
    which assumes the block replaces a file by renaming a new one over it, as
    atomic_write does (a file rewritten in place would stay rewritten).

    A block inside another on the same folder (convert around each transformers
    import) leaves it to the outer one: its own snapshot, of the outer block's first
    files, was left beside the replaced model's by a kill, and named as holding it."""
    key = os.path.realpath(folder)
    if key in _UNDOING:
        yield
        return
    _UNDOING.add(key)
    try:
        with _undo_on_failure(folder):
            yield
    finally:
        _UNDOING.discard(key)


@contextlib.contextmanager
def _undo_on_failure(folder: str):
    before = _tree(folder) if os.path.isdir(folder) else None
    snapshot, linked = _snapshot(folder, before) if before else (None, [])
    try:
        yield
    except BaseException:
        if before is None:
            shutil.rmtree(folder, ignore_errors=True)
        elif os.path.isdir(folder):
            if snapshot:
                _restore(folder, snapshot, linked)
            for path in sorted(_tree(folder) - before, key=len):
                path = os.path.join(folder, path)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.remove(path)
        raise
    finally:
        if snapshot:
            shutil.rmtree(snapshot, ignore_errors=True)


def check_output_folder(path: str, what: str = "--model_dir", utf8: bool = True,
                        inside: tuple[str, ...] = ()) -> None:
    """Refuses, before any work, a folder a run could not write: a path that is (or lies
    under) a file, a folder (or the nearest existing parent) where no file can be made,
    a name to be made longer than the file system takes, or (`utf8`: where TensorFlow
    writes, whose file system takes UTF-8 paths only) a path that is not UTF-8.
    `inside`: subfolders the run writes in; those that exist must be folders that take
    a file (a read-only checkpoints/ had been met at the first save, a save period
    later; a file named train, a TensorFlow traceback at the first summary).

    Local paths only (a gs:// path is left to TensorFlow's file system).

    Raises:
      InputError: naming the flag and the path.
    """
    if not path or "://" in path:
        return
    if utf8:
        _check_utf8(path, what)
    if os.path.islink(path) and not os.path.exists(path):  # makedirs: a FileExistsError
        raise InputError(f"{what} {path} is a link to nothing ({os.readlink(path)}); make "
                         "its target, or give another folder")
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise InputError(f"{what} {path}: {probe} is a file, not a folder")
    _check_name_lengths(os.path.abspath(path), probe, what)
    folders = [probe]
    for name in inside if probe == os.path.abspath(path) else ():
        entry = os.path.join(probe, name)
        if os.path.isdir(entry):
            folders.append(entry)
        elif os.path.lexists(entry):
            raise InputError(f"{what} {path}: {entry} is not a folder (a file, or a link to "
                             f"nothing), where the run writes its {name}/; move it away")
    for folder in folders:
        try:
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as e:
            raise InputError(f"{what} {path}: cannot write in {folder} "
                             f"({e.strerror or e})") from None


def check_output_file(path: str, what: str = "--output", special: bool = True) -> None:
    """Refuses, before any work, a file path a run could not write: a folder, or a
    path whose folder `check_output_folder` refuses. A device or a pipe (/dev/stdout,
    /dev/null, a FIFO) must be writable (`write_output_text` writes into it), or, for
    a command that writes its file only atomically (`special` False), is refused: the
    rename had replaced the device (as root, /dev/null itself) with a regular file. A
    link is checked where it leads.

    Raises:
      InputError: naming the flag and the path.
    """
    if os.path.isdir(path):
        raise InputError(f"{what} {path} is a folder; give a file's path")
    if path.endswith(("/", os.sep)):  # (the write had failed after the work, a traceback)
        raise InputError(f"{what} {path} ends in {path[-1]}, a folder's path; give a file's "
                         "path")
    stream = _standard_stream(path) is not None
    if stream or _is_special(path):
        if not special:
            kind = "one of the process's own streams" if stream else "a device or a pipe"
            raise InputError(f"{what} {path} is {kind}, not a file: this command "
                             "writes a new file and renames it over the path; give a "
                             "file's path")
        if not os.access(path, os.W_OK):
            raise InputError(f"{what} {path}: not writable")
        return
    where = os.path.realpath(path)
    check_output_folder(os.path.dirname(where), what, utf8=False)
    if not os.path.exists(where):
        _check_name_lengths(where, os.path.dirname(where), what)


_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")  # UTF-16's byte-order marks (UTF-32 LE's starts alike)


def _utf8_but_nuls(sample: bytes) -> bool:
    """Whether bytes (a file's first TEXT_SAMPLE_BYTES) are valid UTF-8 once their NUL
    bytes are removed (a character cut at the sample's end allowed)."""
    text = sample.replace(b"\x00", b"")
    if not text.strip():
        return False
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as e:
        return len(sample) == TEXT_SAMPLE_BYTES and e.start >= len(text) - 3 \
            and e.reason == "unexpected end of data"
    return True


def looks_utf16(sample: bytes) -> bool:
    """Whether bytes (a file's first) look like UTF-16 or UTF-32 text: a UTF-16 byte-order
    mark, or NUL in over half of the odd or of the even bytes and few of the others (ASCII
    so encoded; a binary file has NULs at both)."""
    if sample[:2] in _UTF16_MARKS:
        return True
    nuls = sorted((sample[0::2].count(0), sample[1::2].count(0)))
    return len(sample) >= 4 and nuls[1] > len(sample) // 4 and nuls[0] <= len(sample) // 16


def utf16_hint(sample: bytes) -> str:
    """What a reader's "not UTF-8" line adds for bytes that look like UTF-16 or UTF-32
    text (looks_utf16 of `sample`, the file's first bytes or the line's): the conversion;
    else ""."""
    if not looks_utf16(sample[:TEXT_SAMPLE_BYTES]):
        return ""
    return ": it looks like UTF-16 or UTF-32 text (iconv -f UTF-16 -t UTF-8 converts it)"


def not_utf8(path: str) -> str | None:
    """None where `path` is UTF-8 (what TensorFlow's file system takes); else the path as
    an error line shows it, each byte that is not UTF-8 as \\xNN."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return None


def _check_utf8(path: str, what: str) -> None:
    shown = not_utf8(path)
    if shown is not None:
        raise InputError(f"{what} {shown}: the path is not UTF-8 (TensorFlow's file system "
                         "takes UTF-8 paths only); rename it")


def _check_name_lengths(path: str, existing: str, what: str) -> None:
    """Refuses a name of `path` below its folder `existing` (the names a run will make)
    that is longer than that file system's names may be (255 bytes on most): the run
    had failed at its first write, a traceback, after the work."""
    try:
        limit = os.pathconf(existing, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    rest = os.path.relpath(path, existing)
    for name in ([] if rest == os.curdir else rest.split(os.sep)):
        size = len(os.fsencode(name))
        if size > limit:
            raise InputError(f"{what}: the name {name[:40]}... is {size} bytes long; the "
                             f"file system takes names of at most {limit}")


def _is_special(path: str) -> bool:
    """Whether `path` is (or links to) something other than a regular file or a folder:
    a character or block device, a FIFO, a socket."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _standard_stream(path: str) -> int | None:
    """The descriptor `path` names where it is one of the process's own that output may
    go to (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N); None otherwise. Such a path leads to
    whatever the shell connected: a terminal, a pipe, or a regular file that a rename
    would replace, and an open() would truncate, with what was written to it before."""
    import re

    normal = os.path.normpath(path)
    named = {"/dev/stdout": 1, "/dev/stderr": 2}
    if normal in named:
        return named[normal]
    match = re.fullmatch(r"/(?:dev/fd|proc/self/fd)/(\d+)", normal)
    return int(match.group(1)) if match else None


def writes_atomically(path: str) -> bool:
    """Whether `write_output_text(path, ...)` replaces a regular file once every piece
    is written (else it writes into a stream, a device or a pipe as the pieces come)."""
    return _standard_stream(path) is None and not _is_special(path)


def write_output_text(path: str, text: str | Iterable[str]) -> None:
    """Writes a user's --output file: atomically (`atomic_write_text`) where it lands in
    a regular file, at the end of a link where it is one (the link stays), straight
    into a device or a pipe (/dev/null, a FIFO), which a rename would replace, and
    through the descriptor itself where it names one of the process's (/dev/stdout):
    at its offset, so that a file the shell sends stdout to (`>> log`) keeps what it
    held (a rename had replaced it). `text` may be an iterable of pieces, written as
    they come."""
    import sys

    fd = _standard_stream(path)
    if fd is not None:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        try:
            with os.fdopen(os.dup(fd), "w", encoding="utf-8") as f:
                _write_pieces(f, text)
        except OSError as e:
            if e.filename is None:
                e.filename = path
            raise
        return
    if not writes_atomically(path):  # a device or a pipe (/dev/null, a FIFO)
        try:
            with open(path, "w", encoding="utf-8") as f:
                _write_pieces(f, text)
        except OSError as e:
            if e.filename is None:  # a write refused at close names no file (/dev/full)
                e.filename = path
            raise
        return
    target = os.path.realpath(path)
    with no_empty_folder_left(os.path.dirname(target)):  # (a/b/ of a refused a/b/out.txt)
        atomic_write_text(target, text, suffix=write_suffix(target))


@contextlib.contextmanager
def no_empty_folder_left(folder: str):
    """Removes `folder` after the block where the block made it (or something in it
    did) and left it empty, and so the folders above it the block made: a run refused
    once it had started leaves no trace (a refused --output of a/b/out.txt had left
    a/b/)."""
    made, probe = [], os.path.abspath(folder)
    while not os.path.exists(probe):  # what the block may make, deepest first
        made.append(probe)
        probe = os.path.dirname(probe)
    try:
        yield
    finally:
        for path in made:
            if not os.path.isdir(path) or os.listdir(path):
                break
            try:
                os.rmdir(path)
            except OSError:
                break


class FolderLock:
    """One writer per folder: an exclusive flock on FOLDER/.lock, released on exit.

    A second run started on the same folder (model_dir) would interleave its
    checkpoints and configs with the first's; it is refused with one line naming
    the holder's host and pid. The kernel drops the lock when its process dies
    (a kill, a crash), so a dead run's lock never blocks the next one; that file
    stays, holding the last holder's name. A run that ends (finished, refused
    input, interrupted) removes the file, so a finished folder holds none.

        with FolderLock(model_dir, "--model_dir"):
            ...  # train

    Raises (on enter):
      InputError: another process holds the lock.
    """

    NAME = ".lock"

    def __init__(self, folder: str, what: str = "folder"):
        self.path = os.path.join(folder, self.NAME)
        self.folder, self.what = folder, what
        self._file = None

    def __enter__(self):
        import fcntl
        import socket

        os.makedirs(self.folder, exist_ok=True)
        if os.path.isdir(self.path):  # open() would be an IsADirectoryError traceback
            raise InputError(f"{self.path} is a folder where electra_tf keeps its lock file "
                             f"for {self.what} {self.folder}; move it away, then rerun")
        while True:
            f = open(self.path, "a+", encoding="utf-8")
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.seek(0)
                holder = f.read().strip() or "another process"
                f.close()
                raise InputError(f"{self.what} {self.folder} is in use by {holder} (another "
                                 "run writes there); wait for it, stop it, or use another "
                                 "folder") from None
            try:  # the holder before may have removed the file we opened: lock the new one
                same = os.path.samestat(os.fstat(f.fileno()), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            f.close()
        try:
            f.seek(0)
            f.truncate()
            f.write(f"host {socket.gethostname()}, pid {os.getpid()}, since "
                    f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
            f.flush()
        except OSError as e:  # a full disk: the error names the file, none is left behind
            with contextlib.suppress(OSError):
                os.remove(self.path)
            with contextlib.suppress(OSError):
                f.close()
            raise OSError(e.errno, e.strerror, self.path) from None
        self._file = f
        return self

    def __exit__(self, *exc):
        if self._file is not None:
            with contextlib.suppress(OSError):  # removed while held: no other holder
                os.remove(self.path)
            self._file.close()  # closing drops the flock
            self._file = None
        return False


class Progress:
    """Throttled progress lines on stderr: at most one every `every` seconds."""

    def __init__(self, label: str, total: int | None = None, unit: str = "lines",
                 every: float = 5.0):
        self.label, self.total, self.unit, self.every = label, total, unit, every
        self.start = self._last = time.monotonic()
        self._printed: tuple[int, str] | None = None  # the last line's count and extra

    def update(self, done: int, extra: str = "", force: bool = False) -> None:
        """A line with `done` (and `extra`), where `every` seconds passed since the last
        or `force`; never the same count and extra twice in a row (a forced last line
        had repeated the throttled one before it)."""
        now = time.monotonic()
        if not force and now - self._last < self.every or self._printed == (done, extra):
            return
        self._last, self._printed = now, (done, extra)
        rate = done / max(now - self.start, 1e-9)
        pct = f" ({100.0 * done / self.total:5.1f}%)" if self.total else ""
        of = f"/{self.total:,}" if self.total else ""
        print(f"[{self.label}] {done:,}{of} {self.unit}{pct}, {rate:,.0f} {self.unit}/s"
              f"{', ' + extra if extra else ''}", file=sys.stderr, flush=True)
