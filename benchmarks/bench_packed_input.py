r"""How fast the TensorFlow-free inputs make masked pre-training batches, on one CPU core.

    python benchmarks/bench_packed_input.py --records='DATA/records/pretrain_data.tfrecord*' \
        --vocab_file=DATA/vocab.txt --output=benchmarks/packed_input

A GPU step of ELECTRA-Small (b128 s128, bf16) takes about 15-25 ms on one H100
(5,600-7,600 seq/s), so its input must make masked batches of 128 x 128 at
3x that rate or more (>= 30,000 sequences/s) without taking the host's other
cores. Measured here, in one process pinned to one core, on the same records:

  * pack: `electra_tf.data.packed.pack`, TFRecords -> one packed file (once per corpus);
  * packed: `packed_pretraining_batches` (the run's seeded full shuffle, gathers from
    the memory-mapped file, mask_batch_numpy), consumed in the same thread;
  * packed + prefetch: the same through data/prefetch.py's thread, as the JAX loop
    reads it (on one core the thread only adds its hand-over cost);
  * numpy (TFRecords): `numpy_pretraining_batches`, the Python parse of every record.

Each is timed for --seconds after one warm-up batch; sequences/s = batches x
batch size / time. Writes OUTPUT.json and OUTPUT.md (command, CPU, date).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before NumPy: one core
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

from bench_common import cpu_model, relative_flag, run_main  # noqa: E402


def timed(batches, seconds: float, batch_size: int) -> dict:
    next(batches)  # the first batch: file opening, the first epoch's permutation
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        next(batches)
        n += 1
    wall = time.perf_counter() - t0
    return {"batches": n, "seconds": round(wall, 3),
            "sequences_per_second": round(n * batch_size / wall, 1),
            "ms_per_batch": round(1000 * wall / n, 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", required=True, help="TFRecord glob (build_pretraining_data)")
    ap.add_argument("--vocab_file", required=True)
    ap.add_argument("--batch_size", type=int, default=128)
    ap.add_argument("--max_seq_length", type=int, default=128)
    ap.add_argument("--mask_prob", type=float, default=0.15)
    ap.add_argument("--seconds", type=float, default=10.0, help="per measurement")
    ap.add_argument("--output", default=os.path.join(HERE, "packed_input"))
    args = ap.parse_args(argv)

    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[0]})  # one core, whatever the machine has

    from electra_tf.data.masking import MaskingConfig
    from electra_tf.data.numpy_pipeline import numpy_pretraining_batches
    from electra_tf.data.packed import PackedExamples, pack, packed_pretraining_batches
    from electra_tf.data.prefetch import prefetch
    from electra_tf.text.vocab import CLS, MASK, SEP, load_vocab

    L, B = args.max_seq_length, args.batch_size
    vocab = load_vocab(args.vocab_file)
    masking = MaskingConfig(mask_prob=args.mask_prob,
                            max_predictions_per_seq=int((args.mask_prob + 0.005) * L),
                            mask_id=vocab.index(MASK), cls_id=vocab.index(CLS),
                            sep_id=vocab.index(SEP), vocab_size=len(vocab))
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "train.packed")
        t0 = time.perf_counter()
        stats = pack(args.records, path, L, progress=False)
        results["pack"] = {**stats, "seconds": round(time.perf_counter() - t0, 2)}
        print(f"[bench] packed {stats['examples']:,} examples in "
              f"{results['pack']['seconds']} s", file=sys.stderr, flush=True)
        examples = PackedExamples(path, L)
        settings = {
            "packed": lambda: packed_pretraining_batches(examples, B, L, masking, seed=0),
            "packed + prefetch": lambda: prefetch(
                packed_pretraining_batches(examples, B, L, masking, seed=0)),
            "numpy (TFRecords)": lambda: numpy_pretraining_batches(args.records, B, L,
                                                                   masking, seed=0),
        }
        for name, make in settings.items():
            results[name] = timed(make(), args.seconds, B)
            print(f"[bench] {name}: {results[name]['sequences_per_second']:,.0f} seq/s",
                  file=sys.stderr, flush=True)
    command = "python benchmarks/bench_packed_input.py " + " ".join(
        shlex.quote(relative_flag(a)) for a in (argv if argv is not None else sys.argv[1:]))
    record = {"command": command, "cpu": cpu_model(), "cores_used": 1,
              "load_average_1min": round(os.getloadavg()[0], 2),
              "python": platform.python_version(),
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
              "batch_size": B, "max_seq_length": L, "results": results}
    with open(args.output + ".json", "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    rows = [f"| {name} | {r['sequences_per_second']:,.0f} | {r['ms_per_batch']:.2f} |"
            for name, r in results.items() if name != "pack"]
    p = results["pack"]
    with open(args.output + ".md", "w") as f:
        f.write(f"# Masked pre-training batches of {B} x {L} from one CPU core\n\n"
                f"`{command}`\n\n{record['date']}, {record['cpu']}, one core "
                f"(sched_setaffinity; load average {record['load_average_1min']} on the "
                f"machine's {os.cpu_count()} cores), Python {record['python']}. Records: {p['examples']:,} "
                f"examples, {p['tokens']:,} tokens, from {p['files']} file(s); packing "
                f"them took {p['seconds']} s ({p['bytes'] / 2 ** 20:,.1f} MiB).\n\n"
                "| input | sequences/s | ms per batch |\n|---|---:|---:|\n"
                + "\n".join(rows) + "\n\nbenchmarks/bench_packed_input.py says what each "
                "row measures. The JAX loop reads `packed + prefetch` "
                "(`--jax_input_pipeline=packed`).\n")
    return 0


if __name__ == "__main__":
    run_main(main)
