#!/usr/bin/env bash
# stbench's GPU acceptance, in parts that each fit a short allocation, on a bare GPU machine
# (a CUDA torch and the common scientific stack; no network).
#
#   bash benchmarks/gpu_acceptance.sh --list                       the parts and their minutes
#   bash benchmarks/gpu_acceptance.sh --out OUT [--wheels DIR] [--skip-install] [PART ...]
#
# PART: any of the names --list prints (default: all, in that order; about 20 minutes on one
# H100). Before the first part, stbench is installed without network: the dependencies this
# machine lacks are named; with --wheels DIR they are installed from DIR (wheels prepared
# beforehand), and stbench itself from DIR/stbench-*.whl if there is one (build it where pip
# works: `pip wheel --no-deps -w DIR .`; this machine's setuptools may be older than the build
# needs), else with `pip install --no-deps --no-build-isolation .`. --skip-install trusts an
# stbench already installed.
#
# A step fails when any of its cells did not end ok (no false passes); the script exits 1 if a
# step failed, 2 on a usage error or a machine without a GPU. OUT ends up with two files:
# summary.md (machine, every step's verdict with its figure, minutes per part) and
# results.tar.gz (every result folder and the log, profiler traces left out). Commit the
# folders in the archive under results/ with the machine named.
set -uo pipefail
cd "$(dirname "$0")/.."

PARTS=(doctor smoke stnn profile distributed checkpoint)
declare -A MINUTES=([doctor]=3 [smoke]=5 [stnn]=3 [profile]=4 [distributed]=4 [checkpoint]=1)
declare -A WHAT=(  # one line each, to fit 80 columns with the name and minutes
  [doctor]="stbench doctor on cpu and cuda; the gpu-marked tests"
  [smoke]="every workload's smoke, cpu vs cuda; NVML; phases = wall"
  [stnn]="relations under the sanitizer; sparse = dense; memory model"
  [profile]="syncs per step; offload copy hidden; h2d vs copy bandwidth"
  [distributed]="ddp/zero1/fsdp: NCCL, gloo on one GPU, 2 nodes; same loss"
  [checkpoint]="checkpointing lowers the activation peak: none>sqrt>full"
)
WORKLOADS=(cnn-strain dcrnn-pems lstm-era5 stnn)

say() { echo "gpu_acceptance: $*" >&2; }

list_parts() {
  local total=0
  for p in "${PARTS[@]}"; do
    printf '%-12s %2d min  %s\n' "$p" "${MINUTES[$p]}" "${WHAT[$p]}"
    total=$((total + MINUTES[$p]))
  done
  printf '%-12s %2d min  (estimates for one H100; plus a minute to install)\n' "all" "$total"
}

OUT="" WHEELS="" SKIP_INSTALL=0 SELECTED=()
while [ $# -gt 0 ]; do
  case $1 in
    --list) list_parts; exit 0 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --out) OUT=${2:-}; shift ;;
    --wheels) WHEELS=${2:-}; shift ;;
    --skip-install) SKIP_INSTALL=1 ;;
    -*) say "unknown option $1; valid: --list, --out OUT, --wheels DIR, --skip-install, --help"; exit 2 ;;
    *) if [ -z "${MINUTES[$1]+x}" ]; then say "unknown part '$1'; valid: ${PARTS[*]}"; exit 2; fi
       SELECTED+=("$1") ;;
  esac
  shift
