#!/usr/bin/env bash
# The GPU harness: real SGLang on an H100/H200, profiled through `invoke profile.remote`.
# 0.5.12 (its v1 and v2 workers) by the stages below; any later release (EAGLEWorkerV2 only,
# --series auto) by the rel* stages, each server checked by bench/gpu/release_check.py
# (bench/results/sglang_v2_releases.md).
#
# On the CPU machine, once:   bash bench/gpu/build_carry.sh [RELEASE]   (default 0.5.12)
# On the GPU machine (device tool), from the repository root, with carry
#   .carry-site .carry-fi .carry-lib [.carry-jit]:
#       bash bench/gpu/run_h200.sh [STAGE...]        (default: setup models v2 v1 sweep timer collect)
#   the EAGLE-3 verify-bound case: bash bench/gpu/run_h200.sh setup models8b e3v2 e3v1 collect cache
#   the verdict's control and the timer overhead: bash bench/gpu/run_h200.sh setup models control ovh collect
# Sweeps repeat every point ${SWEEP_REPEAT:-2} times (server starts in rotated order); BUDGET (s)
# bounds the call, each stage skips with a line when too little of it is left. Knobs: E3_SAMPLE
# (1), E3_MIN / E3_BASE_MIN / E3_WARM_MIN (e3v1 runs at all / with its own baseline / with a
# warm-up pass when that many s are left), CONTROL_REPEAT (3, fewer when the time left is short of
# 2 x SRV_S per repetition), CONTROL_PROMPTS / CONTROL_OUT_LEN (128 / 512), SRV_S (90), AB (20).
# Stages (each skips what an earlier call on the same machine left in /tmp):
#   setup    unpack the carried site into /tmp/site (sglang + its pins; patchkit is this checkout)
#   models   bench/gpu/make_models.py: tiny Llama target + standalone draft, partial acceptance
#   models8b bench/gpu/make_models_eagle3.py: 8B-shaped Llama target + EAGLE-3 draft head with set
#            acceptance, built on the GPU (~16 GB in $MODELS8B), its accept length predicted first
#   e3v2     profile.remote --baseline, EAGLE3 on the 8B pair, 0.5.12's default EAGLEWorkerV2
#   e3v1     the same with EAGLEWorker (SGLANG_ENABLE_SPEC_V2=0, no overlap) and PATCHKIT_TIMER_AB;
#            its own baseline only while $E3_BASE_MIN s are left (collect then names e3v2's)
#   explore  one unpatched v2 server + sglang.bench_serving (checks the stack; fills JIT caches)
#   v1       profile.remote --baseline, EAGLEWorker (SGLANG_ENABLE_SPEC_V2=0, no overlap)
#   v2       profile.remote --baseline, 0.5.12's default EAGLEWorkerV2 (overlap scheduling on)
#   sweep    profile.remote --matrix over speculative-num-steps (+ an env: key), --baseline
#   timer    bench/gpu_timer_bench.py: host cost per timer call by mode, A/B overhead
#   overhead profile.remote --matrix over the runtime's event sharing, A/B blocks in each server
#   control  identical twins (--matrix 'env:PK_CONTROL=a,b' --repeat $CONTROL_REPEAT, v2, tiny
#            models, no baseline): the verdict's false-positive check; each server's A/B overhead
#            at sample 8
#   ovh      A/B overhead: v1 at --sample 1 and 8 (ovh_v1), v2 at --sample 1 (ovh_v2)
#   tp2      (two GPUs) --tp 2: every rank timed, rank skew, NCCL_PROTO x NCCL_ALGO sweep
#   diag     where the timer's cost goes: v1 and v2, every cycle timed, A/B, bench/gpu/diag/
#   trace    /start_profile on a patched v2 server: phase ranges in SGLang's trace (trace_nvtx: NVTX on)
#   ovh16    the default sampling's paired overhead, v2 and v1 (ovh1: every cycle timed; ovh16b:
#            one more v2 server at 1 in 16; ovh32: v2 and v1 at 1 in 32; ovh1rb: v2, every cycle,
#            PATCHKIT_TIMER_RESOLVE_BATCH=${RESOLVE_BATCH:-8}; ovh16bare: v2 and v1 at 1 in 16
#            against bare off blocks, PATCHKIT_TIMER_AB_B=bare)
#   e3ovh    every cycle timed on the 8B EAGLE-3 pair (verify-bound), A/B blocks: v2, v1, v2 again
#            (e3ovhb: one more v1 and v2 server; e3ovhrb: two v1 servers with
#            PATCHKIT_TIMER_RESOLVE_BATCH=${RESOLVE_BATCH:-16}); E3_OVH_PROMPTS requests (768)
#   shares   full and sampled timing side by side in one v2 server (PATCHKIT_TIMER_AB_B=sample;
#            sharesb: one more such server). CONTROL_PROMPTS=512 (all stages of the call) gives
#            each server about 4x the cycles for ~25 s more (bench_serving's own start dominates)
#   cudatests  pytest of the runtime and report (their CUDA-only tests run here)
#   recfloor bench/gpu/record_floor.py: an event record through torch and through ctypes
#            (cuEventRecord), ns per call, into $OUT/record_floor.txt
#   e3budget a budgeted sweep (--budget) of a real difference on the 8B pair, A/B blocks
#            in every server (the runtime's default budget measured at each start); e3same: the
#            same with identical points (see budget_sweep below)
#   tinyshare  the blocked design with two tiny servers sharing GPU 0 (--gpus 0@a,0@b)
#   tinybudget one tiny v2 server, the runtime's default budget, A/B blocks (host-bound regime)
#   pack     $OUT/runs.tgz of the raw folders only (no collect)
#   collect  bench/gpu/collect.py: $OUT/sglang_gpu.{json,md} + charts from everything under $WORK
#   cache    $OUT/jitcache.tgz (copy to .carry-jit/ to skip kernel compilation next time)
# Everything lands in $OUT (the device tool brings it back); raw run folders in $OUT/runs.tgz.
set -uo pipefail
export PYTHONUNBUFFERED=1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/patchkit-gpu-out}; WORK=${WORK:-/tmp/patchkit-gpu}; M=${MODELS:-/tmp/patchkit-models}
M8=${MODELS8B:-/tmp/patchkit-models-8b}
# the release the carried site holds (bench/gpu/build_carry.sh RELEASE writes it); one site
# folder per release, so that calls on one warm machine can move between releases
REL=$(cat "$ROOT/.carry-site/RELEASE" 2>/dev/null || echo 0.5.12)
SITE=${SITE:-/tmp/site-$REL}
mkdir -p "$OUT" "$WORK"
LOG=$OUT/run.log; T0=$(date +%s); BUDGET=${BUDGET:-580}
# this call's start, in the run folders' stamp format: $WORK on a warm machine still holds
# earlier calls' runs, which bench/gpu/import_runs.py leaves out by it
date +%Y%m%d-%H%M%S > "$OUT/call_start.txt"
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$LOG"; }
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
run() { say "\$ $*"; "$@" 2>&1 | tee -a "$LOG"; local rc=${PIPESTATUS[0]}; say "rc=$rc"; return "$rc"; }

