#!/usr/bin/env bash
# A suite through the whole product on lent GPU machines, phases in order within one call's
# budget. Each call may land on a fresh machine, so nothing survives between calls but what a call
# writes under $OUT and the next call carries back: the SQLite database and the harness's
# baselines cache (.state.tgz).
#
#   SUITE=kernelbench-level1 FOLDER=.kb/KernelBench/level1 scripts/gpu_suite_run.sh PHASE...
#
# e.g. `baselines evaluate report`: a phase that ends within BUDGET_S leaves the rest of it to the
# next; one that does not stops the call (run the same again).
#
# FOLDER, the suite's folder, is needed by import and by baselines and evaluate (their problems'
# sources); synthesize reads it as the folder its problems are kept apart from.
#
#   import      import the folder as a suite and wait for validation (again: keep waiting)
#   synthesize  synthesize COUNT (default 200) problems of SEED (default 1) into the suite, kept
#               apart from FOLDER when given (docs/synthesis.md; again: go on where it stopped)
#   baselines   request the baselines of problems with none or a failed one (--missing), then
#               wait for them
#   evaluate    start the agent's evaluation, or go on with it, then wait for it
#   report      the report, the per-problem CSV and the suite page into $OUT
#
# BESIDE=NAME=FOLDER names a second suite imported beside these phases: its problems are sent to
# validation as the stack starts (not waited for) and its results file is saved with the first's.
# Validation takes no GPU lock and shares the GPUs well; a second suite's baselines would not
# (each times alone under its GPU's lock: on four H200s, 83 level 2 baselines beside level 1's
# evaluation left 6 runs done in 8 minutes), so they are its own call's `baselines` phase.
# e.g. BESIDE=kernelbench-level2=.kb/KernelBench/level2 while level 1's baselines are measured.
#
# Every call restores the state from .state.tgz, starts the stack (python -m webapp.serve: web
# server, a worker of each kind per GPU, embedded Redis; the first worker sends again whatever was
# left waiting, gpu_workers/waiting_work.py), works for at most BUDGET_S seconds, stops the stack,
# and writes the new state to $OUT/state.tgz (the database and the harness's baselines cache, one
# file: the device tool brings back 8 files, two folders deep), the suite's results file to
# $OUT/SUITE-GPU.json (webapp/leaderboard/results_file.py) and the stack's logs to $OUT/logs.tgz.
# Copy $OUT/state.tgz to .state.tgz before the next call and carry it, and commit the results file
# to benchmarks/results/ after each call: the stack imports it (and BESIDE's, no other suite's) as
# it starts, so a later session,
# whose checkout has no state, goes on from it (import_suite attaches the sources; what was validated
# is not validated again, what was not is sent). Carry .whl/ (gpu_tests.sh's wheels, and the web
# stack's in .whl/web/, made with
#   pip download -d .whl/web --only-binary=:all: --python-version 3.12 --platform any \
#     --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux_2_28_x86_64 '.[web,agent]'
# for a host without a package registry), .state.tgz and the suite's folder.
set -euo pipefail
cd "$(dirname "$0")/.."
PHASES=("$@")
for PHASE in "${PHASES[@]}"; do
  case "$PHASE" in
    import | synthesize | baselines | evaluate | report) ;;
    *) sed -n '2,28p' "$0"; exit 2 ;;
  esac
