r"""A pre-training folder's discriminator as fp16 parts of at most 16 MiB, and back.

    # where the run was (the GPU lease): the folder -> OUT/electra.part-0-of-2, ...
    python -m studies.gpu_small.parts split --model_dir=MODEL --output=OUT/electra
    # here: the parts -> a pre-training folder run_finetuning reads (--init_checkpoint)
    python -m studies.gpu_small.parts join --parts='OUT/electra.part-*' \
        --output=FOLDER --vocab_file=VOCAB

A lease returns at most 8 files of 16 MiB: ELECTRA-Small's discriminator
(13.5M parameters, 54 MB in float32) comes back as float16 (27 MB) in two
parts. What travels is one .npz (each weight in float16 where that keeps it
finite, else float32; the variables' paths; the folder's small JSON files)
cut into parts; `join` checks the parts are one whole (count and sha256),
rebuilds the discriminator from its config, sets the weights (as float32)
and writes the folder with electra_tf.folders, with the vocabulary copied in.

When the run stopped before writing its folder (a lease cut short), `split`
takes the discriminator from its latest checkpoint instead (with the JAX
backend the run used), and says so in the parts' "source".
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import io
import json
import os
import re
import sys

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

MAX_PART_BYTES = 15 * 2 ** 20  # under the lease's 16 MiB a file
SMALL_FILES = ("discriminator_config.json", "pretraining_config.json", "final_eval.json")
_PART = re.compile(r"\.part-(\d+)-of-(\d+)$")


def _discriminator_of(model_dir: str):
    """(the discriminator, where it came from): the folder's weights, else its checkpoint."""
    from electra_tf import folders

    if os.path.exists(os.path.join(model_dir, folders.files.DISCRIMINATOR_WEIGHTS)):
        model, _ = folders.pretraining.load_discriminator(model_dir)
        return model, "final folder"
    from electra_tf.core.config import PretrainingConfig, PretrainingRun
    from electra_tf.training import backends

    recorded = folders.pretraining.read_pretraining_config(model_dir)
    if "pretraining" not in recorded or not folders.files.has_checkpoints(model_dir):
        raise SystemExit(f"error: {model_dir} holds neither a discriminator nor a checkpoint")
    config = PretrainingConfig.from_dict(recorded["pretraining"])
    run = PretrainingRun(**{k: v for k, v in recorded["run"].items()
                       if k in PretrainingRun.__dataclass_fields__})
    trainer = backends.pretraining_class(backends.name())(config, run)
    step = trainer.restore()
    return trainer.model.kept_discriminator(), f"checkpoint at step {step}"