export PYTHONPATH=$SITE:$ROOT
export TVM_FFI_CACHE_DIR=/tmp/jitcache/tvm TRITON_CACHE_DIR=/tmp/jitcache/triton \
       FLASHINFER_WORKSPACE_BASE=/tmp/jitcache/fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME=/tmp/hf
# NVLink multicast stays off (the device notes say why); harmless on one GPU.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ldconfig -p 2>/dev/null | grep -q "libnuma.so.1 " || export LD_LIBRARY_PATH=$ROOT/.carry-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
if [ -z "${CUDA_HOME:-}" ] && command -v nvcc >/dev/null; then export CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")"); fi

PORT=30000
# H_SERVER, H_SPEC, H_BENCH, H_SERVER8B, H_SPEC_E3, H_BENCH8B, H_WARMUP, H_SERIES replace the
# commands below (bench/gpu/standin_check.sh runs every stage on a CPU with the tests' stand-in)
SERVER="python3 -m sglang.launch_server --model-path $M/target --tokenizer-path $M/target --host 127.0.0.1 --port $PORT --mem-fraction-static 0.5 --attention-backend triton --sampling-backend pytorch --grammar-backend none --cuda-graph-max-bs 32 --max-running-requests 48 --disable-piecewise-cuda-graph --decode-log-interval 1"
SPEC="--speculative-algorithm STANDALONE --speculative-draft-model-path $M/draft --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
BENCH="python3 -m sglang.bench_serving --backend sglang --host 127.0.0.1 --port $PORT --dataset-name random-ids --random-input-len 128 --random-output-len ${OUT_LEN:-512} --random-range-ratio 1 --num-prompts ${PROMPTS:-96} --max-concurrency 32 --tokenizer $M/target --model $M/target --disable-tqdm"
# 0.5.12 keeps its named series (its v1 stages set SGLANG_ENABLE_SPEC_V2=0); every later
# release is applied with --series auto, which must pick the series pinned to that release
if [ "$REL" = 0.5.12 ]; then SERIES=${H_SERIES:-patches/sglang-v0.5.12}; else SERIES=${H_SERIES:-auto}; fi
# the control and overhead stages (6+ tiny servers in one device call): a server's time is its
# start (~55 s) and bench_serving's own start-up (~20 s), the load itself a few seconds, so the
# load stays large enough for ~750 decode cycles (~18 A/B pairs of 20, ~45 cycles timed at
# sample 8); the warm-up sends the same load straight to /generate (no second start-up),
# falling back to the real benchmark when it fails
CTL_PROMPTS=${CONTROL_PROMPTS:-128}; CTL_OUT_LEN=${CONTROL_OUT_LEN:-512}
BENCH_CTL="python3 -m sglang.bench_serving --backend sglang --host 127.0.0.1 --port $PORT --dataset-name random-ids --random-input-len 128 --random-output-len $CTL_OUT_LEN --random-range-ratio 1 --num-prompts $CTL_PROMPTS --max-concurrency 32 --tokenizer $M/target --model $M/target --disable-tqdm"
SRV_S=${SRV_S:-90}   # seconds one tiny server takes: /health ~55, warm-up ~6, benchmark ~25, stop
# the EAGLE-3 case: an 8B-shaped target (~15 GB of bf16 weights) + a one-layer EAGLE-3 head; half
# of the GPU's memory for weights and KV cache leaves ample room for CUDA graphs and activations.
# 32 concurrent requests x 256 output tokens keep the batch at 32: verify-bound cycles.
E3_STEPS=${E3_STEPS:-3}
SERVER8B="python3 -m sglang.launch_server --model-path $M8/target --tokenizer-path $M8/target --host 127.0.0.1 --port $PORT --mem-fraction-static ${E3_MEM:-0.5} --attention-backend triton --sampling-backend pytorch --grammar-backend none --cuda-graph-max-bs 32 --max-running-requests 48 --disable-piecewise-cuda-graph --decode-log-interval 1"
SPEC_E3="--speculative-algorithm EAGLE3 --speculative-draft-model-path $M8/draft --speculative-num-steps $E3_STEPS --speculative-eagle-topk 1 --speculative-num-draft-tokens $(( E3_STEPS + 1 ))"
BENCH8B="python3 -m sglang.bench_serving --backend sglang --host 127.0.0.1 --port $PORT --dataset-name random-ids --random-input-len 128 --random-output-len ${E3_OUT_LEN:-256} --random-range-ratio 1 --num-prompts ${E3_PROMPTS:-128} --max-concurrency 32 --tokenizer $M8/target --model $M8/target --disable-tqdm"
MATRIX=${MATRIX:-speculative-num-steps=1,2,3,5;env:NCCL_PROTO=LL}
SERVER=${H_SERVER:-$SERVER}; SPEC=${H_SPEC-$SPEC}; BENCH=${H_BENCH:-$BENCH}
SERVER8B=${H_SERVER8B:-$SERVER8B}; SPEC_E3=${H_SPEC_E3-$SPEC_E3}; BENCH8B=${H_BENCH8B:-$BENCH8B}
BENCH_CTL=${H_BENCH:-$BENCH_CTL}
WARMUP_CTL=${H_WARMUP:-"python3 $ROOT/bench/gpu/warmup.py --port $PORT --prompts $CTL_PROMPTS --concurrency 32 --input-len 128 --output-len $CTL_OUT_LEN || $BENCH_CTL"}

profile() {  # NAME ARGS... : one invoke profile.remote into $WORK/NAME, bounded by the budget
  # (PBENCH: another benchmark command; PMIN: the seconds it needs left to start at all;
  #  PWARMUP: the warm-up's command, given to profile.remote as warmup_command in a config file)
  local name=$1; shift
  if [ "$(left)" -lt "${PMIN:-150}" ]; then say "$name: skipped, only $(left)s left"; return 1; fi
  rm -rf "${WORK:?}/$name"
  local conf=()
  if [ -n "${PWARMUP:-}" ]; then
    python3 -c 'import json, sys; print(json.dumps({"patchkit": {"profile": {"remote": {"warmup_command": sys.argv[1]}}}}))' \
      "$PWARMUP" > "$WORK/$name.invoke.json"
    conf=(-f "$WORK/$name.invoke.json")
  fi
  (cd "$ROOT" && run timeout -s INT -k 30 $(( $(left) - 40 )) python3 -m invoke ${conf[@]+"${conf[@]}"} profile.remote \
      --target "$SITE" --series "$SERIES" --bench "${PBENCH:-$BENCH}" --out "$WORK/$name" "$@")
  local rc=$?
  # whatever happened, the tree must be pristine again (profile.remote reverts; this checks it)
  (cd "$ROOT" && python3 -m invoke patch.status --series "$SERIES" --target "$SITE" 2>&1 | tee -a "$LOG")
  return $rc
}

