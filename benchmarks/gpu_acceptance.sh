#!/usr/bin/env bash
# stbench's GPU acceptance, in parts that each end within a 10-minute command on a bare GPU
# machine (a CUDA torch and the common scientific stack; no network, no package index).
#
#   bash benchmarks/gpu_acceptance.sh --list                      the parts, minutes and caps
#   bash benchmarks/gpu_acceptance.sh --out OUT --wheels DIR [PART ...]
#   bash benchmarks/gpu_acceptance.sh --rehearse --out OUT [PART ...]
#
# PART: any name --list prints (default: all, in order). Install first, without network:
# the modules the parts import are checked (one line names what is missing and how to bring
# it); stbench itself comes from DIR/stbench-*.whl, built beforehand where pip works with
# `python3 -m pip wheel --no-deps -w DIR .`, and must match this tree file for file.
# --skip-install trusts an stbench already installed (it is still compared with the tree).
#
# Every step has a time limit inside its part's cap, so a stuck world ends as a FAIL row,
# never as a lost command. summary.md gives every step and check PASS, FAIL or UNTESTED
# (what one GPU cannot show, e.g. NCCL between two GPUs) with its figure or reason;
# results.tar.gz holds the result folders and the log (traces left out). Exit 0: no FAIL.
#
# --rehearse: the same parts on a CPU machine, in a fresh venv built like the GPU machine
# (benchmarks/gpu_machine.txt: no zarr, dask, gcsfs, netCDF4, tables, submitit), pip without
# an index, stbench from a freshly built wheel, CUDA's availability faked (tests/fakecuda).
# A step passes the rehearsal when it reaches torch's own "Torch not compiled with CUDA
# enabled" and fails in no other way first (benchmarks/rehearsal.py).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

PARTS=(doctor smoke stnn profile distributed checkpoint)
declare -A MINUTES=([doctor]=3 [smoke]=5 [stnn]=3 [profile]=4 [distributed]=4 [checkpoint]=1)
declare -A CAP=([doctor]=540 [smoke]=560 [stnn]=480 [profile]=540 [distributed]=540 [checkpoint]=300)
declare -A WHAT=(  # one line each, to fit 80 columns with the name, minutes and cap
  [doctor]="doctor on cpu and cuda; the gpu-marked tests"
  [smoke]="each workload's smoke, cpu vs cuda; NVML; phases"
  [stnn]="relations: sanitizer; sparse = dense; memory"
  [profile]="syncs a step; offload side stream; h2d vs a copy"
  [distributed]="ddp/zero1/fsdp: gloo on 1 GPU, 2 nodes; NCCL"
  [checkpoint]="checkpointing lowers the activation peak"
)
WORKLOADS=(cnn-strain dcrnn-pems lstm-era5 stnn)
# What the parts import (checked before the first part; the rehearsal proves the list).
REQUIRED=(torch numpy pandas scipy typer rich tabulate psutil pynvml matplotlib h5py xarray fsspec pytest)
declare -A DIST=([pynvml]=nvidia-ml-py)
NOT_COMPILED="Torch not compiled with CUDA enabled"

say() { echo "gpu_acceptance: $*" >&2; }

list_parts() {
  local total=0
  for p in "${PARTS[@]}"; do
    printf '%-12s %2d min  cap %3d s  %s\n' "$p" "${MINUTES[$p]}" "${CAP[$p]}" "${WHAT[$p]}"
    total=$((total + MINUTES[$p]))
  done
  printf '%-12s %2d min  (H100 estimates; no part runs past its cap)\n' "all" "$total"
}

OUT="" WHEELS="" SKIP_INSTALL=0 REHEARSE=0 AS_REHEARSAL=0 SELECTED=()
# A rehearsal's CPU cells run on a small CI machine (2 cores), not beside a GPU host's 16:
# its limits and caps are SLACK times the GPU run's (what it proves is where each step fails).
SLACK=1
while [ $# -gt 0 ]; do
  case $1 in
    --list) list_parts; exit 0 ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --out) OUT=${2:-}; shift ;;
    --wheels) WHEELS=${2:-}; shift ;;
    --skip-install) SKIP_INSTALL=1 ;;
    --rehearse) REHEARSE=1 ;;
    --as-rehearsal) AS_REHEARSAL=1 SLACK=3 ;;  # internal: the inner run of --rehearse
    -*) say "unknown option $1; valid: --list, --out OUT, --wheels DIR, --skip-install, --rehearse, --help"; exit 2 ;;
    *) if [ -z "${MINUTES[$1]+x}" ]; then say "unknown part '$1'; valid: ${PARTS[*]}"; exit 2; fi
       SELECTED+=("$1") ;;
  esac
  shift
done
[ ${#SELECTED[@]} -eq 0 ] && SELECTED=("${PARTS[@]}")
if [ -z "$OUT" ]; then say "--out OUT is needed (the folder that receives summary.md and results.tar.gz)"; exit 2; fi
if [ -n "$WHEELS" ] && [ ! -d "$WHEELS" ]; then say "--wheels $WHEELS is not a folder"; exit 2; fi

if [ $REHEARSE -eq 1 ]; then
  exec bash "$ROOT/benchmarks/rehearse.sh" "$OUT" "${SELECTED[@]}"
fi

PY=$(command -v python3 || command -v python)
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  say "part '${SELECTED[0]}' needs a CUDA GPU, and torch.cuda.is_available() is False here (or torch is missing)"
  exit 2
fi

mkdir -p "$OUT/work"
OUT=$(cd "$OUT" && pwd)
WORK=$OUT/work LOG=$OUT/work/acceptance.log LINES=$OUT/work/steps.md
: >"$LINES"
source "$ROOT/benchmarks/acceptance_install.sh"
source "$ROOT/benchmarks/acceptance_parts.sh"

[ $SKIP_INSTALL -eq 1 ] || install
verify_install
declare -A TOOK=()
for p in "${SELECTED[@]}"; do
  echo "## part $p (about ${MINUTES[$p]} min, cap ${CAP[$p]} s)"
  echo "| | **$p** | |" >>"$LINES"
  t0=$SECONDS DEADLINE=$((SECONDS + CAP[$p] * SLACK))
  "part_$p"
  TOOK[$p]=$((SECONDS - t0))
done

{
  echo "# stbench GPU acceptance$([ $AS_REHEARSAL -eq 1 ] && echo ' (rehearsal: CPU build, CUDA faked)')"
  echo
  echo "- machine: $(machine_line)"
  echo "- torch $("$PY" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -1), stbench $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "- $(date -u '+%Y-%m-%d %H:%M UTC'); parts: $(for p in "${SELECTED[@]}"; do printf '%s %s s; ' "$p" "${TOOK[$p]}"; done)"
  echo "- verdicts: $(grep -c '^| PASS' "$LINES") PASS, $(grep -c '^| FAIL' "$LINES") FAIL, $(grep -c '^| UNTESTED' "$LINES") UNTESTED"
  echo
  echo "| verdict | step | figure or reason |"
  echo "|---|---|---|"
  cat "$LINES"
} >"$OUT/summary.md"
tar -czf "$OUT/results.tar.gz" --exclude=trace.json --exclude=steps.md --exclude=venv --exclude=wheels -C "$WORK" .
rm -rf "$WORK"
echo "wrote $OUT/summary.md and $OUT/results.tar.gz"
grep -q '^| FAIL' "$OUT/summary.md" && exit 1
exit 0