done
[ ${#PHASES[@]} -gt 0 ] || { echo "say which phases: import, synthesize, baselines, evaluate, report"; exit 2; }
SUITE=${SUITE:?name the suite, e.g. SUITE=kernelbench-level1}
FOLDER=${FOLDER:-}
AGENT=${AGENT:-fusion}
MAX_TURNS=${MAX_TURNS:-24}
REPEATS=${REPEATS:-2}
# A call spends about 20 s before the budget starts (wheels, the stack), then the phases work
# for BUDGET_S - DRAIN_S, then the stack stops and its workers get DRAIN_S to finish the tasks
# they hold (a run killed at the stop starts again from nothing at the next call: on the H200 a
# level 1 run took 26 to 180 s, and every call lost the four it held), then it saves: 500 fits
# a 600 s call.
BUDGET_S=${BUDGET_S:-500}
DRAIN_S=${DRAIN_S:-90}
[ "$DRAIN_S" -lt "$BUDGET_S" ] || { echo "DRAIN_S ($DRAIN_S) must be under BUDGET_S ($BUDGET_S)"; exit 2; }
OUT=${OUT:-out}
PORT=${PORT:-8000}
export KERNELARENA_CACHE=$PWD/.cache/ka PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=webapp.settings
# On a host of several GPUs the stack puts a worker of each kind on every GPU (webapp/host_gpus.py),
# so each concurrency below is per GPU and a phase spreads over all of them.
# Validation takes no GPU lock and ran 11-14 s a KernelBench level 1 problem on the H200, one at
# a time (session 36: 67 in 840 s), so two run at once; agent runs share the GPU as
# docs/benchmarks.md measures four doing. Re-grades and baselines time alone whatever these are.
export KERNELARENA_VALIDATION_CONCURRENCY=${VALIDATION_CONCURRENCY:-2}
export KERNELARENA_RUN_CONCURRENCY=${RUN_CONCURRENCY:-4}
# Baselines (the grade queue's work) took about 35 s a level 1 problem one at a time (session 39);
# each measurement first readies a fresh reference process outside the GPU lock (process, imports,
# context), so two at once let one get ready while the other times: all that the lock admits.
export KERNELARENA_REGRADE_CONCURRENCY=${REGRADE_CONCURRENCY:-2}
if [ -d .whl ]; then python3 scripts/install_wheels.py .cache/site .whl .whl/web; fi
export PYTHONPATH=$PWD/.cache/site:$PWD
GPU=$(python3 -c 'from webapp.serve import detected_gpu_type; print(detected_gpu_type())')
export KERNELARENA_GPU_TYPES=$GPU
# The stack imports this suite's committed results file (and BESIDE's) alone: another suite's
# waiting baselines, sent again as the stack starts, would take the GPU lock beside these phases
# (session 42: level 2's beside level 1's evaluation; session 43 moved its file aside by hand).
export KERNELARENA_RESULTS_DIR=$PWD/.cache/results
rm -rf "$KERNELARENA_RESULTS_DIR" && mkdir -p "$KERNELARENA_RESULTS_DIR"
for name in "$SUITE" ${BESIDE:+"${BESIDE%%=*}"}; do
  if [ -f "benchmarks/results/$name-$GPU.json" ]; then
    cp "benchmarks/results/$name-$GPU.json" "$KERNELARENA_RESULTS_DIR/"
  fi
done
mkdir -p "$OUT" .state .cache/logs "$KERNELARENA_CACHE"
manage() { python3 manage.py "$@"; }

restore() {
  if [ -f .state.tgz ]; then mkdir -p .state && tar -xzf .state.tgz -C .state; fi
  if [ -f .state/webapp.sqlite3 ]; then cp .state/webapp.sqlite3 .cache/webapp.sqlite3; fi
  if [ -d .state/baselines ]; then cp -r .state/baselines "$KERNELARENA_CACHE/"; fi
}

start_stack() {
  setsid python3 -m webapp.serve --port "$PORT" --drain-s "$DRAIN_S" >>.cache/logs/serve.log 2>&1 </dev/null &
  STACK=$!
  for _ in $(seq 120); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/', timeout=5)" \
      2>/dev/null && return 0
    sleep 2
  done
  tail -40 .cache/logs/serve.log
  return 1
}

stop_stack() {
  kill -TERM "$STACK" 2>/dev/null || true
  wait "$STACK" 2>/dev/null || true
}

save() {
  stop_stack
  cp .cache/webapp.sqlite3 .state/  # the fresh database and cache
  if [ -d "$KERNELARENA_CACHE/baselines" ]; then cp -r "$KERNELARENA_CACHE/baselines" .state/; fi
  tar -czf "$OUT/state.tgz" -C .state .
  tar -czf "$OUT/logs.tgz" -C .cache logs  # the stack's and its workers' logs, for what went wrong
  for name in "$SUITE" ${BESIDE:+"${BESIDE%%=*}"}; do
    manage export_results --suite "$name" --gpu "$GPU" --output "$OUT/$name-$GPU.json" || true
  done
}

# The second suite's import, its validation left to the workers.
import_beside() {
  local name=${BESIDE%%=*} folder=${BESIDE#*=}
  [ -n "$name" ] && [ -d "$folder" ] || { echo "BESIDE=$BESIDE: give NAME=FOLDER"; return 1; }
  manage import_suite "$folder" --name "$name" --no-wait
}

# Wait for the phase's work; running out of the budget is normal: the next call goes on.
follow() { "$@" || { echo "phase $PHASE: not finished within this call; run it again"; return 1; }; }
DEADLINE=$(($(date +%s) + BUDGET_S - DRAIN_S))
left() { echo $((DEADLINE - $(date +%s))); }

run_phase() {
  case "$PHASE" in
    import)
      follow manage import_suite "${FOLDER:?give FOLDER, the folder of the suite}" --name "$SUITE" \
        --timeout "$(left)"
      ;;
    synthesize)
      follow manage synthesize --count "${COUNT:-200}" --seed "${SEED:-1}" --into "$SUITE" \
        ${FOLDER:+--reference "$FOLDER"} --timeout "$(left)"
      ;;
    baselines)
      manage benchmark_baselines --suite "$SUITE" --gpu "$GPU" --repeats "$REPEATS" --missing --no-wait
      follow manage benchmark_baselines --suite "$SUITE" --gpu "$GPU" --follow --timeout "$(left)"
      ;;
    evaluate)
      # Starts the evaluation, or goes on with it: a run for each problem it has none of (a
      # machine whose database came from the results file holds its ended runs alone).
      manage evaluate_suite --suite "$SUITE" --agent "$AGENT" --gpu "$GPU" --max-turns "$MAX_TURNS" \
        --resume
      follow manage evaluate_suite --suite "$SUITE" --agent "$AGENT" --gpu "$GPU" --follow \
        --timeout "$(left)"
      ;;
    report)
      manage report --suite "$SUITE" --gpu "$GPU" --output "$OUT/$SUITE-$GPU.md" \
        --csv "$OUT/$SUITE-$GPU.csv"
      python3 -c "import sys, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1], timeout=30).read())" \
        "http://127.0.0.1:$PORT/suites/$SUITE/?gpu_type=$GPU" >"$OUT/suite-page.html" || true
      ;;
  esac
}

restore
start_stack
trap save EXIT
echo "stack up on $GPU; phases ${PHASES[*]} of $SUITE"
# A machine whose database came from the results file holds the suite's problems by sha256 alone,
# and a worker cannot measure or run those (benchmark_baselines and evaluate_suite refuse them):
# import_suite attaches the sources from FOLDER, validating nothing it validated before.
if [ -n "$FOLDER" ] && [[ " ${PHASES[*]} " =~ " baselines " || " ${PHASES[*]} " =~ " evaluate " ]]; then
  manage import_suite "$FOLDER" --name "$SUITE" --no-wait
fi
if [ -n "${BESIDE:-}" ]; then import_beside; fi
for PHASE in "${PHASES[@]}"; do
  if [ "$(left)" -lt 10 ] && [ "$PHASE" != report ]; then
    echo "phase $PHASE: no budget left in this call; run it again"
    break
  fi
  started=$(date +%s)
  status=0
  run_phase || status=$?
  # A level's report gives each phase's wall time: the sum of these lines over its calls.
  echo "phase $PHASE: $(($(date +%s) - started)) s in this call, $([ $status -eq 0 ] && echo done || echo "not done")"
  [ $status -eq 0 ] || break
done