stage_setup() {
  if [ ! -f "$SITE/.unpacked" ]; then
    run python3 -c "import tarfile; tarfile.open('$ROOT/.carry-site/site.tar.xz').extractall('$SITE', filter='fully_trusted')" \
      && touch "$SITE/.unpacked" || return 1
  else say "site already unpacked in $SITE"; fi
  if [ ! -f "$SITE/flashinfer/data/csrc/norm.cu" ] && [ -f "$ROOT/.carry-fi/fidata.tar.xz" ]; then
    run python3 -c "import tarfile; tarfile.open('$ROOT/.carry-fi/fidata.tar.xz').extractall('$SITE/flashinfer/data', filter='fully_trusted')"
  fi
  if [ ! -d /tmp/jitcache ] && [ -f "$ROOT/.carry-jit/jitcache.tgz" ]; then run tar -C /tmp -xzf "$ROOT/.carry-jit/jitcache.tgz"; fi
  mkdir -p /tmp/jitcache
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$WORK/gpu.txt" | tee -a "$LOG"
  python3 -c "import torch, sglang; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'sglang', sglang.__version__)" 2>&1 | tee "$WORK/versions.txt" | tee -a "$LOG"
}

stage_models() {
  if [ -f "$M/draft/model.safetensors" ]; then say "models already in $M"; return 0; fi
  run python3 "$ROOT/bench/gpu/make_models.py" "$M" --agree "${AGREE:-0.8}" --check
  grep '^CHECK ' "$LOG" | tail -n 1 > "$WORK/models_check.txt"
}

stage_models8b() {
  if [ -f "$M8/draft/model.safetensors" ] && [ -f "$M8/target/model.safetensors" ]; then
    say "8B models already in $M8"; return 0; fi
  df -h "$(dirname "$M8")" | tail -n 1 | tee -a "$LOG"
  run python3 "$ROOT/bench/gpu/make_models_eagle3.py" "$M8" --agree "${E3_AGREE:-0.8}" \
      --steps "$E3_STEPS" --check || return 1
  grep -E '^(CHECK|WROTE) ' "$LOG" | tail -n 2 > "$WORK/models8b_check.txt"
}

# a server without patchkit (the tree as it is, no PATCHKIT_* env): bare_start LOG COMMAND...
# starts it in its own process group and waits for /health (BARE_PID); bare_stop ends the group
# (TERM: a background job of a non-interactive shell ignores INT)
bare_start() {
  local slog=$1; shift
  setsid "$@" >"$slog" 2>&1 </dev/null &
  BARE_PID=$!
  python3 "$ROOT/bench/gpu/wait_health.py" "$PORT" "$BARE_PID" "${BARE_WAIT:-300}" 2>&1 | tee -a "$LOG"
}
bare_stop() { kill -TERM -- -"$BARE_PID" 2>/dev/null; sleep 5; kill -KILL -- -"$BARE_PID" 2>/dev/null; }
stage_explore() {  # a plain v2 server + bench_serving, no patchkit involved: checks the stack
  local slog=$WORK/explore.server.log
  bare_start "$slog" $SERVER $SPEC
  run timeout 120 $BENCH
  bare_stop
  grep -E "Spec v1|Spec v2|Capture cuda graph end|accept len" "$slog" | tail -n 5 | cut -c1-240 | tee -a "$LOG"
  say "explore: decode batch lines: $(grep -c 'Decode batch' "$slog")"
}

# v1 also measures the timer's overhead inside its server: PATCHKIT_TIMER_AB alternates blocks
# of $AB cycles timed (events) and off, paired in the report's `overhead`.
stage_v1() { profile v1 --server "$SERVER --disable-overlap-schedule $SPEC" --env PATCHKIT_TIMER=events \
               --env SGLANG_ENABLE_SPEC_V2=0 --env PATCHKIT_TIMER_AB=${AB:-20} --baseline; }
stage_v2() { profile v2 --server "$SERVER $SPEC" --env PATCHKIT_TIMER=events --baseline; }
# EAGLE-3 on the 8B pair: v2 (default, overlap on) and v1 (its timer overhead paired in-server)
# (every cycle timed by default, E3_SAMPLE: ~400 decode cycles of 13 ms, verify-bound, are few
# enough to time them all; its speculative server starts on a cold kernel cache in a fresh
# call, and the warm-up pass, the full benchmark, takes the compilation stalls)
stage_e3v2() { PBENCH=$BENCH8B PMIN=${E3_MIN:-140} profile e3v2 --server "$SERVER8B $SPEC_E3" \
                 --env PATCHKIT_TIMER=events --sample "${E3_SAMPLE:-1}" --baseline; }
stage_e3v1() {
  local base=--baseline
  if [ "$(left)" -lt "${E3_BASE_MIN:-240}" ]; then
    say "e3v1: $(left)s left, under E3_BASE_MIN=${E3_BASE_MIN:-240}: no baseline of its own"; base=""; fi
  local warm=--warmup   # the warm-up pass costs ~30 s; without it the report counts every
  if [ "$(left)" -lt "${E3_WARM_MIN:-220}" ]; then      # cycle and still keeps stalls apart
    say "e3v1: $(left)s left, under E3_WARM_MIN=${E3_WARM_MIN:-220}: no warm-up pass"; warm=--no-warmup; fi
  PBENCH=$BENCH8B PMIN=${E3_MIN:-140} profile e3v1 --server "$SERVER8B --disable-overlap-schedule $SPEC_E3" \
    --env PATCHKIT_TIMER=events --env SGLANG_ENABLE_SPEC_V2=0 --env PATCHKIT_TIMER_AB=${AB:-20} \
    --sample "${E3_SAMPLE:-1}" $warm $base
}
stage_sweep() { profile sweep --server "$SERVER $SPEC" --env PATCHKIT_TIMER=events --matrix "$MATRIX" --baseline \
                  --repeat "${SWEEP_REPEAT:-2}"; }

