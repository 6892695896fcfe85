#!/usr/bin/env bash
# The GPU benchmark as one prepared command for a short lease of a GPU machine
# that has JAX with CUDA, PyTorch and transformers but no TensorFlow and no
# package index (benchmarks/gpu_pretraining.md says what is measured).
#
# From the repository root:
#   bash benchmarks/gpu_lease.sh wheels    # where pip reaches PyPI: the Python 3.12
#                                          # wheels Keras needs and such a machine lacks,
#                                          # into .whl/ (git ignores it; about 2 MB)
#   OUT=DIR bash benchmarks/gpu_lease.sh run   # on the GPU machine, with .whl/ copied along
#   PY=.venv/bin/python OUT=DIR bash benchmarks/gpu_lease.sh toy   # the same steps on CPU,
#                                          # at toy sizes, without the wheels (a wiring check)
#
# `run` installs the wheels into /tmp/site (nothing system-wide), writes the
# device and versions to DIR/device.txt, then runs benchmarks/bench_gpu.py over
# the settings of PLAN, in order, all bf16, each in its own process. BUDGET_S
# (default 480: 8 minutes) bounds the whole command: bench_gpu gets what is left
# of it after the set-up, less a margin for the last table, and starts a setting
# only if that setting's estimate (bench_gpu.ESTIMATE_S, scaled by what the
# settings before it measured against theirs) fits in what is left; the others
# are recorded as skipped, with both numbers. DIR/gpu_lease.{json,md} are
# rewritten after every setting, so a cut-short run keeps what it measured.
#
# PLAN=targets (default): issue #40's targets in their order of value, then the
# A/B rows. Estimates (seconds; bench_gpu.ESTIMATE_S): Small K10, Base K10 and
# transformers' Small and Base as measured on an H200 (2026-11-30 and 2026-12-04:
# Small 114-133 s, of which ~30 s build and 75-87 s compile), the s512 rows the first
# guesses x 1.5; and where each would end if they hold:
#     set-up: wheels, device.txt (imports jax, keras, torch)      ~25     25
#     matmul peak (JAX, bf16 and fp32)                            ~20     45
#   1 electra_tf/small/bf16/K10 + trace of one call + prefetch A/B ~128  173
#   2 electra_tf/base/bf16/K10 + trace of one call               ~125    298
#   3 hf/small/bf16/compile                                      ~110    408
#   4 electra_tf/base512/bf16/K10                                ~140    548
#   5 hf/base/bf16/compile                                       ~100    648
#   6 electra_tf/small/bf16/K1 + device-prefetch A/B             ~118    766
#   7 hf/base512/bf16/compile                                    ~105    871
#   8 electra_tf/small/bf16/K50     50 steps a call (A: row 1)   ~115    986
#   9 electra_tf/small/bf16/K10/nocb   no CUDA graphs (A: row 1) ~115   1101
#  10 electra_tf/base512/bf16/K10/ad0       fused attention A/B: ~140   1241
#  11 electra_tf/base512/bf16/K10/ad0+fused   both arms without  ~140   1381
#  12 electra_tf/small/bf16/K10/ad0           attention dropout  ~115   1496
#  13 electra_tf/small/bf16/K10/ad0+fused                        ~115   1611
#  14 electra_tf/small/bf16/K10/nodonate    (A: row 1)           ~115   1726
# The estimates include a cold build (~30 s); a size's later settings read most of
# theirs from the compilation cache below. So at these estimates 8 minutes hold rows
# 1-3 (the Small and Base targets, traced, and transformers' Small beside them) and
# the guard records the rest as skipped; each setting that runs faster than its
# estimate lets more in (the scale follows the measurements). A second lease with
# PLAN=ab runs the A/B rows:
#     matmul ~20, small K10 (the A of K50, nocb and nodonate; + trace, prefetch A/B)
#     ~128, small K50 ~115, small K10/nocb ~115, base512 K10/ad0 ~140, base512 K10/ad0+fused (+ trace) ~150,
#     small K10/ad0 ~115, small K10/ad0+fused ~115, small K10/nodonate ~115,
#     small K1 + prefetch A/B ~118.
# ONLY overrides the plan's settings (bench_gpu.py --only keys, run in that order).
# PROFILE names the settings traced with jax.profiler for one more compiled call
# (targets: Small and Base, 10 steps a call; ab: Small and Base s512 with fused
# attention), each into
# DIR/gpu_lease.<key>.trace.tar.gz (at most 15 MiB; at most 8 files come back from a
# lease: device.txt, the log, the .json, the .md and the traces). AB_PREFETCH names
# the settings that also time --jax_device_prefetch off and on in turns, in their
# own process. The log is DIR/gpu_lease.log.
set -uo pipefail

