#!/usr/bin/env bash
# The GPU harness's stages on this CPU machine: run_h200.sh's own profile.remote invocations
# against the tests' stand-in server and benchmark (tests/support/standin_server.py, which times its fake
# EAGLE cycles through the real runtime of the patched tree), on a pristine SGLang 0.5.12 tree
# built from the cached wheel, then collect.py on the run folders. No GPU, no models.
#
#     bash bench/gpu/standin_check.sh [STAGE...]   (default: e3v2 e3v1 control ovh sweep collect)
#     CHECK=/tmp/pk-standin-check: WORK, OUT and the tree go there; nothing is written in the checkout
# Then read $CHECK/out/sglang_gpu.md (add --merge bench/results/sglang_gpu.json by running
# collect.py again by hand to see the merge).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CHECK=${CHECK:-/tmp/pk-standin-check}
PY=${PY:-$ROOT/.venv/bin/python}
mkdir -p "$CHECK"
if [ ! -d "$CHECK/site/sglang" ]; then
  PYTHONPATH=$ROOT:$ROOT/tests "$PY" -c "
import sys
from pathlib import Path
from support.upstream import sglang_installed
sglang_installed('0.5.12', Path(sys.argv[1]))" "$CHECK/site" || exit 1
fi
export PATH=$(dirname "$PY"):$PATH        # python3 in run_h200.sh: the checkout's venv
ST=$ROOT/tests/support/standin_server.py
export SITE=$CHECK/site WORK=$CHECK/work OUT=$CHECK/out BUDGET=${BUDGET:-3000} SRV_S=${SRV_S:-5}
export H_SERVER=${H_SERVER:-"PYTHONPATH=\"\$PATCHKIT_TARGET_ROOT\" exec python3 $ST serve --port \"\$PATCHKIT_SERVER_PORT\""}
export H_SERVER8B=$H_SERVER
export H_SPEC="--speculative-algorithm STANDALONE --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
export H_SPEC_E3="--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
# enough cycles for several A/B pairs of 20 cycles: 8 requests x 40 cycles
export H_BENCH="python3 $ST bench --port \"\$PATCHKIT_SERVER_PORT\" --requests 8 --cycles 40"
export H_BENCH8B=$H_BENCH
# the control and ovh stages keep their own warm-up (bench/gpu/warmup.py, SGLang's /generate):
# the stand-in answers it without tokens, so it exits 1 and the benchmark runs as the warm-up
export MATRIX=${MATRIX:-speculative-num-steps=1,3}
[ $# -gt 0 ] || set -- e3v2 e3v1 control ovh sweep collect
exec bash "$ROOT/bench/gpu/run_h200.sh" "$@"