# the timer's cost inside the default (v2) server: A/B blocks, with the runtime's default
# event sharing (calls < 1 us apart share one event) and with a wider window
stage_overhead() { profile overhead --server "$SERVER $SPEC" --env PATCHKIT_TIMER=events \
                     --env PATCHKIT_TIMER_AB=${AB:-20} --matrix "${OVERHEAD_MATRIX:-env:PATCHKIT_TIMER_SHARE_NS=1000,20000}" \
                     --repeat "${SWEEP_REPEAT:-2}"; }

# The control: two identical points (env:PK_CONTROL=a,b changes nothing SGLang reads), no
# baseline, CONTROL_REPEAT servers each in rotated order: the verdict must not call them
# different. Every server also pairs timed and off blocks (PATCHKIT_TIMER_AB) at the default
# sampling (--sample 8): one in-server overhead figure per server. The repetitions shrink to what
# the time left allows (SRV_S s per server), at least 2.
stage_control() {
  local rep=${CONTROL_REPEAT:-3} fit=$(( ($(left) - 60) / (2 * SRV_S) ))
  if [ "$fit" -lt "$rep" ]; then
    if [ "$fit" -lt 2 ]; then
      say "control: skipped, only $(left)s left (2 x 2 servers need $(( 4 * SRV_S + 60 ))s)"; return 1; fi
    say "control: $(left)s left: $fit repetitions instead of $rep"; rep=$fit
  fi
  PBENCH=$BENCH_CTL PWARMUP=$WARMUP_CTL PMIN=0 profile control --server "$SERVER $SPEC" \
    --env PATCHKIT_TIMER=events --env PATCHKIT_TIMER_AB=${AB:-20} --sample 8 \
    --matrix 'env:PK_CONTROL=a,b' --repeat "$rep"
}

# The timer's in-server overhead by worker and sampling, same workload as the control: v1 at
# sample 1 and 8 (two servers), v2 at sample 1 (v2 at sample 8: the control's servers).
stage_ovh() {
  local rc=0
  if [ "$(left)" -ge $(( 2 * SRV_S + 50 )) ]; then
    PBENCH=$BENCH_CTL PWARMUP=$WARMUP_CTL PMIN=0 profile ovh_v1 \
      --server "$SERVER --disable-overlap-schedule $SPEC" --env SGLANG_ENABLE_SPEC_V2=0 \
      --env PATCHKIT_TIMER=events --env PATCHKIT_TIMER_AB=${AB:-20} \
      --matrix 'env:PATCHKIT_TIMER_SAMPLE=1,8' --repeat 1 || rc=1
  else say "ovh_v1: skipped, only $(left)s left (2 servers need $(( 2 * SRV_S + 50 ))s)"; rc=1; fi
  if [ "$(left)" -ge $(( SRV_S + 50 )) ]; then
    PBENCH=$BENCH_CTL PWARMUP=$WARMUP_CTL PMIN=0 profile ovh_v2 --server "$SERVER $SPEC" \
      --env PATCHKIT_TIMER=events --env PATCHKIT_TIMER_AB=${AB:-20} --sample 1 || rc=1
  else say "ovh_v2: skipped, only $(left)s left (1 server needs $(( SRV_S + 50 ))s)"; rc=1; fi
  return $rc
}

# Where the timer's per-cycle cost goes: a tiny server per worker, every cycle timed,
# A/B blocks, bench/gpu/diag/sitecustomize.py measuring in the scheduler the timer's own host
# time, the thread's CPU time and garbage collection per cycle; diag_report.py pairs the blocks.
diag_one() {  # NAME WORKER-ARGS...
  local name=$1; shift
  rm -rf "${WORK:?}/$name.d"
  PBENCH=$BENCH_CTL PWARMUP=$WARMUP_CTL PMIN=$(( SRV_S + 30 )) profile "$name" "$@" \
    --env PATCHKIT_TIMER=events --env PATCHKIT_TIMER_AB=${AB:-20} --sample "${DIAG_SAMPLE:-1}" \
    --env "PYTHONPATH=$ROOT/bench/gpu/diag:$SITE:$ROOT" --env "PK_DIAG_DIR=$WORK/$name.d" \
    --env "PK_DIAG_SCOPE=${DIAG_SCOPE:-top}" || return 1
  python3 "$ROOT/bench/gpu/diag_report.py" "$WORK/$name.d" "$WORK/$name" --json "$WORK/$name/diag.json" 2>&1 | tee -a "$LOG"
}
# v2 only, twice: the API functions monitored (an unbiased pairing, the cost by API function),
# then every function of the runtime (what cycle_end's cost is made of)
stage_diagv2() {
  local rc=0
  diag_one diag_v2top --server "$SERVER $SPEC" || rc=1
  DIAG_SCOPE=all diag_one diag_v2all --server "$SERVER $SPEC" || rc=1
  return $rc
}
stage_diag() {
  local rc=0
  diag_one diag_v1 --server "$SERVER --disable-overlap-schedule $SPEC" --env SGLANG_ENABLE_SPEC_V2=0 || rc=1
  diag_one diag_v2 --server "$SERVER $SPEC" || rc=1
  return $rc
}
# SGLang's own profiler on a patched v2 server: /start_profile for TRACE_STEPS
# forward steps while the benchmark runs; trace_load.py says which phase ranges the trace
# names and what each decode cycle calls. trace: the runtime's record_function ranges, SGLang's
# stack and shapes off, sampling 4 (timed and untimed cycles side by side); trace_nvtx: what a
# user tried, PATCHKIT_TIMER_NVTX=1 and /start_profile's defaults (stack and shapes on).
trace_one() {  # NAME STACK-FLAG ARGS...
  local name=$1 stack=$2; shift 2
  rm -rf "${WORK:?}/$name.prof"
  PBENCH="python3 $ROOT/bench/gpu/trace_load.py --port $PORT --out $WORK/$name.prof --steps ${TRACE_STEPS:-80} --wait ${TRACE_WAIT:-90} $stack -- timeout ${TRACE_BENCH_S:-150} $BENCH_CTL" \
    PWARMUP=$WARMUP_CTL PMIN=$(( SRV_S + 60 )) profile "$name" --server "$SERVER $SPEC" \
    --env PATCHKIT_TIMER=events "$@"
  local rc=$?
  ls -la "$WORK/$name.prof" 2>&1 | tee -a "$LOG"
  cut -c1-3000 "$WORK/$name.prof/trace_summary.json" 2>&1 | tee -a "$LOG"
  return $rc
}
stage_trace() { trace_one trace "" --sample "${TRACE_SAMPLE:-4}"; }
stage_trace_stack() { trace_one trace_stack --stack --sample "${TRACE_SAMPLE:-4}"; }  # no NVTX
stage_trace_nvtx() { trace_one trace_nvtx --stack --env PATCHKIT_TIMER_NVTX=1 --sample "${TRACE_SAMPLE:-4}"; }

