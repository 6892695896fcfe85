r"""The GPU lease's data: the real-data records packed and xz-compressed, with the vocabulary.

    python -m studies.gpu_small.bundle \
        --records='../real_data_cache/records/pretrain_data.tfrecord*' \
        --heldout='../real_data_cache/heldout_records/pretrain_data.tfrecord*' \
        --vocab_file=../real_data_cache/vocab.txt --output=.bundle

Writes OUTPUT/train.packed.xz, heldout.packed.xz, vocab.txt and bundle.json
(each file's sha256 once decompressed, the counts, the sizes). `.bundle/` is
git-ignored: the lease carries it (with `.whl/`) beside the working tree.
What travels is at most 64 MiB: the tracked and untracked-not-ignored files,
plus the carried folders; `travel_size` counts them, and the command exits 2
once it has written a bundle that would not fit (--max_examples keeps the
first examples of the shuffled order instead, and says so). Missing inputs
are one `error:` line, exit 2, before anything is written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

TRAVEL_LIMIT = 64 * 2 ** 20
MARGIN = 2 * 2 ** 20  # git's view and the copying tool's may differ by a little
CARRIED = (".whl", ".bundle")


def travel_size(repo: str = REPO_ROOT, carried=CARRIED, replace: dict | None = None) -> dict:
    """Bytes that would travel: the working tree git sees, and each carried folder.

    Args:
      replace: {carried folder: bytes} to count instead of what is on disk (a
        bundle not yet written).
    """
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=repo, capture_output=True,
                            check=True).stdout.decode().split("\0")
    tree = sum(os.path.getsize(os.path.join(repo, p)) for p in listed
               if p and os.path.isfile(os.path.join(repo, p)))
    sizes = {"tree": tree}
    for folder in carried:
        if replace and folder in replace:
            sizes[folder] = replace[folder]
            continue
        path = os.path.join(repo, folder)
        sizes[folder] = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in
                            os.walk(path) for f in files) if os.path.isdir(path) else 0
    sizes["total"] = sum(sizes.values())
    return sizes


def _compress(source: str, target: str) -> tuple[str, int]:
    digest = hashlib.sha256()
    with open(source, "rb") as src, lzma.open(target + ".tmp", "wb", preset=9) as dst:
        while chunk := src.read(1 << 22):
            digest.update(chunk)
            dst.write(chunk)
    os.replace(target + ".tmp", target)
    return digest.hexdigest(), os.path.getsize(source)


def build(records: str, heldout: str, vocab_file: str, output: str,
          max_examples: int = 0) -> dict:
    from electra_tf.data.packed import PackedExamples, pack

    os.makedirs(output, exist_ok=True)
    files, counts = {}, {}
    for name, pattern in (("train.packed", records), ("heldout.packed", heldout)):
        raw = os.path.join(output, name)
        stats = pack(pattern, raw, overwrite=True)  # its own scratch file
        counts[name] = stats
        if name == "train.packed" and max_examples and stats["examples"] > max_examples:
            _truncate(raw, max_examples)
            counts[name] = {**stats, "examples": len(PackedExamples(raw, stats[
                "max_seq_length"])), "cut_from": stats["examples"]}
        digest, size = _compress(raw, raw + ".xz")
        os.remove(raw)
        files[name] = {"stored_as": name + ".xz", "sha256": digest, "bytes": size,
                       "stored_bytes": os.path.getsize(raw + ".xz")}
        print(f"[bundle] {name}: {counts[name]['examples']:,} examples, {size / 2 ** 20:.1f} "
              f"MiB, {files[name]['stored_bytes'] / 2 ** 20:.1f} MiB as xz", file=sys.stderr,
              flush=True)
    with open(vocab_file, "rb") as f:
        vocab = f.read()
    with open(os.path.join(output, "vocab.txt"), "wb") as f:
        f.write(vocab)
    files["vocab.txt"] = {"stored_as": "vocab.txt", "sha256": hashlib.sha256(vocab).hexdigest(),
                          "bytes": len(vocab), "stored_bytes": len(vocab)}
    manifest = {"files": files, "train_examples": counts["train.packed"]["examples"],
                "train_tokens": counts["train.packed"]["tokens"],
                "heldout_examples": counts["heldout.packed"]["examples"],
                "max_seq_length": counts["train.packed"]["max_seq_length"],
                "stored_bytes": sum(f["stored_bytes"] for f in files.values())}
    if "cut_from" in counts["train.packed"]:
        manifest["train_examples_cut_from"] = counts["train.packed"]["cut_from"]
    with open(os.path.join(output, "bundle.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    return manifest


def _truncate(path: str, n: int) -> None:
    """Rewrites a packed file with its first n examples."""
    from electra_tf.data import packed

    f = packed.PackedFile(path)
    end = f.offsets[n]
    packed.write_packed(path, f.offsets[:n + 1], f.segment_a[:n], f.tokens[:end],
                        f.max_seq_length, ["(first examples)"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", required=True)
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--vocab_file", required=True)
    ap.add_argument("--output", default=os.path.join(REPO_ROOT, ".bundle"))
    ap.add_argument("--max_examples", type=int, default=0,
                    help="keep the first N training examples (0: all)")
    args = ap.parse_args(argv)
    from electra_tf.core.errors import InputError
    from electra_tf.core.fileio import expand_files

    try:  # (a missing ../real_data_cache had been a traceback after an empty .bundle/)
        for what, pattern in (("--records", args.records), ("--heldout", args.heldout)):
            expand_files(pattern, what)
        if not os.path.isfile(args.vocab_file):
            raise InputError(f"--vocab_file {args.vocab_file} is not a file")
        manifest = build(args.records, args.heldout, args.vocab_file, args.output,
                         args.max_examples)
    except (InputError, FileNotFoundError) as e:
        # (an OSError's first argument is its errno: "error: 2" had been printed)
        said = f"{e.filename}: {e.strerror}" if getattr(e, "strerror", None) else str(e)
        print(f"error: {said}", file=sys.stderr)
        return 2
    folder = os.path.relpath(os.path.abspath(args.output), REPO_ROOT)
    sizes = travel_size(replace={folder: manifest["stored_bytes"]}
                        if folder in CARRIED else None)
    manifest["travel"] = sizes
    with open(os.path.join(args.output, "bundle.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    mib = {k: round(v / 2 ** 20, 2) for k, v in sizes.items()}
    print(f"[bundle] what travels, MiB: {mib} (limit {TRAVEL_LIMIT / 2 ** 20:.0f})",
          file=sys.stderr)
    if sizes["total"] > TRAVEL_LIMIT - MARGIN:
        print(f"error: {mib['total']} MiB would travel, over the lease's "
              f"{(TRAVEL_LIMIT - MARGIN) / 2 ** 20:.0f} MiB (with margin); rerun with "
              "--max_examples", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