def split(model_dir: str, output: str, max_part_bytes: int = MAX_PART_BYTES) -> list[str]:
    """Writes OUTPUT.part-K-of-N; returns their paths."""
    model, source = _discriminator_of(model_dir)
    arrays, kinds = {}, []
    for i, (variable, value) in enumerate(zip(model.weights, model.get_weights())):
        half = value.astype(np.float16)
        keep = half if np.isfinite(half).all() or not np.isfinite(value).all() else value
        arrays[f"w{i:04d}"] = keep
        kinds.append(variable.path)
    files = {}
    for name in SMALL_FILES:
        path = os.path.join(model_dir, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                files[name] = f.read()
    if "discriminator_config.json" not in files:  # as folders.pretraining.save_discriminator writes it
        from electra_tf import folders

        files["discriminator_config.json"] = json.dumps(
            {"format_version": folders.files.FORMAT_VERSION, **model.config.to_dict()})
    meta = {"paths": kinds, "files": files, "source": source}
    buffer = io.BytesIO()
    np.savez(buffer, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)
    blob = buffer.getvalue()
    digest = hashlib.sha256(blob).hexdigest()
    n = max(1, -(-len(blob) // max_part_bytes))
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    paths = []
    for k in range(n):
        path = f"{output}.part-{k}-of-{n}"
        with open(path + ".tmp", "wb") as f:
            f.write(blob[k * max_part_bytes:(k + 1) * max_part_bytes])
        os.replace(path + ".tmp", path)
        paths.append(path)
    print(f"[parts] {model_dir} ({source}): {len(blob) / 2 ** 20:.1f} MiB in {n} part(s), "
          f"sha256 {digest}", file=sys.stderr, flush=True)
    return paths


def join(pattern: str, output: str, vocab_file: str, sha256: str = "") -> str:
    """Rebuilds the pre-training folder from the parts; returns the folder."""
    paths = sorted(glob.glob(pattern), key=lambda p: int(_PART.search(p).group(1))
                   if _PART.search(p) else -1)
    found = [_PART.search(p) for p in paths]
    if not paths or None in found:
        raise SystemExit(f"error: {pattern!r} matches no part (NAME.part-K-of-N)")
    total = {int(m.group(2)) for m in found}
    if len(total) != 1 or [int(m.group(1)) for m in found] != list(range(total.pop())):
        raise SystemExit(f"error: {pattern!r}: parts missing or of two sets: {paths}")
    blob = b"".join(open(p, "rb").read() for p in paths)
    digest = hashlib.sha256(blob).hexdigest()
    if sha256 and digest != sha256:
        raise SystemExit(f"error: the parts' sha256 is {digest}, not {sha256}")
    with np.load(io.BytesIO(blob)) as npz:
        meta = json.loads(npz["meta"].tobytes().decode())
        weights = [npz[f"w{i:04d}"].astype(np.float32) for i in range(len(meta["paths"]))]
    from electra_tf import folders
    from electra_tf.modeling.models import build_discriminator

    os.makedirs(output, exist_ok=True)
    for name in SMALL_FILES:
        if name in meta["files"]:
            with open(os.path.join(output, name), "w", encoding="utf-8") as f:
                f.write(meta["files"][name])
    config = folders.files.read_encoder_config(os.path.join(output, "discriminator_config.json"))
    model = build_discriminator(config)
    got = [v.path for v in model.weights]
    if got != meta["paths"]:
        raise SystemExit("error: the discriminator built here has other variables than the "
                         f"parts' ({len(got)} against {len(meta['paths'])})")
    model.set_weights(weights)
    folders.pretraining.save_discriminator(output, model)
    vocab = folders.vocabulary.copy_vocab_file(vocab_file, output)
    recorded = folders.pretraining.read_pretraining_config(output)
    if recorded:  # the vocabulary now lives beside the weights
        run = dict(recorded.get("run", {}), vocab_file=vocab)
        folders.pretraining.write_pretraining_config(
            output, None, run, **{k: v for k, v in recorded.items() if k not in
                                  ("run", "vocab_sha256", "format_version")})
        if recorded.get("vocab_sha256") and \
                folders.PretrainingFolder.open(output, discriminator=False).vocab_sha256 != recorded["vocab_sha256"]:
            raise SystemExit(f"error: {vocab_file} is not the vocabulary the run used")
    else:
        folders.pretraining.record_vocab(output, vocab)
    print(f"[parts] {len(paths)} part(s), sha256 {digest} ({meta['source']}) -> {output}",
          file=sys.stderr, flush=True)
    return output


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("split")
    s.add_argument("--model_dir", required=True)
    s.add_argument("--output", required=True, help="path prefix of the parts")
    s.add_argument("--max_part_mib", type=float, default=MAX_PART_BYTES / 2 ** 20)
    j = sub.add_parser("join")
    j.add_argument("--parts", required=True, help="glob of the parts")
    j.add_argument("--output", required=True, help="the folder to write")
    j.add_argument("--vocab_file", required=True)
    j.add_argument("--sha256", default="", help="the whole's sha256 (from the lease log)")
    args = ap.parse_args(argv)
    if args.command == "split":
        split(args.model_dir, args.output, int(args.max_part_mib * 2 ** 20))
    else:
        join(args.parts, args.output, args.vocab_file, args.sha256)


if __name__ == "__main__":
    main()