# The timer's cost goals on the tiny harness at batch 32, each paired inside one server (A/B blocks of
# $AB cycles): the default sampling (1 in 16) in v2 and v1 (ovh16), every cycle timed in v2 and
# v1 (ovh1), and full against sampled timing side by side (shares: PATCHKIT_TIMER_AB_B=sample,
# blocks of $SHARES_AB, compared by bench/gpu/shares_ab.py)
ovh_one() {  # NAME SAMPLE WORKER-ARGS...
  local name=$1 sample=$2; shift 2
  if [ "$(left)" -lt $(( SRV_S + 40 )) ]; then say "$name: skipped, only $(left)s left"; return 1; fi
  PBENCH=$BENCH_CTL PWARMUP=$WARMUP_CTL PMIN=0 profile "$name" "$@" --env PATCHKIT_TIMER=events \
    --env PATCHKIT_TIMER_AB=${AB:-20} --sample "$sample"
}
ovh_both() {  # PREFIX SAMPLE: the v2 server, then the v1 one
  local rc=0
  ovh_one "${1}_v2" "$2" --server "$SERVER $SPEC" || rc=1
  ovh_one "${1}_v1" "$2" --server "$SERVER --disable-overlap-schedule $SPEC" --env SGLANG_ENABLE_SPEC_V2=0 || rc=1
  return $rc
}
stage_ovh16() { ovh_both ovh16 16; }
stage_ovh1() { ovh_both ovh1 1; }
stage_ovh16b() { ovh_one ovh16b_v2 16 --server "$SERVER $SPEC"; }  # one more v2 server at the default
stage_ovh32() { ovh_both ovh32 32; }
# the same pairs against bare off blocks (PATCHKIT_TIMER_AB_B=bare: cycle starts only), so that
# recording a cycle counts too: the default's whole cost but for its no-op call sites
stage_ovh16bare() {
  ovh_one ovh16bare_v2 16 --server "$SERVER $SPEC" --env PATCHKIT_TIMER_AB_B=bare || return 1
  ovh_one ovh16bare_v1 16 --server "$SERVER --disable-overlap-schedule $SPEC" --env SGLANG_ENABLE_SPEC_V2=0 \
    --env PATCHKIT_TIMER_AB_B=bare
}
# every cycle timed, device times read RESOLVE_BATCH (8) timed cycles at a time
stage_ovh1rb() {
  ovh_one ovh1rb_v2 1 --server "$SERVER $SPEC" --env PATCHKIT_TIMER_RESOLVE_BATCH=${RESOLVE_BATCH:-8}
}
# the verify-bound regime: the 8B EAGLE-3 pair, every cycle timed,
# A/B blocks in each server, a warm-up pass of the same load (warmup.py on /generate);
# E3_OVH_PROMPTS (768) requests, ~1,400 cycles. Since 74348a2 every cycle timed reads device
# times 16 at a time by default (calls 12-13 ran before it: one read per cycle);
# `RESOLVE_BATCH=1 ... e3ovhrb` gives that back
WARMUP8B=${H_WARMUP:-"python3 $ROOT/bench/gpu/warmup.py --port $PORT --prompts ${E3_OVH_PROMPTS:-768} --concurrency 32 --input-len 128 --output-len ${E3_OUT_LEN:-256} || $BENCH8B"}
e3ovh_one() {  # NAME WORKER-ARGS...
  local name=$1; shift
  if [ "$(left)" -lt "${E3_MIN:-150}" ]; then say "$name: skipped, only $(left)s left"; return 1; fi
  PBENCH=${BENCH8B/--num-prompts ${E3_PROMPTS:-128}/--num-prompts ${E3_OVH_PROMPTS:-768}} PWARMUP=$WARMUP8B PMIN=0 \
    profile "$name" "$@" --env PATCHKIT_TIMER=events --env PATCHKIT_TIMER_AB=${AB:-20} --sample 1
}
e3ovh_v2() { local name=$1; shift; e3ovh_one "$name" --server "$SERVER8B $SPEC_E3" "$@"; }  # NAME [ARGS...]
e3ovh_v1() { local name=$1; shift; e3ovh_one "$name" --server "$SERVER8B --disable-overlap-schedule $SPEC_E3" \
               --env SGLANG_ENABLE_SPEC_V2=0 "$@"; }
stage_e3ovh() { local rc=0; e3ovh_v2 e3ovh1_v2 || rc=1; e3ovh_v1 e3ovh1_v1 || rc=1; e3ovh_v2 e3ovh1b_v2 || rc=1; return $rc; }
stage_e3ovhb() { local rc=0; e3ovh_v1 e3ovh1b_v1 || rc=1; e3ovh_v2 e3ovh1b_v2 || rc=1; return $rc; }  # one more of each
stage_e3ovhrb() {  # two v1 servers reading device times RESOLVE_BATCH (16) timed cycles at a time
  local rc=0 rb=(--env PATCHKIT_TIMER_RESOLVE_BATCH=${RESOLVE_BATCH:-16})
  e3ovh_v1 e3ovh1rb_v1 "${rb[@]}" || rc=1
  e3ovh_v1 e3ovh1rbb_v1 "${rb[@]}" || rc=1
  return $rc
}
shares_one() {  # NAME
  local name=$1
  if [ "$(left)" -lt $(( SRV_S + 40 )) ]; then say "$name: skipped, only $(left)s left"; return 1; fi
  AB=${SHARES_AB:-40} PBENCH=$BENCH_CTL PWARMUP=$WARMUP_CTL PMIN=0 profile "$name" --server "$SERVER $SPEC" \
    --env PATCHKIT_TIMER=events --env PATCHKIT_TIMER_AB=${SHARES_AB:-40} --env PATCHKIT_TIMER_AB_B=sample \
    --sample "${SHARES_SAMPLE:-16}" || return 1
  python3 "$ROOT/bench/gpu/shares_ab.py" "$WORK/$name" --json "$WORK/$name/shares_ab.json" 2>&1 | tee -a "$LOG"
}
stage_shares() { shares_one shares; }
stage_sharesb() { shares_one sharesb; }  # one more such server in the same call

stage_cudatests() {  # the runtime's CUDA-only tests (CI has no GPU; they skip there)
  (cd "$ROOT" && run timeout 240 python3 -m pytest -q -rs -p no:cacheprovider tests/timing/test_timing_runtime.py tests/timing/test_timing_profiler.py tests/report/test_report.py) \
    && tail -n 3 "$LOG" > "$WORK/cuda_tests.txt"
}