mode=${1:-}
OUT=${OUT:-}
PY=${PY:-python3}
BUDGET_S=${BUDGET_S:-480}
PLAN=${PLAN:-targets}
TARGETS=electra_tf/small/bf16/K10,electra_tf/base/bf16/K10,hf/small/bf16/compile,electra_tf/base512/bf16/K10,hf/base/bf16/compile,electra_tf/small/bf16/K1,hf/base512/bf16/compile
AB=electra_tf/small/bf16/K50,electra_tf/small/bf16/K10/nocb,electra_tf/base512/bf16/K10/ad0,electra_tf/base512/bf16/K10/ad0+fused,electra_tf/small/bf16/K10/ad0,electra_tf/small/bf16/K10/ad0+fused,electra_tf/small/bf16/K10/nodonate
TARGETS_PROFILE=electra_tf/small/bf16/K10,electra_tf/base/bf16/K10
TARGETS_AB_PREFETCH=electra_tf/small/bf16/K1,electra_tf/small/bf16/K10
AB_FIRST=electra_tf/small/bf16/K10,electra_tf/small/bf16/K50,electra_tf/small/bf16/K10/nocb,electra_tf/base512/bf16/K10/ad0,electra_tf/base512/bf16/K10/ad0+fused,electra_tf/small/bf16/K10/ad0,electra_tf/small/bf16/K10/ad0+fused,electra_tf/small/bf16/K10/nodonate,electra_tf/small/bf16/K1
AB_FIRST_PROFILE=electra_tf/small/bf16/K10,electra_tf/base512/bf16/K10/ad0+fused
AB_FIRST_AB_PREFETCH=electra_tf/small/bf16/K10,electra_tf/small/bf16/K1
case "$PLAN" in
  targets) plan=$TARGETS,$AB profile=$TARGETS_PROFILE ab_prefetch=$TARGETS_AB_PREFETCH ;;
  ab) plan=$AB_FIRST profile=$AB_FIRST_PROFILE ab_prefetch=$AB_FIRST_AB_PREFETCH ;;
  *) echo "error: PLAN is targets or ab, got '$PLAN'" >&2; exit 2 ;;
esac
ONLY=${ONLY:-$plan}
PROFILE=${PROFILE-$profile}  # set and empty: no trace
AB_PREFETCH=${AB_PREFETCH-$ab_prefetch}
# Keras's own needs that such a machine lacks (it has numpy, absl-py, rich, h5py,
# ml-dtypes and packaging); Keras at the version this project's suite last ran with
# (setup.py admits >=3.10,<4)
WHEELS=(keras==3.15.1 namex==0.1.0 optree==0.20.0)

die() { echo "error: $*" >&2; exit 2; }

case "$mode" in
  wheels)
    mkdir -p .whl
    for w in "${WHEELS[@]}"; do
      "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl "$w" || die "pip could not fetch $w"
    done
    ls -l .whl
    ;;
  run|toy)
    [ -n "$OUT" ] || die "set OUT to the folder that collects the results"
    [ -f benchmarks/bench_gpu.py ] || die "run from the repository root"
    mkdir -p "$OUT" || die "cannot create $OUT"
    export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
    # One XLA compilation cache for the run's processes (not under OUT: it stays here).
    # Every setting's build compiles some 230 small programs one by one (initializers,
    # the dummy forward pass); the later settings of a size read them from it. The step
    # programs are each setting's own: compiled cold, written to it.
    if [ -z "${JAX_COMPILATION_CACHE_DIR:-}" ]; then
      cache_parent=$(mktemp -d) || die "mktemp failed"
      trap 'rm -rf "$cache_parent"' EXIT  # (it had been left behind)
      JAX_COMPILATION_CACHE_DIR=$cache_parent/jax_cache
    fi
    export JAX_COMPILATION_CACHE_DIR JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
    args=(--only="$ONLY" --profile="$PROFILE" --ab_prefetch="$AB_PREFETCH")
    if [ "$mode" = run ]; then
      ls .whl/*.whl >/dev/null 2>&1 || die ".whl/ has no wheels: run '$0 wheels' first"
      "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || die "installing .whl/ into /tmp/site failed"
      export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
      args+=(--sizes=small,base,base512)
    else  # the plan's keys at toy size (bench_gpu --toy maps them), the same steps
      export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} JAX_PLATFORMS=cpu  # (as lease.sh's)
      args+=(--toy)
    fi
    {
      date -u +%Y-%m-%dT%H:%M:%SZ
      nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null \
        || echo "no nvidia-smi"
      "$PY" -c "import sys, jax, keras; print('python', sys.version.split()[0], '| jax',
jax.__version__, '| keras', keras.__version__, '|', jax.devices())" \
        || die "jax or keras does not import (see above)"
      "$PY" -c "import torch, transformers; print('torch', torch.__version__, '| transformers',
transformers.__version__)" 2>/dev/null || echo "no torch/transformers: the hf rows are skipped"
    } | tee "$OUT/device.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || exit 2
    left=$((BUDGET_S - SECONDS - 15))  # 15 s for the last table and the files' return
    [ "$left" -gt 60 ] || die "BUDGET_S=$BUDGET_S leaves ${left} s for the benchmark"
    "$PY" benchmarks/bench_gpu.py "${args[@]}" --budget_s="$left" --output="$OUT/gpu_lease" \
      2>&1 | tee "$OUT/gpu_lease.log"
    exit "${PIPESTATUS[0]}"
    ;;
  *)
    die "usage: $0 wheels | run | toy (with OUT=DIR for run and toy)"
    ;;
esac
