#!/usr/bin/env bash
# ELECTRA-Small against BERT-MLM Small in one GPU lease (studies/gpu_small/README.md).
#
# From the repository root:
#   bash benchmarks/gpu_lease.sh wheels       # where pip reaches PyPI: Keras, namex and
#                                             # optree as Python 3.12 wheels into .whl/
#   .venv/bin/python -m studies.gpu_small.bundle --records=... --heldout=... \
#       --vocab_file=... --output=.bundle     # the data, packed and xz-compressed
#   OUT=DIR bash studies/gpu_small/lease.sh run     # on the GPU machine, with .whl/ and
#                                             # .bundle/ carried beside the working tree
#   PY=.venv/bin/python OUT=DIR BUNDLE=DIR bash studies/gpu_small/lease.sh toy
#                                             # the same steps on CPU at toy sizes
#
# `run` installs the wheels into a temporary folder (nothing system-wide), then runs
# `python -m studies.gpu_small.lease`, which writes DIR/results.json, DIR/lease.log and
# each run's discriminator as parts, as each becomes ready. BUDGET_S (default 530)
# bounds the whole command from its start. MODE (default side_by_side) runs the two
# pre-training runs at once on the one GPU, or one_after_the_other.
set -uo pipefail

mode=${1:-}
OUT=${OUT:-}
PY=${PY:-python3}
BUDGET_S=${BUDGET_S:-530}
BUNDLE=${BUNDLE:-.bundle}
MODE=${MODE:-side_by_side}
start=$(date +%s)

die() { echo "error: $*" >&2; exit 2; }

[ -n "$OUT" ] || die "set OUT to the folder that collects the results"
[ -f studies/gpu_small/lease.py ] || die "run from the repository root"
[ -f "$BUNDLE/bundle.json" ] || die "$BUNDLE/bundle.json not found: build it with studies.gpu_small.bundle"
mkdir -p "$OUT" || die "cannot create $OUT"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_small.XXXXXX") || die "no temporary folder"
trap 'rm -rf "$work"' EXIT  # (a run that failed or was stopped had left it)
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
case "$mode" in
  run)
    ls .whl/*.whl >/dev/null 2>&1 || die ".whl/ has no wheels: run 'bash benchmarks/gpu_lease.sh wheels' first"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --target "$work/site" .whl/*.whl || die "installing .whl/ into $work/site failed"
    export PYTHONPATH=$work/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
    toy=()
    ;;
  toy)
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} JAX_PLATFORMS=cpu
    toy=(--toy)
    ;;
  *)
    die "usage: OUT=DIR $0 run | toy"
    ;;
esac
left=$(( BUDGET_S - ($(date +%s) - start) ))
"$PY" -m studies.gpu_small.lease --bundle="$BUNDLE" --out="$OUT" --work_dir="$work/work" \
  --budget_s="$left" --mode="$MODE" "${toy[@]}"
code=$?
rm -rf "$work"
exit $code