# for a machine with two GPUs (nvidia-h200-x2): both ranks timed, rank skew, the NCCL
# sweep with a baseline; collect writes sglang_gpu_tp2.{json,md} from it
stage_tp2() { profile tp2 --server "$SERVER $SPEC --tp 2" --env PATCHKIT_TIMER=events \
                --matrix "${TP2_MATRIX:-env:NCCL_PROTO=LL,Simple;env:NCCL_ALGO=Ring,Tree}" --baseline \
                --repeat "${SWEEP_REPEAT:-2}"; }

stage_timer() {
  [ -f "$ROOT/bench/gpu_timer_bench.py" ] || return 0
  (cd "$ROOT" && timeout 150 python3 bench/gpu_timer_bench.py --out "$WORK/timer" 2>&1 | tee "$WORK/timer_bench.txt" | tee -a "$LOG")
}

stage_recfloor() {  # what an event record can cost from Python at best (bench/gpu/record_floor.py)
  (cd "$ROOT" && run timeout 120 python3 bench/gpu/record_floor.py --out "$OUT/record_floor.txt")
}

# The V2-only releases (0.5.13+: every speculative server runs EAGLEWorkerV2), each server
# checked by bench/gpu/release_check.py: records = SGLang's decode lines, every phase in every
# timed decode cycle, nesting, device times, and the acceptance histogram equal to SGLang's own
# spec_correct_drafts_histogram summed over the same requests. Every cycle is timed (--sample 1)
# and the benchmark is the server's only load (--no-warmup): warmup.py --meta sends it to
# /generate and keeps each answer's meta_info. Run folders are $WORK/${REL}_NAME; checks in
# $WORK/checks/ (relpack bundles them into $OUT). REL_PROMPTS (128), REL_OUT_LEN (256); REL_MIN
# (200 s): what a stage needs left to start a server (a first server on a cold machine spends
# about 3 minutes starting: imports, then the CUDA-graph capture compiles its Triton kernels).
SPEC_TREE="--speculative-algorithm STANDALONE --speculative-draft-model-path $M/draft --speculative-num-steps 3 --speculative-eagle-topk ${TREE_TOPK:-4} --speculative-num-draft-tokens ${TREE_TOKENS:-8}"
relrun() {  # NAME SERVER-COMMAND [PROFILE-ARGS...]
  # (--skip-server-warmup, and /health without a generation (0.5.17 generates one token per
  #  /health by default): SGLang's own requests would add decode cycles to the records that no
  #  answer's meta_info counts)
  local name=${REL}_$1 server="$2 --skip-server-warmup"; shift 2
  local meta=$WORK/$name.meta.json
  rm -f "$meta"; mkdir -p "$WORK/checks"
  PBENCH="python3 $ROOT/bench/gpu/warmup.py --port $PORT --prompts ${REL_PROMPTS:-128} --concurrency 32 --input-len 128 --output-len ${REL_OUT_LEN:-256} --meta $meta" \
    PMIN=${REL_MIN:-200} profile "$name" --server "$server" --env PATCHKIT_TIMER=events \
      --env SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0 --no-warmup "$@" || return 1
  run python3 "$ROOT/bench/gpu/release_check.py" "$WORK/$name" --meta "$meta" --json "$WORK/checks/$name.json"
}
stage_relacc() { relrun acc "$SERVER $SPEC" --sample 1; }                                   # overlap on
stage_relnoov() { relrun noov "$SERVER --disable-overlap-schedule $SPEC" --sample 1; }        # overlap off
stage_reltree() { relrun tree "$SERVER $SPEC_TREE" --sample 1; }                               # topk > 1
stage_rele3() {                                                                                # EAGLE-3, 8B
  PMIN=${E3_MIN:-140} REL_PROMPTS=${REL_E3_PROMPTS:-128} relrun e3 "$SERVER8B $SPEC_E3" --sample 1
}
# the runtime's default (1 % budget, sampled) against off blocks in the same server: the paired
# overhead (report's `overhead`); acceptance is checked on the timed cycles only, so not here
stage_relab() { PMIN=${REL_MIN:-200} PBENCH=$BENCH_CTL PWARMUP=$WARMUP_CTL profile "${REL}_ab" --server "$SERVER $SPEC" \
                  --env PATCHKIT_TIMER=events --env PATCHKIT_TIMER_AB=${AB:-20}; }
stage_rele3ab() { PMIN=${E3_MIN:-140} PBENCH=${BENCH8B/--num-prompts ${E3_PROMPTS:-128}/--num-prompts ${E3_OVH_PROMPTS:-384}} \
                    PWARMUP=$WARMUP8B profile "${REL}_e3ab" --server "$SERVER8B $SPEC_E3" \
                    --env PATCHKIT_TIMER=events --env PATCHKIT_TIMER_AB=${AB:-20}; }
stage_relpredict() {  # profile.predict on the acc run (every cycle timed)
  local d; d=$(ls -d "$WORK/${REL}_${PRED_FROM:-acc}"/2*/ 2>/dev/null | tail -n 1)
  [ -n "$d" ] || { say "relpredict: no ${REL}_${PRED_FROM:-acc} run"; return 1; }
  (cd "$ROOT" && run python3 -m invoke profile.predict "$d")
}
stage_relsweep() {  # a budgeted sweep of num-steps on the tiny pair
  local min=${SWEEP_MIN:-$(( ($(left) - 60) / 60 ))}
  if [ "$min" -lt 3 ]; then say "relsweep: skipped, only $(left)s left"; return 1; fi
  PBENCH=$BENCH_CTL PWARMUP=$WARMUP_CTL PMIN=0 profile "${REL}_sweep" --server "$SERVER $SPEC" \
    --env PATCHKIT_TIMER=events --matrix "${REL_MATRIX:-speculative-num-steps=1,3}" --budget "$min"
}
stage_reltrace() { trace_one "${REL}_trace" "" --sample "${TRACE_SAMPLE:-4}"; }
stage_relbare() {  # the control for a server that failed patched: the same server unpatched (no
  # patchkit at all: pristine tree, no PATCHKIT_* env), the same /generate load; did it survive?
  # BARE_NAME (noov) names it, BARE_ARGS its flags after $SERVER (default: overlap off, $SPEC)
  local name=${REL}_bare_${BARE_NAME:-noov} slog rc
  if [ "$(left)" -lt 120 ]; then say "relbare: skipped, only $(left)s left"; return 1; fi
  (cd "$ROOT" && python3 -m invoke patch.status --series "$SERIES" --target "$SITE" 2>&1 | tail -n 3 | tee -a "$LOG")
  mkdir -p "$WORK/$name"; slog=$WORK/$name/server.log
  BARE_WAIT=240 bare_start "$slog" $SERVER ${BARE_ARGS:---disable-overlap-schedule $SPEC} --skip-server-warmup
  run timeout 120 python3 "$ROOT/bench/gpu/warmup.py" --port $PORT --prompts ${REL_PROMPTS:-128} --concurrency 32 \
      --input-len 128 --output-len ${REL_OUT_LEN:-256} --meta "$WORK/$name/meta.json"
  rc=$?
  if kill -0 "$BARE_PID" 2>/dev/null; then say "relbare $name: the unpatched server is alive after the load"
  else say "relbare $name: the unpatched server DIED during the load"; rc=1; fi
  bare_stop
  grep -E "Scheduler hit an exception|Assertion|Error" "$slog" | sort | uniq -c | sort -rn | head -n 5 | cut -c1-240 | tee -a "$LOG"
  say "relbare $name: decode batch lines $(grep -c 'Decode batch' "$slog")"
  return $rc
}
stage_relpack() {  # one archive of this call's release runs and checks, and the checks as one JSON
  tar -C "$WORK" --exclude='trace.json' --exclude='*.pt.trace.json*' --exclude='*.trace.json.gz' \
      -czf "$OUT/rel_${REL}_runs.tgz" $(cd "$WORK" && ls -d "${REL}"_* checks 2>/dev/null) 2>&1 | tee -a "$LOG"
  python3 - "$WORK/checks" "$OUT/checks_${REL}.json" <<'PY'
import json, sys
from pathlib import Path
rows = {p.stem: json.loads(p.read_text()) for p in sorted(Path(sys.argv[1]).glob("*.json"))}
Path(sys.argv[2]).write_text(json.dumps(rows, indent=1) + "\n")
for name, r in rows.items():
    print(name, {k: v for k, v in r["checks"].items()})
PY
  ls -la "$OUT" | tee -a "$LOG"
}

