#!/usr/bin/env bash
# stbench's GPU acceptance, for any machine with a CUDA GPU (about 5-10 minutes on one H100).
#
#   benchmarks/gpu_acceptance.sh [OUT]          (default OUT: results/<stamp>-<host>-gpu-acceptance)
#
# Runs, and reports every step as PASS/FAIL (exit 1 if any failed):
#   1. stbench doctor --device cpu cuda: phase timing vs wall clock, overhead, DDP sync vs DDP's
#      own figure, NVML/psutil fields and energy, peaks
#   2. the gpu-marked tests (CUDA events vs wall clock, event pool, no sync in cnn-strain steps)
#   3. smoke matrices of all four workloads on cpu and cuda
#   4. stnn relations dense/offload/sparse with a small chunk (several chunks, both staging buffers
#      reused) under TORCH_CUDA_SANITIZER=1; losses and forecasts compared across backends
#   5. dcrnn batching index vs gpu-index on cuda: data and h2d shares of gpu-index near zero
#   6. device synchronisations per step from profiler traces: zero for cnn-strain and dcrnn index
#   7. ddp, zero1 and fsdp worlds on the GPU(s): NCCL with a GPU per rank, gloo ranks sharing one,
#      two loopback "nodes"; syncs measured, all strategies the same loss
#   8. activation checkpointing on cuda: the allocator's activation peak falls none > sqrt > full
# Every result folder lands under OUT with its manifest; commit OUT's folders under results/.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/$(date +%Y%m%d-%H%M%S)-$(hostname -s)-gpu-acceptance}
mkdir -p "$OUT"
LOG="$OUT/acceptance.log"
failed=0

step() {  # step NAME COMMAND...: run, keep its output, print one PASS/FAIL line
    local name=$1; shift
    echo "== $name: $*" >>"$LOG"
    if "$@" >>"$LOG" 2>&1; then echo "PASS $name"; else echo "FAIL $name (see $LOG)"; failed=1; fi
}

step doctor stbench doctor --device cpu cuda --out "$OUT/doctor"
step gpu-tests python -m pytest -q -m gpu tests/
for w in cnn-strain lstm-era5 dcrnn-pems stnn; do
    step "smoke-$w" stbench run "$w" --smoke --device cpu cuda --out "$OUT/smoke-$w"
done
step stnn-sanitizer env TORCH_CUDA_SANITIZER=1 stbench run stnn --smoke --device cuda \
    --set relations=dense,offload,sparse --set chunk=16 --set max_steps=40 --out "$OUT/stnn-sanitizer"
step stnn-backends-agree python benchmarks/gpu_checks.py backends-agree "$OUT"/stnn-sanitizer/*
step dcrnn-gpu-index stbench run dcrnn-pems --smoke --device cuda --set batching=index,gpu-index \
    --set max_steps=60 --out "$OUT/dcrnn-gpu-index"
step dcrnn-device-data python benchmarks/gpu_checks.py device-data "$OUT"/dcrnn-gpu-index/*
step profile-cnn-strain stbench profile cnn-strain --device cuda --steps 20 --out "$OUT/profile-cnn-strain"
step no-syncs-cnn-strain python benchmarks/gpu_checks.py no-syncs "$OUT"/profile-cnn-strain/*
step profile-dcrnn-index stbench profile dcrnn-pems --smoke --device cuda --set batching=index --steps 20 \
    --out "$OUT/profile-dcrnn-index"
step no-syncs-dcrnn-index python benchmarks/gpu_checks.py no-syncs "$OUT"/profile-dcrnn-index/*
step distributed stbench run cnn-strain --smoke --device cuda --strategy ddp zero1 fsdp --nproc 1 2 \
    --set backend=nccl,gloo --out "$OUT/distributed"
step distributed-agree python benchmarks/gpu_checks.py distributed "$OUT"/distributed/*
step two-nodes stbench run cnn-strain --smoke --device cuda --strategy ddp --nproc 1 --nnodes 1 2 \
    --set backend=gloo --out "$OUT/two-nodes"
step two-nodes-ok python benchmarks/gpu_checks.py distributed "$OUT"/two-nodes/*
step checkpoint stbench run cnn-strain --smoke --device cuda --set checkpoint=none,sqrt,full --out "$OUT/checkpoint"
step checkpoint-lowers-peak python benchmarks/gpu_checks.py checkpoint "$OUT"/checkpoint/*
echo "results in $OUT"
exit $failed