done
[ ${#SELECTED[@]} -eq 0 ] && SELECTED=("${PARTS[@]}")
if [ -z "$OUT" ]; then say "--out OUT is needed (the folder that receives summary.md and results.tar.gz)"; exit 2; fi
PY=$(command -v python3 || command -v python)
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  say "part '${SELECTED[0]}' needs a CUDA GPU, and torch.cuda.is_available() is False here (or torch is missing)"
  exit 2
fi
if [ -n "$WHEELS" ] && [ ! -d "$WHEELS" ]; then say "--wheels $WHEELS is not a folder"; exit 2; fi

mkdir -p "$OUT/work"
OUT=$(cd "$OUT" && pwd)
WORK=$OUT/work LOG=$OUT/work/acceptance.log LINES=$OUT/work/steps.md
: >"$LINES"
failed=0

# --- installing without network -------------------------------------------------------------
missing_dists() {  # the distributions of pyproject.toml's dependencies that do not import here
  "$PY" - <<'EOF'
import importlib.util, re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
imports = {"nvidia-ml-py": "pynvml", "netCDF4": "netCDF4", "tables": "tables", "pyyaml": "yaml"}
for dep in deps:
    dist = re.split(r"[<>=!~ \[]", dep, maxsplit=1)[0]
    if dist == "torch":
        continue  # the machine's own CUDA build; never replaced
    if importlib.util.find_spec(imports.get(dist, dist.replace("-", "_").lower())) is None:
        print(dist)
EOF
}

install() {
  local missing
  missing=$(missing_dists | tr '\n' ' ')
  if [ -n "${missing// }" ]; then
    if [ -z "$WHEELS" ]; then
      say "missing here: $missing; fetch their wheels where pip works, e.g."
      say "  pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 -d WHEELS $missing"
      say "then run again with --wheels WHEELS"
      exit 2
    fi
    echo "installing from $WHEELS: $missing"
    "$PY" -m pip install -q --no-index --no-deps --find-links "$WHEELS" $missing >>"$LOG" 2>&1 \
      || { say "installing $missing from $WHEELS failed (see $LOG)"; exit 2; }
  fi
  local wheel
  wheel=$(ls "${WHEELS:-/nonexistent}"/stbench-*.whl 2>/dev/null | head -1)
  if [ -n "$wheel" ]; then
    "$PY" -m pip install -q --no-deps --force-reinstall "$wheel" >>"$LOG" 2>&1
  else
    "$PY" -m pip install -q --no-deps --no-build-isolation . >>"$LOG" 2>&1
  fi || { say "installing stbench failed (see $LOG; a prebuilt wheel in --wheels avoids building here)"; exit 2; }
}

# --- steps ----------------------------------------------------------------------------------
step() {  # step NAME COMMAND...: run it, keep its output, record PASS/FAIL with its last line
  local name=$1; shift
  echo "== $name: $*" >>"$LOG"
  local out rc
  out=$("$@" 2>&1); rc=$?
  echo "$out" >>"$LOG"
  local figure
  figure=$(echo "$out" | grep -v '^\s*$' | tail -1 | cut -c1-300)
  if [ $rc -eq 0 ]; then
    echo "PASS $name"; echo "| PASS | $name | ${figure//|//} |" >>"$LINES"
  else
    echo "FAIL $name"; echo "| FAIL | $name | ${figure//|//} |" >>"$LINES"; failed=1
  fi
}
check() { step "$1" "$PY" benchmarks/gpu_checks.py "${@:2}"; }
folder() { ls -d "$WORK/$1"/*/ 2>/dev/null | head -1; }

part_doctor() {
  step doctor stbench doctor --device cpu cuda --out "$WORK/doctor"
  step gpu-tests "$PY" -m pytest -q -m gpu tests/
}

part_smoke() {
  for w in "${WORKLOADS[@]}"; do
    step "smoke-$w" stbench run "$w" --smoke --device cpu cuda --out "$WORK/smoke-$w"
    check "cpu-gpu-agree-$w" cpu-gpu-agree "$(folder "smoke-$w")"
    check "phases-sum-$w" phases-sum "$(folder "smoke-$w")"
  done
  check nvml nvml "$(folder smoke-cnn-strain)"
}

part_stnn() {
  # The sanitizer calls data_ptr() on sparse COO gradients, which sparse relations always have.
  step stnn-sanitizer env TORCH_CUDA_SANITIZER=1 stbench run stnn --smoke --device cuda \
      --set relations=dense,offload --set chunk=16 --set max_steps=40 --out "$WORK/stnn-sanitizer"
  step stnn-backends stbench run stnn --smoke --device cuda --set relations=dense,offload,sparse \
      --set chunk=16 --set max_steps=40 --out "$WORK/stnn-backends"
  check sparse-equals-dense backends-agree "$(folder stnn-backends)"
  check stnn-memory-prediction memory-prediction "$(folder stnn-backends)"
}

part_profile() {
  step profile-cnn-strain stbench profile cnn-strain --device cuda --steps 20 --out "$WORK/profile-cnn-strain"
  check no-syncs-cnn-strain no-syncs "$(folder profile-cnn-strain)"
  for b in index gpu-index; do
    step "profile-dcrnn-$b" stbench profile dcrnn-pems --smoke --device cuda --set batching=$b --steps 20 \
        --out "$WORK/profile-dcrnn-$b"
    check "no-syncs-dcrnn-$b" no-syncs "$(folder "profile-dcrnn-$b")"
  done
  step dcrnn-gpu-index stbench run dcrnn-pems --smoke --device cuda --set batching=index,gpu-index \
      --set max_steps=60 --out "$WORK/dcrnn-gpu-index"
  check dcrnn-device-data device-data "$(folder dcrnn-gpu-index)"
  step profile-stnn-offload stbench profile stnn --device cuda --offload --set grid=60x168 --set chunk=250 \
      --steps 10 --out "$WORK/profile-stnn-offload"
  check offload-hidden offload-hidden "$(folder profile-stnn-offload)"
  check syncs-stnn-offload syncs "$(folder profile-stnn-offload)"
  step profile-stnn-sparse stbench profile stnn --device cuda --set relations=sparse --steps 10 \
      --out "$WORK/profile-stnn-sparse"
  check syncs-stnn-sparse syncs "$(folder profile-stnn-sparse)"
  check h2d-plausible h2d-plausible "$(folder profile-cnn-strain)"
}

part_distributed() {
  step distributed stbench run cnn-strain --smoke --device cuda --strategy ddp zero1 fsdp --nproc 1 2 \
      --set backend=nccl,gloo --expect skipped --out "$WORK/distributed"
  check distributed-agree distributed "$(folder distributed)"
  step two-nodes stbench run cnn-strain --smoke --device cuda --strategy ddp --nproc 1 --nnodes 1 2 \
      --set backend=gloo --out "$WORK/two-nodes"
  check two-nodes-ok distributed "$(folder two-nodes)"
}

part_checkpoint() {
  step checkpoint stbench run cnn-strain --smoke --device cuda --set checkpoint=none,sqrt,full --out "$WORK/checkpoint"
  check checkpoint-lowers-peak checkpoint "$(folder checkpoint)"
}

# --- run ------------------------------------------------------------------------------------
[ $SKIP_INSTALL -eq 1 ] || install
"$PY" -c 'import stbench' 2>/dev/null || { say "stbench is not importable: drop --skip-install"; exit 2; }
declare -A TOOK=()
for p in "${SELECTED[@]}"; do
  echo "## part $p (about ${MINUTES[$p]} min)"
  echo "| | **$p** | |" >>"$LINES"
  t0=$SECONDS
  "part_$p"
  TOOK[$p]=$(( (SECONDS - t0 + 30) / 60 ))
done

{
  echo "# stbench GPU acceptance"
  echo
  echo "- machine: $(nvidia-smi -L 2>/dev/null | tr '\n' ';' || true) $("$PY" -c 'import torch; print(torch.cuda.get_device_name(0))')"
  echo "- torch $("$PY" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)'), stbench $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "- $(date -u '+%Y-%m-%d %H:%M UTC'); parts: $(for p in "${SELECTED[@]}"; do printf '%s %s min; ' "$p" "${TOOK[$p]}"; done)"
  echo
  echo "| verdict | step | figure (the step's last line) |"
  echo "|---|---|---|"
  cat "$LINES"
} >"$OUT/summary.md"
tar -czf "$OUT/results.tar.gz" --exclude=trace.json --exclude=steps.md -C "$WORK" .
rm -rf "$WORK"
echo "wrote $OUT/summary.md and $OUT/results.tar.gz"
exit $failed