stage_collect() {
  run python3 "$ROOT/bench/gpu/collect.py" "$WORK" "$OUT"
  tar -C "$WORK" --exclude='trace.json' -czf "$OUT/runs.tgz" . 2>&1 | tee -a "$LOG"
}

# The prediction's proof: profile once at num-steps $E3_STEPS (set E3_STEPS=5) on the 8B EAGLE-3 pair
# (v2, every cycle timed: acceptance comes with the device times), predict num-steps 1..N with
# profile.predict, then measure points with the same server and benchmark. PRED (a name: one
# per acceptance profile, e.g. a08 / a05 with MODELS8B and E3_AGREE to match), PRED_ARGS
# (profile.remote options of the profiled run; default --sample 1: every cycle timed; e.g.
# "--env PATCHKIT_TIMER_SAMPLE= --env PATCHKIT_TIMER_AB=20": the runtime's budget, A/B blocks), PRED_POINTS
# (speculative-num-steps values to measure, e.g. 1,2,3), PRED_REPEAT (1), PRED_PROMPTS (256).
PRED=${PRED:-a08}
BENCH_PRED=${H_BENCH:-"python3 -m sglang.bench_serving --backend sglang --host 127.0.0.1 --port $PORT --dataset-name random-ids --random-input-len 128 --random-output-len ${E3_OUT_LEN:-256} --random-range-ratio 1 --num-prompts ${PRED_PROMPTS:-256} --max-concurrency 32 --tokenizer $M8/target --model $M8/target --disable-tqdm"}
WARMUP_PRED=${H_WARMUP:-"python3 $ROOT/bench/gpu/warmup.py --port $PORT --prompts 64 --concurrency 32 --input-len 128 --output-len ${E3_OUT_LEN:-256} || $BENCH_PRED"}
# PRED_V1=1: the v1 worker (EAGLEWorker: SGLANG_ENABLE_SPEC_V2=0, no overlap scheduling);
# its folders and files get a "v1" after $PRED
pred_worker() {
  if [ -n "${PRED_V1:-}" ]; then W_NAME=${PRED}v1; W_SERVER="$SERVER8B --disable-overlap-schedule $SPEC_E3"; W_ENV=(--env SGLANG_ENABLE_SPEC_V2=0)
  else W_NAME=$PRED; W_SERVER="$SERVER8B $SPEC_E3"; W_ENV=(); fi
}
stage_e3pred() {
  pred_worker
  PBENCH=$BENCH_PRED PWARMUP=$WARMUP_PRED PMIN=${E3_MIN:-140} profile "pred_$W_NAME" --server "$W_SERVER" \
    --env PATCHKIT_TIMER=events "${W_ENV[@]}" ${PRED_ARGS:---sample 1} || return 1
  local d; d=$(ls -d "$WORK/pred_$W_NAME"/2*/ | tail -n 1)
  (cd "$ROOT" && run python3 -m invoke profile.predict "$d")
  cp "$d/predict.json" "$OUT/predict_$W_NAME.json" 2>/dev/null
  cp "$d/table.txt" "$OUT/pred_${W_NAME}_table.txt" 2>/dev/null
  cp "$d/summary.json" "$OUT/pred_${W_NAME}_summary.json" 2>/dev/null
  tar -C "$d" -czf "$OUT/pred_${W_NAME}_run.tgz" --exclude=trace.json timing summary.json 2>&1 | tee -a "$LOG"
}
stage_e3meas() {  # one folder per call (meas_$PRED_$PRED_TAG): points measured in this call
  pred_worker
  local name="meas_${W_NAME}_${PRED_TAG:-1}"
  PBENCH=$BENCH_PRED PWARMUP=$WARMUP_PRED PMIN=${E3_MIN:-140} profile "$name" --server "$W_SERVER" \
    --env PATCHKIT_TIMER=events "${W_ENV[@]}" --matrix "speculative-num-steps=${PRED_POINTS:-1,2,3}" --repeat "${PRED_REPEAT:-1}"
  local d; d=$(ls -d "$WORK/$name"/2*/ | tail -n 1)
  cp "$d/sweep.json" "$OUT/sweep_${name}.json" 2>/dev/null
  cp "$d/sweep.txt" "$OUT/sweep_${name}.txt" 2>/dev/null
  tar -C "$d" -czf "$OUT/${name}_runs.tgz" --exclude=trace.json --exclude='*.trace.json*' . 2>&1 | tee -a "$LOG"
  return 0
}

