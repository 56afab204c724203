#!/usr/bin/env bash
# Untracked: the session's batched device run. STEPS picks the parts (space separated).
set -uo pipefail
R=${OUT:-/tmp/out}; mkdir -p "$R"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-lsp/*.whl || exit 2
PACK=.ray-pack/ray-site-cp312.tar.xz
[ -d /tmp/site/ray ] || xz -dc "$PACK" | tar -C /tmp/site -xf -
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for step in ${STEPS:-suite judge check remote scaling}; do
  case $step in
  suite|suite2|suite3)
    el "suite ($step)"; mkdir -p "$R/$step"
    OUT=$R/$step QUIET_LANE=1 RAY=${SUITE_RAY:-1} TESTS=1 CHECK=0 timeout ${SUITE_T:-240} bash .ci/gpu-run > "$R/$step/run.txt" 2>&1; echo "rc=$?"
    grep -hE "^[0-9]+ (passed|failed)|passed|failed|error" "$R/$step/gpu-tests.log" "$R/$step/gpu-quiet-tests.log" "$R/$step/ray-gpu-tests.log" 2>/dev/null | grep -v "^20" | tail -8 ;;
  judge)
    el "judge_cost old GPU0 || new GPU1"
    CUDA_VISIBLE_DEVICES=0 timeout ${JUDGE_T:-170} python3 benchmarks/judge_cost.py --tree .old-main --repeat 1 > "$R/judge_old.txt" 2>"$R/judge_old.err" &
    CUDA_VISIBLE_DEVICES=1 timeout ${JUDGE_T:-170} python3 benchmarks/judge_cost.py --repeat 1 > "$R/judge_new.txt" 2>"$R/judge_new.err"
    wait; cat "$R/judge_old.txt" "$R/judge_new.txt"; tail -2 "$R/judge_new.err" ;;
  check)
    el "check_gpu"; timeout ${CHECK_T:-300} python3 benchmarks/check_gpu.py --gpus 1,2 > "$R/check_gpu.txt" 2>"$R/check_gpu.err"; echo "rc=$?"; cat "$R/check_gpu.txt"; tail -3 "$R/check_gpu.err" ;;
  remote)
    el "remote"; OUT=$R SCALING=0 timeout ${REMOTE_T:-200} bash .ci/ray-laptop > "$R/remote.log" 2>&1; echo "rc=$?"; cat "$R/remote.txt"; tail -3 "$R/remote.err" ;;
  scaling)
    el "scaling"; OUT=$R REMOTE=0 timeout ${SCALING_T:-320} bash .ci/ray-laptop > "$R/scaling.log" 2>&1; echo "rc=$?"; cat "$R/scaling.txt"; tail -3 "$R/scaling.err" ;;
  esac
done
el done
