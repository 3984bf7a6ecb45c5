#!/bin/bash
# The GPU checks in one command, for a lent GPU machine with a time limit: the tests that need a GPU, the benchmark
# groups of benchmarks/run.py --device cuda, then profiles of the pairs that lost. Each step gets what is left of
# BUDGET seconds, so a slow step costs the steps after it, never the results already written.
#
#   OUT=/tmp/gpu bash scripts/gpu_checks.sh                       # everything, in 9 minutes
#   BENCH_GROUPS="d256:fp32 base:fp32" BUDGET=400 bash scripts/gpu_checks.sh
#
# WHEELS (default .whl): a folder of wheels installed first with --no-deps into /tmp/site (the project's
# transformers and tokenizers where the machine's image has other versions; torch stays the image's).
# Writes under OUT: env.txt, tests.log and tests.xml (every failure with its traceback), bench.log, and
# bench/results_cuda.json, RESULTS_cuda.md, profiles_cuda.md/.json; copy the results into benchmarks/ by hand.
set -u
T0=$(date +%s)
END=$((T0 + ${BUDGET:-540}))
OUT=${OUT:?set OUT to a folder for the results}
left() { echo $((END - $(date +%s))); }
at() { echo "[$(( $(date +%s) - T0 )) s]"; }
if [ -d "${WHEELS:-.whl}" ] && ls "${WHEELS:-.whl}"/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "${WHEELS:-.whl}"/*.whl || exit 3
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT/bench"
{ nvidia-smi -L; python3 -c "import torch, transformers, tokenizers
print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__)
print(torch.cuda.get_device_name(), 'fp32 matmul precision', torch.get_float32_matmul_precision())"; } \
    > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# The tests that need a GPU (the CPU-side ones of "gpu or flex" run in CI anyway). Each test at most 90 s, and the
# summary lists every failure, so a time limit cannot swallow the reason.
timeout $(( $(left) > 240 ? 180 : $(left) / 2 )) python3 -m pytest -q -p no:cacheprovider -rfE --tb=short \
    -o timeout=90 --junitxml="$OUT/tests.xml" -k "(gpu or flex or cuda) and not cpu" \
    tests/test_modeling_scratchformer.py tests/test_benchmarks.py > "$OUT/tests.log" 2>&1
rc=$?; echo "$(at) tests: rc=$rc"; grep -E "passed|failed|FAILED|ERROR" "$OUT/tests.log" | tail -8

for group in ${BENCH_GROUPS:-d256:bf16 base:bf16 d256:fp32 base:fp32}; do
    size=${group%%:*}; dtype=${group##*:}; limit=$(( $(left) - ${PROFILE_RESERVE:-90} ))
    if [ "$limit" -lt 60 ]; then echo "$(at) $size $dtype: not run, ${limit} s left"; continue; fi
    echo "$(at) $size $dtype: at most $limit s"
    timeout "$limit" python3 benchmarks/run.py --device cuda --sizes "$size" --dtype "$dtype" \
        --repeats "${REPEATS:-20}" --out-dir "$OUT/bench" >> "$OUT/bench.log" 2>&1
    rc=$?; echo "$(at) $size $dtype: rc=$rc (124: stopped by its limit, nothing of it written)"
done
grep -E "^== |ratio|not measured" "$OUT/bench.log" | cut -c1-140

limit=$(( $(left) - 5 ))
if [ -f "$OUT/bench/results_cuda.json" ] && [ "$limit" -gt 20 ]; then
    timeout "$limit" python3 benchmarks/profile_pairs.py --results "$OUT/bench/results_cuda.json" 2>&1 \
        | grep -v "^USDT\|^STAGE" | tail -20
fi
echo "$(at) done"