# On the H200, with the runtime's budgeted default: sweeps with --budget on the 8B
# pair (v2; A/B blocks of $AB in every server, so each start also measures what the runtime's
# default, PATCHKIT_TIMER_BUDGET 1 %, costs there). e3budget: a real difference
# (BUDGET_MATRIX, default speculative-num-steps=3,5; PRED as for e3pred: the a08/a05 models);
# e3same: identical points (env:PK_CONTROL=a,b at num-steps $E3_STEPS). SWEEP_MIN (minutes):
# the sweep's budget, else what the call has left less 1.5 minutes. Every run folder lands in
# $OUT/<name>_runs.tgz, the budget's per-server figures in $OUT/<name>_budget.json.
budget_sweep() {  # NAME MATRIX
  local name=$1 matrix=$2
  pred_worker
  local min=${SWEEP_MIN:-$(( ($(left) - 90) / 60 ))}
  if [ -z "${SWEEP_MIN:-}" ] && [ "$min" -lt 4 ]; then say "$name: skipped, only $(left)s left"; return 1; fi
  PBENCH=$BENCH_PRED PWARMUP=$WARMUP_PRED PMIN=0 profile "$name" --server "$W_SERVER" \
    --env PATCHKIT_TIMER=events --env PATCHKIT_TIMER_AB=${AB:-20} "${W_ENV[@]}" \
    --matrix "$matrix" --budget "$min"
  local d; d=$(ls -d "$WORK/$name"/2*/ 2>/dev/null | tail -n 1)
  [ -n "$d" ] || return 1
  cp "$d/sweep.json" "$OUT/sweep_${name}.json" 2>/dev/null
  cp "$d/sweep.txt" "$OUT/sweep_${name}.txt" 2>/dev/null
  tail -n 40 "$d/sweep.txt" 2>/dev/null | tee -a "$LOG"
  (cd "$ROOT" && python3 bench/gpu/budget_check.py "$d" --json "$OUT/${name}_budget.json" 2>&1 | tee -a "$LOG")
  (cd "$ROOT" && python3 bench/gpu/pairs_replay.py "$d" 2>&1 | tee "$OUT/${name}_pairs.txt" | tee -a "$LOG")
  tar -C "$d" -czf "$OUT/${name}_runs.tgz" --exclude=trace.json --exclude='*.trace.json*' . 2>&1 | tee -a "$LOG"
  return 0
}
stage_e3budget() { budget_sweep "budget_${PRED}_${PRED_TAG:-1}" "${BUDGET_MATRIX:-speculative-num-steps=3,5}"; }
stage_e3same() { budget_sweep "same_${PRED}_${PRED_TAG:-1}" 'env:PK_CONTROL=a,b'; }
# the blocked design on the one GPU: two tiny servers at once on GPU 0 (--gpus 0@a,0@b, each
# with a quarter of its memory), identical points over SHARE_REPEAT (2) rounds; then one tiny
# v2 server alone with the runtime's default budget and A/B blocks (the host-bound regime)
stage_tinyshare() {
  if [ "$(left)" -lt $(( 2 * SRV_S + 60 )) ]; then say "tinyshare: skipped, only $(left)s left"; return 1; fi
  PBENCH=$BENCH_CTL PMIN=0 profile tinyshare --server "${SERVER/--mem-fraction-static 0.5/--mem-fraction-static 0.25} $SPEC" \
    --env PATCHKIT_TIMER=events --matrix 'env:PK_CONTROL=a,b' --gpus 0@a,0@b --repeat "${SHARE_REPEAT:-2}" --no-warmup
  local d; d=$(ls -d "$WORK/tinyshare"/2*/ 2>/dev/null | tail -n 1)
  [ -n "$d" ] || return 1
  cp "$d/sweep.json" "$OUT/sweep_tinyshare.json"; cp "$d/sweep.txt" "$OUT/sweep_tinyshare.txt"
  tail -n 40 "$d/sweep.txt" | tee -a "$LOG"
  tar -C "$d" -czf "$OUT/tinyshare_runs.tgz" --exclude=trace.json . 2>&1 | tee -a "$LOG"
}
stage_tinybudget() {
  if [ "$(left)" -lt $(( SRV_S + 40 )) ]; then say "tinybudget: skipped, only $(left)s left"; return 1; fi
  # TINY_SERVERS=N (default 1): N servers, as identical points of a matrix (env:PK_CONTROL)
  local n=${TINY_SERVERS:-1} more=()
  if [ "$n" -gt 1 ]; then more=(--matrix "env:PK_CONTROL=$(seq -s, 1 "$n")" --repeat 1); fi
  PBENCH=$BENCH_CTL PWARMUP=$WARMUP_CTL PMIN=0 profile tinybudget_v2 --server "$SERVER $SPEC" \
    --env PATCHKIT_TIMER=events --env PATCHKIT_TIMER_AB=${AB:-20} ${more[@]+"${more[@]}"} || return 1
  (cd "$ROOT" && python3 bench/gpu/budget_check.py "$WORK/tinybudget_v2" --json "$OUT/tinybudget_budget.json" 2>&1 | tee -a "$LOG")
  (cd "$ROOT" && python3 bench/gpu/pairs_replay.py "$WORK/tinybudget_v2" 2>&1 | tee "$OUT/tinybudget_pairs.txt" | tee -a "$LOG")
  tar -C "$WORK" -czf "$OUT/tinybudget_runs.tgz" --exclude=trace.json tinybudget_v2 2>&1 | tee -a "$LOG"
}

stage_pack() {  # the raw run folders without collect (Kineto traces left out; one small one kept)
  tar -C "$WORK" --exclude='trace.json' --exclude='*.pt.trace.json*' --exclude='*.trace.json.gz' \
      -czf "$OUT/runs.tgz" . 2>&1 | tee -a "$LOG"
  local t
  t=$(ls -S "$WORK"/trace.prof/*.trace.json.gz 2>/dev/null | tail -n 1)
  if [ -n "$t" ] && [ "$(stat -c %s "$t")" -lt 15000000 ]; then cp "$t" "$OUT/trace.json.gz"; fi
  ls -la "$OUT" | tee -a "$LOG"
}

stage_cache() {
  tar -C /tmp -czf "$OUT/jitcache.tgz" jitcache
  if [ "$(stat -c %s "$OUT/jitcache.tgz")" -gt 15000000 ]; then
    say "jitcache over 15 MB: keeping tvm-ffi and flashinfer only"; tar -C /tmp -czf "$OUT/jitcache.tgz" jitcache/tvm jitcache/fi
  fi
  ls -la "$OUT/jitcache.tgz" | tee -a "$LOG"
}

[ $# -gt 0 ] || set -- setup models v2 v1 sweep timer collect
# FAILFAST=1: after a failed stage only the packing stages run (a server that cannot start
# fails every later stage the same way, each costing a start)
failed=""
for st in "$@"; do
  if [ -n "$failed" ] && [ -n "${FAILFAST:-}" ]; then
    case $st in relpack|pack|collect|cache) ;; *) say "=== stage $st skipped: $failed failed (FAILFAST)"; continue ;; esac
  fi
  say "=== stage $st ($(left)s left)"
  if ! "stage_$st"; then
    say "stage $st failed"; failed=$st
    case $st in setup|models|models8b) exit 1 ;; esac
  fi
done
say "=== done"
