#!/usr/bin/env bash
set -u
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl-lsp/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
python3 -c "from kernel_lsp.gpu import GpuSession; s = GpuSession(); print('device:', s.device and s.device.name); s.close()"
side() {
  n=$1
  echo "== $n gate_attacks t=$(( $(date +%s)-T0 ))"
  timeout 150 python3 benchmarks/gate_attacks.py 3 > $OUT/$n-gate_attacks.txt 2>&1; echo rc=$?
  cut -c1-160 $OUT/$n-gate_attacks.txt | tail -12
  echo "== $n judge tests t=$(( $(date +%s)-T0 ))"
  timeout 170 python3 -m pytest -q -n 6 --dist loadgroup -m "gpu and not quiet" -rfEs -p no:cacheprovider tests/gpu/test_judge_gpu.py tests/gpu/test_cheating.py > $OUT/$n-judge-tests.txt 2>&1; echo rc=$?
  grep -E "passed|failed|FAILED|ERROR" $OUT/$n-judge-tests.txt | tail -8
}
side patched
git apply -R benchmarks/results/pending/judge-gate-waits-for-nothing.patch && echo reversed
side base
git apply benchmarks/results/pending/judge-gate-waits-for-nothing.patch
echo "total $(( $(date +%s)-T0 )) s"
