# Sourced by gpu_acceptance.sh: the steps and checks of each part. A step is a command with a
# time limit (never past its part's DEADLINE); a check reads what steps wrote. Each adds one
# row to the summary: PASS, FAIL or UNTESTED with its figure or reason.

record() {  # record VERDICT NAME TEXT
  echo "$1 $2"
  local text=${3//|//}
  echo "| $1 | $2 | ${text:0:300} |" >>"$LINES"
}

folder() {  # the study a step wrote into $WORK/NAME (or that folder itself: doctor.json)
  local f; f=$(ls -d "$WORK/$1"/*/ 2>/dev/null | head -1)
  if [ -n "$f" ]; then echo "$f"; elif [ -d "$WORK/$1" ]; then echo "$WORK/$1"; fi
}

limit_for() {  # the seconds a step may take: its own limit (x SLACK), within what is left of the part's cap
  local left=$((DEADLINE - SECONDS)) own=$(($1 * SLACK))
  echo $(( own < left ? own : left ))
}

step() {  # step NAME LIMIT_S COMMAND...: in a rehearsal, judged by rehearsal.py on its output and folder
  local name=$1 limit; limit=$(limit_for "$2"); shift 2
  local out=$WORK/$name.out rc
  if [ "$limit" -lt 15 ]; then record FAIL "$name" "not run: its part's cap was spent"; return; fi
  echo "== $name (limit ${limit} s): $*" >>"$LOG"
  timeout -k 10 "$limit" "$@" >"$out" 2>&1; rc=$?
  cat "$out" >>"$LOG"
  local last; last=$(grep -v '^\s*$' "$out" | tail -1)
  if [ "$AS_REHEARSAL" -eq 1 ]; then
    judge_rehearsal "$name" "$rc" "$out" "$(folder "$name" || true)"
  elif [ $rc -eq 0 ]; then
    record PASS "$name" "$last"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    record FAIL "$name" "timed out after ${limit} s: $last"
  else
    record FAIL "$name" "exit $rc: $last"
  fi
}

judge_rehearsal() {  # NAME RC OUTPUT FOLDER
  local verdict
  verdict=$("$PY" "$ROOT/benchmarks/rehearsal.py" "$2" "$3" "$4")
  record "${verdict%% *}" "$1" "${verdict#* }"
}

check() {  # check NAME CHECK FOLDER [ARG]: gpu_checks.py's PASS/FAIL/UNTESTED line
  local name=$1 out=$WORK/$1.out rc; shift
  timeout -k 10 120 "$PY" "$ROOT/benchmarks/gpu_checks.py" "$@" >"$out" 2>&1; rc=$?
  echo "== check $name: $*" >>"$LOG"; cat "$out" >>"$LOG"
  if [ "$AS_REHEARSAL" -eq 1 ]; then judge_rehearsal "$name" "$rc" "$out" ""; return; fi
  local line; line=$(grep -E '^(PASS|FAIL|UNTESTED) ' "$out" | tail -1)
  case $rc:$line in
    0:PASS*|1:FAIL*|3:UNTESTED*) record "${line%% *}" "$name" "${line#* }" ;;
    *) record FAIL "$name" "exit $rc: $(grep -v '^\s*$' "$out" | tail -1)" ;;
  esac
}

run() {  # run NAME LIMIT_S stbench-run-arguments...: a study into $WORK/NAME, each cell under --timeout
  local name=$1 limit=$2; shift 2
  step "$name" "$limit" stbench run "$@" --timeout $(((limit - 30) * SLACK)) --out "$WORK/$name"
}

part_doctor() {
  step doctor 300 stbench doctor --device cpu cuda --out "$WORK/doctor"
  # only the gpu-marked module: others import what this machine lacks (fsspec's local
  # filesystem tests, submitit); -rfE lists each failure with its message
  step gpu-tests 200 env COLUMNS=250 "$PY" -m pytest -q -p no:cacheprovider -m gpu -rfE --tb=short tests/test_gpu.py
}

part_smoke() {
  for w in "${WORKLOADS[@]}"; do
    run "smoke-$w" 135 "$w" --smoke --device cpu cuda
    check "cpu-gpu-agree-$w" cpu-gpu-agree "$(folder "smoke-$w")"
    check "phases-sum-$w" phases-sum "$(folder "smoke-$w")"
  done
  check nvml nvml "$(folder smoke-cnn-strain)"
}

part_stnn() {
  # dense embedding gradients under the sanitizer: it reads data_ptr() of every tensor an
  # operator touches, which sparse COO gradients do not have
  step stnn-sanitizer 240 env TORCH_CUDA_SANITIZER=1 stbench run stnn --smoke --device cuda \
      --set relations=dense,offload --set factor_grad=dense --set chunk=16 --set max_steps=40 \
      --timeout $((200 * SLACK)) --out "$WORK/stnn-sanitizer"
  run stnn-backends 200 stnn --smoke --device cuda --set relations=dense,offload,sparse --set chunk=16 --set max_steps=40
  check sparse-equals-dense backends-agree "$(folder stnn-backends)"
  check stnn-memory-prediction memory-prediction "$(folder stnn-backends)"
}

part_profile() {
  step profile-cnn-strain 100 stbench profile cnn-strain --device cuda --steps 20 --timeout $((80 * SLACK)) --out "$WORK/profile-cnn-strain"
  check no-syncs-cnn-strain no-syncs "$(folder profile-cnn-strain)"
  check h2d-plausible h2d-plausible "$(folder profile-cnn-strain)"
  for b in index gpu-index; do
    step "profile-dcrnn-$b" 90 stbench profile dcrnn-pems --smoke --device cuda --set batching=$b --steps 20 \
        --timeout $((70 * SLACK)) --out "$WORK/profile-dcrnn-$b"
    check "no-syncs-dcrnn-$b" no-syncs "$(folder "profile-dcrnn-$b")"
  done
  run dcrnn-gpu-index 90 dcrnn-pems --smoke --device cuda --set batching=index,gpu-index --set max_steps=60
  check dcrnn-device-data device-data "$(folder dcrnn-gpu-index)"
  step profile-stnn-offload 90 stbench profile stnn --device cuda --offload --set grid=60x168 --set chunk=250 \
      --steps 10 --timeout $((70 * SLACK)) --out "$WORK/profile-stnn-offload"
  check offload-side-stream offload-stream "$(folder profile-stnn-offload)"
  check syncs-stnn-offload syncs "$(folder profile-stnn-offload)"
  step profile-stnn-sparse 80 stbench profile stnn --device cuda --set relations=sparse --steps 10 \
      --timeout $((60 * SLACK)) --out "$WORK/profile-stnn-sparse"
  check syncs-stnn-sparse syncs "$(folder profile-stnn-sparse)"
}

part_distributed() {
  # NCCL worlds of 2 need 2 GPUs: on one they are skipped, and the nccl check says UNTESTED
  run distributed 330 cnn-strain --smoke --device cuda --strategy ddp zero1 fsdp --nproc 1 2 \
      --set backend=nccl,gloo --expect skipped
  check distributed-gloo distributed "$(folder distributed)" gloo
  check distributed-nccl distributed "$(folder distributed)" nccl
  run two-nodes 150 cnn-strain --smoke --device cuda --strategy ddp --nproc 1 --nnodes 1 2 --set backend=gloo
  check two-nodes distributed "$(folder two-nodes)" gloo
}

part_checkpoint() {
  run checkpoint 200 cnn-strain --smoke --device cuda --set checkpoint=none,sqrt,full
  check checkpoint-lowers-peak checkpoint "$(folder checkpoint)"
}
