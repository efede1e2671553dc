#!/usr/bin/env bash
# `gpu_acceptance.sh --rehearse --out OUT [PART ...]`: the whole acceptance, install included,
# on a CPU machine, in an environment built like the GPU machine:
#   - a fresh venv holding what that machine has (gpu_machine.txt; torch is this machine's CPU
#     build, REHEARSE_TORCH, default 2.13.0) and nothing of stbench's other dependencies;
#   - stbench's wheel built here with `pip wheel --no-deps`, the only thing handed over;
#   - pip without an index (PIP_NO_INDEX=1) from then on, as there;
#   - CUDA's availability faked in every process (tests/fakecuda).
# Building the venv is the one step that uses the package index. The verdicts are the
# rehearsal's (rehearsal.py): every step reaches torch's own CUDA error and fails in no other
# way first. Exit 0 only if every step and check did.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD OUT=$1; shift
say() { echo "gpu_acceptance: $*" >&2; }

mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
ENV=$OUT/rehearsal-env
rm -rf "$ENV" && mkdir -p "$ENV/wheels"
trap 'rm -rf "$ENV"' EXIT
echo "rehearsal: building the GPU machine's environment in $ENV"
python3 -m venv "$ENV/venv" || { say "python3 -m venv failed"; exit 2; }
VPY=$ENV/venv/bin/python
mapfile -t PACKAGES < <(grep -v '^\s*#' "$ROOT/benchmarks/gpu_machine.txt" | grep -v '^\s*$')
{ "$VPY" -m pip install -q --upgrade pip \
  && "$VPY" -m pip install -q "torch==${REHEARSE_TORCH:-2.13.0}" \
  && "$VPY" -m pip install -q "${PACKAGES[@]}"; } >"$ENV/build.log" 2>&1 \
  || { say "building the rehearsal venv failed: $(tail -1 "$ENV/build.log")"; exit 2; }
# stbench's wheel, built with the index (as where pip works), then carried to the "machine"
python3 -m pip wheel -q --no-deps -w "$ENV/wheels" "$ROOT" >>"$ENV/build.log" 2>&1 \
  || { say "building stbench's wheel failed: $(tail -1 "$ENV/build.log")"; exit 2; }
for gone in zarr dask gcsfs netCDF4 tables submitit; do
  if "$VPY" -c "import $gone" 2>/dev/null; then say "the rehearsal venv has $gone, which the GPU machine lacks"; exit 2; fi
done

echo "rehearsal: the acceptance, CUDA faked, pip without an index"
PATH=$ENV/venv/bin:$PATH PIP_NO_INDEX=1 STBENCH_FAKE_CUDA=1 \
  PYTHONPATH=$ROOT/tests/fakecuda${PYTHONPATH:+:$PYTHONPATH} VIRTUAL_ENV=$ENV/venv \
  bash "$ROOT/benchmarks/gpu_acceptance.sh" --as-rehearsal --out "$OUT" --wheels "$ENV/wheels" "$@"
