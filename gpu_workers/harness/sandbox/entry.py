"""The program every sandboxed step runs: `python -m gpu_workers.harness.sandbox.entry STEP
REQUEST.json RESULT_FD`. It binds the clocks (gpu_workers.harness.judge.timing) before any
problem or candidate code is imported, runs one step, and writes the step's JSON result to the
descriptor RESULT_FD (a pipe the worker reads, bounded). A step that runs user code sees no
writable folder of the host; the compiler seed's, which runs none, writes the seed's folder."""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from gpu_workers.harness.capture import graph
from gpu_workers.harness.judge import (
    compiler_seed,
    footprint,
    roofline,
    timing,  # noqa: F401  - binds the clocks first (threat 6)
)

# One-shot steps; judging (validation, verify, profile, baselines) goes through the runners.
STEPS = {
    "peaks": roofline.measure_in_child,
    "graph": graph.capture_in_child,
    "footprint": footprint.measure_in_child,
    "compiler_seed": compiler_seed.build_in_child,
}
EXIT_RAISED = 3


def main(argv: list[str]) -> int:
    step, request_path, result_fd = argv
    request = json.loads(Path(request_path).read_text())
    try:
        result = STEPS[step](request)
    except Exception as exc:  # noqa: BLE001 - user code may raise anything; report it plainly
        frames = traceback.extract_tb(exc.__traceback__)
        user = [f for f in frames if Path(f.filename).name in ("model.py", "model_new.py")]
        where = f"{Path(user[-1].filename).name}:{user[-1].lineno}" if user else "harness"
        print(f"{type(exc).__name__} at {where}: {str(exc)[:500]}", file=sys.stderr)
        return EXIT_RAISED
    with os.fdopen(int(result_fd), "w") as out:
        json.dump(result, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
