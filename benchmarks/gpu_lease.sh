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
# device and versions to DIR/device.txt, then runs benchmarks/bench_gpu.py for
# the settings the targets name, bf16, each beside transformers
# compiled: Small b128 s128 (jax_steps_per_call 1 and 10), Base b256 s128 and
# Base b64 s512 (10). BUDGET_S (default 480) bounds the benchmark: a setting
# that cannot start in time is recorded as skipped, and DIR/gpu_lease.{json,md}
# are rewritten after every setting, so a cut-short run keeps what it measured.
# ONLY overrides the settings (bench_gpu.py's --only keys). PROFILE names the settings
# traced with jax.profiler for one more chunk (default Small and Base, 10 steps a call),
# each into DIR/gpu_lease.<key>.trace.tar.gz (at most 15 MiB). The log is
# DIR/gpu_lease.log.
set -uo pipefail

mode=${1:-}
OUT=${OUT:-}
PY=${PY:-python3}
BUDGET_S=${BUDGET_S:-480}
PROFILE=${PROFILE:-electra_tf/small/bf16/K10,electra_tf/base/bf16/K10}
ONLY=${ONLY:-electra_tf/small/bf16/K1,electra_tf/small/bf16/K10,hf/small/bf16/compile,electra_tf/base/bf16/K10,hf/base/bf16/compile,electra_tf/base512/bf16/K10,hf/base512/bf16/compile}
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
    if [ "$mode" = run ]; then
      ls .whl/*.whl >/dev/null 2>&1 || die ".whl/ has no wheels: run '$0 wheels' first"
      "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || die "installing .whl/ into /tmp/site failed"
      export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
      args=(--sizes=small,base,base512 --only="$ONLY" --budget_s="$BUDGET_S"
            --profile="$PROFILE")
    else
      export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
      args=(--toy --budget_s="$BUDGET_S" --profile=electra_tf/toy/bf16/K10)
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
    "$PY" benchmarks/bench_gpu.py "${args[@]}" --output="$OUT/gpu_lease" 2>&1 \
      | tee "$OUT/gpu_lease.log"
    exit "${PIPESTATUS[0]}"
    ;;
  *)
    die "usage: $0 wheels | run | toy (with OUT=DIR for run and toy)"
    ;;
esac
