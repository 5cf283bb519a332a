"""The README's operator commands, pasted into a second terminal beside `make run`: no REDIS_URL,
no DATABASE_URL, and they join the stack's broker, database and GPU types by themselves.

Known-bad (main at 2133cf6): `import_suite` beside `make run` ended in a traceback. On a fresh
clone, `kombu.exceptions.OperationalError: Error 2 connecting to <checkout>/.cache/redis/
redis.sock. No such file or directory.` (each stack had a private broker; the commands looked for
the old shared one); here, where the stack runs on the test database, first in `no such table:
suites_suite` (the commands did not know the stack's database either).

The README's chain, shrunk for a cpu host: one fixture problem, one baseline repeat, the scripted
agent, one synthesized problem. The stack is `python -m webapp.serve` as `make run` starts it,
with a stacks folder of the test's own, so a developer's own `make run` cannot make two."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request

import pytest

from tests.conftest import problem_source
from tests.webapp.live_stack import REPO, LiveStack, finished, start_operator_command

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_the_readme_commands_join_the_stack_that_make_run_started(tmp_path):
    level1 = tmp_path / "level1"  # KernelBench's layout: the level is the folder's name
    level1.mkdir()
    # A line of its own: benchmark_baselines replaces the harness's cached baselines of the same
    # source, which tests beside this one (other xdist workers) judge relu_scale against.
    own = "\n# imported by tests/webapp/test_commands_beside_make_run.py\n"
    (level1 / "1_ReLUScale.py").write_text(problem_source("relu_scale") + own)
    stacks_dir = tmp_path / "stacks"
    stack = LiveStack(tmp_path)
    stack.env["KERNELARENA_STACKS_DIR"] = str(stacks_dir)

    def start(*args: str) -> subprocess.Popen:
        return start_operator_command(stacks_dir, *args)

    def succeeded(command: subprocess.Popen) -> str:
        done = finished(command)
        assert done.returncode == 0, f"{done.args}: {done.stdout}\n{done.stderr}\n{stack.logs()}"
        return done.stdout

    synthesis = None
    try:
        stack.start_serve()  # on the test database (DATABASE_URL), which the commands are not told
        out = succeeded(start("import_suite", str(level1), "--name", "level1"))
        assert "1 valid, 0 rejected by validation" in out
        # In a third terminal meanwhile: synthesis validates on the validation worker, while the
        # baselines, runs and re-grades take the others. A suite of its own: the stack imported
        # the committed synth-1 (benchmarks/results), whose seed 1 already holds 100 problems.
        synthesis = start("synthesize", "--count", "1", "--seed", "1", "--into", "synth-beside",
                          "--torch-only")  # fmt: skip
        out = succeeded(start("benchmark_baselines", "--suite", "level1", "--gpu", "cpu",
                              "--repeats", "1"))  # fmt: skip
        assert "1_ReLUScale: eager" in out
        out = succeeded(start("evaluate_suite", "--suite", "level1", "--agent", "scripted-demo",
                              "--gpu", "cpu", "--wait"))  # fmt: skip
        assert "succeeded" in out.split("1_ReLUScale: run")[1]  # ranked, or held on a busy host
        report, results = tmp_path / "report.md", tmp_path / "results.csv"
        succeeded(start("report", "--suite", "level1", "--gpu", "cpu", "--output", str(report),
                        "--csv", str(results)))  # fmt: skip
        assert "1 of 1 in synth-beside from seed 1" in succeeded(synthesis)
        board = _get_json(f"{stack.base_url}/api/suites/level1/board?gpu_type=cpu")
        page = _get_text(f"{stack.base_url}/suites/level1/")
    finally:
        if synthesis is not None and synthesis.poll() is None:
            synthesis.kill()  # it would wait for a stack that is gone
        stack.stop()

    (agent,) = [row for row in board["rows"] if row["entrant"] == "scripted-demo"]
    assert agent["attempted"] == 1, board
    assert "scripted-demo" in page
    markdown = report.read_text()
    assert "| 1_ReLUScale |" in markdown and "scripted-demo" in markdown
    _assert_the_terminal_shows_only_the_essentials(stack)


def _assert_the_terminal_shows_only_the_essentials(stack: LiveStack) -> None:
    """`make run`'s terminal: the URL, the GPU types and the log's path; the workers' banners and
    celery's warnings in the log (known-bad, main at 2133cf6: all of it on the terminal)."""
    terminal = (stack.folder / "serve.log").read_text()
    assert f"KernelArena at {stack.base_url}/ (GPU types: cpu)" in terminal, terminal
    (log_path,) = re.findall(r"Logs: (\S+)\.", terminal)
    log = (REPO / log_path).read_text()
    for worker_output in ("[queues]", "gpu.cpu.validate exchange="):
        assert worker_output not in terminal and worker_output in log, terminal


def _get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


def _get_json(url: str) -> dict:
    return json.loads(_get_text(url))
