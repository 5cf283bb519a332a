"""The README's two trace clients, run as written against the live stack (a real uvicorn, a real
worker): the websocket one (token only, no Origin) and the polling one follow a run from the
middle to its end, print the same events and exit 0 when it succeeds; the websocket one exits
at once, saying why, for a run its token cannot see. Known-bad before: the websocket client was
refused with 403 (no Origin), and after the run's last event the socket stayed open, so it
never exited."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.webapp.conftest import make_problem
from webapp.accounts.tokens import issue_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
README = Path(__file__).resolve().parents[2] / "README.md"
# A README client block: ```python, then its first line, "# <name>.py: what it does".
CLIENT_BLOCK = re.compile(r"```python\n(# (\w+\.py):.*?)```", re.S)
WAIT_S = 600  # only bounds a hung client; a busy host may take minutes over the run


def readme_clients(folder: Path) -> dict[str, Path]:
    """Each client block of the README, written to its own file in `folder`."""
    clients = {}
    for match in CLIENT_BLOCK.finditer(README.read_text()):
        clients[match.group(2)] = folder / match.group(2)
        clients[match.group(2)].write_text(match.group(1))
    assert set(clients) == {"watch_run.py", "poll_run.py"}, "the README's clients moved"
    return clients


def start_client(script: Path, stack, token: str, run_id: int) -> subprocess.Popen:
    env = {**stack.env, "KERNELARENA_URL": stack.base_url, "KERNELARENA_TOKEN": token}
    return subprocess.Popen(
        [sys.executable, str(script), str(run_id)],
        cwd=script.parent,  # not the checkout: the client needs nothing of the project
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(client: subprocess.Popen) -> tuple[int, list[str], str]:
    try:
        out, err = client.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        client.kill()
        out, err = client.communicate()
        pytest.fail(f"the client never exited: {out[-2000:]}{err[-2000:]}")
    return client.returncode, out.splitlines(), err


def test_the_readme_clients_follow_a_run_to_its_end(stack, alice, charlie, relu_scale, tmp_path):
    clients = readme_clients(tmp_path)
    _, token = issue_token(alice)
    run = stack.start_run(token, make_problem(alice, relu_scale).pk, "scripted-slow")
    watching = start_client(clients["watch_run.py"], stack, token, run["id"])
    polling = start_client(clients["poll_run.py"], stack, token, run["id"])

    watched, polled = finish(watching), finish(polling)

    for code, lines, err in (watched, polled):
        assert code == 0, f"{err[-3000:]}\n{stack.logs()}"
        assert lines[-1] == "run ended: succeeded"
    # the same events, printed alike (keys sorted: PostgreSQL's jsonb keeps its own key order,
    # the channel layer the worker's)
    assert watched[1] == polled[1]
    status, events = stack.api("GET", f"/api/runs/{run['id']}/events?limit=1000", token)
    assert [int(line.split()[0]) for line in watched[1][:-1]] == [e["seq"] for e in events]

    _, outsider = issue_token(charlie)
    code, lines, err = finish(start_client(clients["watch_run.py"], stack, outsider, run["id"]))
    assert (code, err.strip()) == (1, "refused: no such run that you can see")
