#!/usr/bin/env bash
set -u
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl-lsp/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
python3 -c "from kernel_lsp.gpu import GpuSession; s = GpuSession(); print('device:', s.device and s.device.name); s.close()"
echo "== keeps-results test x2 t=$(( $(date +%s)-T0 ))"
for i in 1 2; do timeout 60 python3 -m pytest -q -p no:cacheprovider -rfEs "tests/gpu/test_judge_gpu.py::test_an_entry_that_keeps_results_between_calls_is_suspicious" 2>&1 | grep -E "AssertionError:|passed|failed" | cut -c1-300; done
echo "== judged_vs_bench t=$(( $(date +%s)-T0 ))"
timeout 170 python3 benchmarks/judged_vs_bench.py --cases vadd_fp32,gelu_fp32 > $OUT/patched-judged_vs_bench.txt 2>&1; echo rc=$?
tail -25 $OUT/patched-judged_vs_bench.txt | cut -c1-220
echo "== judged_rounds t=$(( $(date +%s)-T0 ))"
KERNEL_LSP_JUDGE_CLOCKS=$OUT/rounds-clocks.jsonl timeout 280 python3 benchmarks/judged_rounds.py > $OUT/patched-judged_rounds.txt 2>&1; echo rc=$?
grep -v "^  " $OUT/patched-judged_rounds.txt | tail -40 | cut -c1-220
echo "total $(( $(date +%s)-T0 )) s"
