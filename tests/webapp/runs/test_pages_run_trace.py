"""static/js/run_trace.js in a real browser (Debian's chromium driven by Playwright) against the
real web server (uvicorn, as `make run` starts it) on the test database and the test Redis.

No worker runs: the test writes the trace itself with record_event, as a worker does, and each
event reaches the page through the real channel layer and the real consumer. A dropped
connection is the server killed and started again on the same port."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from datetime import timezone as tz

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from agent.tools import format_graph
from tests.webapp.conftest import make_problem, make_run
from tests.webapp.live_stack import LiveStack
from webapp.runs.lifecycle import end_event
from webapp.runs.models import Run, RunStatus
from webapp.runs.trace import record_event

pytestmark = pytest.mark.django_db(transaction=True)
XSS = '<img src=x onerror="window.pwned=1">'
COMPILE_LOG = "building kernels/k.cu\nkernels/k.cu:3:1: error: expected ';'\n1 error"

# What a worker writes in a run, in order: (kind, payload).
TRACE = [
    ("status", {"state": "claimed", "worker": "host:1", "attempt": 1}),
    ("thought", {"turn": 1, "text": f"fuse it {XSS}", "reasoning": None}),
    (
        "tool_call",
        {
            "turn": 1,
            "id": "c1",
            "name": "write_file",
            "arguments": {"path": "kernels/k.cu", "content": f"// {XSS}\n"},
            "raw_arguments": "",
        },
    ),
    (
        "tool_result",
        {
            "turn": 1,
            "id": "c2",
            "name": "compile",
            "ok": False,
            "text": "compile: FAILED",
            "verdict": {"ok": False, "log": COMPILE_LOG},
        },
    ),
    (
        "candidate",
        {
            "index": 0,
            "turn": 2,
            "verified": True,
            "speedup_vs_eager": 2.5,
            "speedup_vs_compile": 1.25,
            "reward": 3,
            "best": True,
            "verify": {"ok": True},
            "profile": {"ok": True, "sol_fraction": 0.4},
            "seq": 1,
        },
    ),
    (
        "status",
        {
            "state": "running",
            "turn": 3,
            "max_turns": 10,
            "tokens": 12345,
            "cost_usd": 0.5,
            "seconds": 12.0,
            "best": {"index": 0, "speedup_vs_eager": 2.5, "speedup_vs_compile": 1.25},
        },
    ),
    ("error", {"turn": 3, "kind": "format", "message": f"bad reply {XSS}"}),
]


def off_the_browser_thread(work, *args):
    """Runs `work` in a thread of its own, as a worker would write. Playwright's sync API leaves
    its event loop marked as running in this thread, where async_to_sync (record_event's send to
    the channel layer) refuses to run: the event would be saved but never sent."""

    def call():
        try:
            return work(*args)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result()


def record(run: Run, *events: tuple[str, dict]) -> list:
    return off_the_browser_thread(lambda: [record_event(run, kind, p) for kind, p in events])


def finish(run: Run, status: str, detail: str) -> None:
    """The end of a run as the worker writes it: the status, then the `ended` event."""

    def work():
        with transaction.atomic():
            Run.objects.filter(pk=run.pk).update(
                status=status, error=detail, finished=timezone.now()
            )
            end_event(run, status, detail)

    off_the_browser_thread(work)


@pytest.fixture
def stack(redis_server, tmp_path):
    """The web server, with no worker: nothing but the test writes the trace."""
    live = LiveStack(tmp_path)
    yield live
    live.stop()


class Viewer:
    """One logged-in browser on a run's page, with the URL of every websocket it opened and
    every page load."""

    def __init__(self, browser, stack: LiveStack, user, run: Run, init_script: str = ""):
        client = Client()
        client.force_login(user)
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        session = client.cookies[settings.SESSION_COOKIE_NAME].value
        cookie = {"name": settings.SESSION_COOKIE_NAME, "value": session}
        self.context.add_cookies([{**cookie, "url": stack.base_url + "/"}])
        self.sockets: list[str] = []
        self.loads: list[str] = []
        self.page = self.context.new_page()
        if init_script:
            self.page.add_init_script(init_script)
        self.page.set_default_timeout(20_000)
        self.page.on("websocket", lambda socket: self.sockets.append(socket.url))
        self.page.on("request", self._request)
        self.page.goto(f"{stack.base_url}/runs/{run.pk}/")

    def _request(self, request) -> None:
        if request.resource_type == "document":
            self.loads.append(request.url)

    def rows(self) -> list[str]:
        return self.page.eval_on_selector_all("#trace > li", "items => items.map(li => li.id)")

    def seqs(self) -> list[str]:
        return self.page.locator("#trace > li .seq").all_inner_texts()

    def wait_for_state(self, text: str) -> None:
        self.page.wait_for_function(
            "text => document.querySelector('#trace-state').textContent.includes(text)", arg=text
        )


@pytest.fixture
def alices_run(alice, relu_scale):
    """A private run of alice's that no worker has claimed: its first event is the claim."""
    return make_run(alice, make_problem(alice, relu_scale))


def test_a_late_viewer_sees_the_saved_trace_then_the_live_one(stack, browser, alice, alices_run):
    stack.start_web()
    claimed = record(alices_run, *TRACE[:3])[0]  # saved before anyone watches
    viewer = Viewer(browser, stack, alice, alices_run)
    page = viewer.page
    page.wait_for_selector("#event-3")
    viewer.wait_for_state("live")
    assert viewer.sockets == [f"ws://127.0.0.1:{stack.port}/ws/runs/{alices_run.pk}/?after=0"]

    record(alices_run, *TRACE[3:])  # live, one at a time through Redis
    page.wait_for_selector("#event-7")
    assert viewer.rows() == [f"event-{seq}" for seq in range(1, 8)]
    assert len(viewer.sockets) == 1  # the live ones came over the open socket
    assert page.locator("[data-field=status]").inner_text() == "running"
    assert page.locator("[data-field=turn]").inner_text() == "3/10"
    assert page.locator("[data-field=tokens]").inner_text() == "12,345"
    assert page.locator("[data-field=cost]").inner_text() == "$0.5000"
    assert page.locator("[data-field=best-compile]").inner_text() == "1.25×"
    started = claimed.at.astimezone(tz.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert page.locator("[data-field=started]").inner_text() == started
    row = page.locator('#candidates tr[data-seq="1"]')
    assert row.locator("a").get_attribute("href") == f"/runs/{alices_run.pk}/candidates/1/"
    assert row.locator("td").all_inner_texts() == ["1", "verified", "2.50×", "1.25×", "40%"]
    page.wait_for_selector("#chart svg .parity", state="attached")
    assert page.locator("#chart svg a circle.dot-eager").count() == 1
    assert page.locator("#chart svg a circle.dot-compile").count() == 1

    page.click("#expand-all")
    page.wait_for_selector("#event-7 .body")  # bodies are built on the (async) toggle event
    errors = page.locator("#event-4 pre.log span.err").all_inner_texts()
    assert errors == ["kernels/k.cu:3:1: error: expected ';'", "1 error"]  # not "building ..."
    text = page.locator("#trace").inner_text()
    assert XSS in text  # the model's text is shown as text ...
    assert page.locator("#trace img").count() == 0  # ... never parsed as HTML
    assert page.evaluate("window.pwned") is None


def test_it_resumes_after_the_last_seq_when_the_server_restarts(stack, browser, alice, alices_run):
    stack.start_web()
    viewer = Viewer(browser, stack, alice, alices_run)
    viewer.wait_for_state("live")
    record(alices_run, *TRACE[:2])
    viewer.page.wait_for_selector("#event-2")

    stack.stop_web()
    viewer.wait_for_state("reconnecting")
    record(alices_run, *TRACE[2:5])  # saved while no server runs: nobody is sent these
    stack.start_web()  # the same port
    viewer.page.wait_for_selector("#event-5", timeout=30_000)  # backoff: 1, 2, 4, 8 s
    viewer.wait_for_state("live")
    record(alices_run, *TRACE[5:])
    viewer.page.wait_for_selector("#event-7")

    assert viewer.rows() == [f"event-{seq}" for seq in range(1, 8)]  # each once, in order
    assert viewer.seqs() == [f"#{seq}" for seq in range(1, 8)]
    first, *retries = viewer.sockets
    assert first.endswith("?after=0")
    assert retries and all(url.endswith("?after=2") for url in retries), viewer.sockets
    assert viewer.page.locator("#candidates tbody tr").count() == 1


def test_it_stops_when_the_run_is_no_longer_visible(stack, browser, alice, alices_run):
    stack.start_web()
    viewer = Viewer(browser, stack, alice, alices_run)
    viewer.wait_for_state("live")
    record(alices_run, TRACE[0])
    viewer.page.wait_for_selector("#event-1")

    # Alice logs out in another tab; the open socket stays until the server restarts, and the
    # anonymous reconnect may not see her private run: the consumer closes it with 4404.
    tab = viewer.context.new_page()
    tab.goto(stack.base_url + "/")
    with tab.expect_navigation():
        tab.click("button:has-text('Log out')")
    assert "Log in" in tab.locator("header").inner_text()
    stack.stop_web()
    stack.start_web()
    viewer.wait_for_state("does not exist, or you cannot see it")
    opened = len(viewer.sockets)
    viewer.page.wait_for_timeout(2500)  # longer than the next backoff: no retry comes
    assert len(viewer.sockets) == opened
    assert "does not exist, or you cannot see it" in viewer.page.inner_text("#trace-state")
    assert viewer.rows() == ["event-1"]


def test_it_reloads_once_when_the_run_ends(stack, browser, alice, alices_run):
    stack.start_web()
    viewer = Viewer(browser, stack, alice, alices_run)
    viewer.wait_for_state("live")
    assert viewer.page.locator("[data-field=status]").inner_text() == "queued"
    record(alices_run, TRACE[0])
    viewer.page.wait_for_selector("#event-1")
    assert viewer.page.locator("[data-field=status]").inner_text() == "running"

    with viewer.page.expect_navigation():
        finish(alices_run, RunStatus.FAILED, "no verified candidate")
    viewer.page.wait_for_selector("#event-2")  # the reloaded page replays the whole trace
    viewer.wait_for_state("run failed")
    assert viewer.page.locator("[data-field=status]").inner_text() == "failed"  # from the DB
    assert "no verified candidate" in viewer.page.inner_text("[data-field=detail]")
    viewer.page.wait_for_timeout(1000)
    assert len(viewer.loads) == 2  # the first load and one reload, not a loop
    assert len(viewer.sockets) == 2  # one for each load
    assert viewer.rows() == ["event-1", "event-2"]


# Counts the trace's rows the moment the trace state first says "run ...": what a viewer (or a
# test) that trusts the state sees.
ROWS_WHEN_THE_STATE_SAYS_ENDED = """
document.addEventListener("DOMContentLoaded", () => {
  const state = document.querySelector("#trace-state");
  new MutationObserver(() => {
    if (window.rowsWhenEnded === undefined && state.textContent.startsWith("run ")) {
      window.rowsWhenEnded = document.querySelectorAll("#trace > li").length;
    }
  }).observe(state, {childList: true, characterData: true, subtree: true});
});
"""


def test_an_ended_runs_trace_state_says_so_only_after_its_last_event(
    stack, browser, alice, alices_run
):
    """The page of an ended run replays the trace: the state said "run succeeded" as soon as the
    socket opened, while most rows were still to come (a landing CI read a half trace)."""
    stack.start_web()
    thoughts = [("thought", {"turn": 1 + n // 10, "text": f"step {n}"}) for n in range(520)]
    record(alices_run, *TRACE, *thoughts)  # more than the consumer's page of 500
    finish(alices_run, RunStatus.SUCCEEDED, "")
    viewer = Viewer(browser, stack, alice, alices_run, ROWS_WHEN_THE_STATE_SAYS_ENDED)
    viewer.wait_for_state("run succeeded")
    every = len(TRACE) + len(thoughts) + 1  # and the `ended` event
    assert viewer.page.evaluate("window.rowsWhenEnded") == every
    assert len(viewer.sockets) == 1  # closed by the server after the last event: no retry
    viewer.page.wait_for_timeout(1500)  # longer than the first backoff
    assert len(viewer.sockets) == 1


def test_it_polls_the_api_where_the_server_refuses_websockets(stack, browser, alice, alices_run):
    stack.start_web("--ws", "none")  # uvicorn answers a handshake as plain HTTP: a 404
    record(alices_run, TRACE[0])
    viewer = Viewer(browser, stack, alice, alices_run)
    viewer.page.wait_for_selector("#event-1")  # after 3 failed sockets: 1 + 2 s
    viewer.wait_for_state("polling")
    assert len(viewer.sockets) == 3
    record(alices_run, TRACE[1])
    viewer.page.wait_for_selector("#event-2")  # the next poll, 2 s later
    assert viewer.rows() == ["event-1", "event-2"]
    assert "Unsupported upgrade request" in (stack.folder / "web.log").read_text()


def test_a_queued_runs_place_follows_the_runs_ahead_of_it_until_it_is_claimed(
    stack, browser, alice, relu_scale
):
    """No event of this run says that a run ahead of it started: the page asks the API."""
    stack.start_web()
    problem = make_problem(alice, relu_scale)
    ahead, mine = make_run(alice, problem), make_run(alice, problem)
    viewer = Viewer(browser, stack, alice, mine)
    page = viewer.page
    queue = "() => document.querySelector('[data-field=queue]').textContent"
    assert page.evaluate(queue) == "position 2 in the cpu run queue"

    def cancel_ahead():
        Run.objects.filter(pk=ahead.pk).update(status=RunStatus.CANCELLED)

    off_the_browser_thread(cancel_ahead)
    page.wait_for_function(f"() => ({queue})() === 'position 1 in the cpu run queue'")
    record(mine, TRACE[0])  # a worker claims it
    page.wait_for_function(f"() => ({queue})() === 'taken by a worker'")
    assert page.locator("[data-field=status]").inner_text() == "running"
    assert viewer.loads == [f"{stack.base_url}/runs/{mine.pk}/"]  # all without a reload


def test_the_elapsed_time_of_a_running_run_counts_on(stack, browser, alice, alices_run):
    stack.start_web()

    def started_a_minute_ago():
        ago = timezone.now() - timedelta(seconds=61)
        Run.objects.filter(pk=alices_run.pk).update(status=RunStatus.RUNNING, started=ago)

    off_the_browser_thread(started_a_minute_ago)
    viewer = Viewer(browser, stack, alice, alices_run)
    elapsed = "() => document.querySelector('[data-field=elapsed]').textContent"
    first = viewer.page.evaluate(elapsed)
    assert seconds_of(first) >= 61, first  # the server's "61 s", or the page's "1 min 01 s"
    deadline = time.monotonic() + 60
    while seconds_of(viewer.page.evaluate(elapsed)) <= seconds_of(first):  # a tick later
        assert time.monotonic() < deadline, "the elapsed time stood still"
        viewer.page.wait_for_timeout(200)


def seconds_of(text: str) -> int:
    """ "61 s" or "1 min 05 s" in seconds."""
    numbers = [int(part) for part in text.split() if part.isdigit()]
    return numbers[0] * 60 + numbers[1] if "min" in text else numbers[0]


GRAPH = {
    "format": "kernelarena.graph/1",
    "device": "cpu",
    "inputs": [{"name": "x", "shape": [256, 1024], "dtype": "float32"}],
    "params": [],
    "nodes": [
        {"name": "relu", "op": "relu", "args": [{"input": "x"}], "attrs": {}}
        | {"shape": [256, 1024], "dtype": "float32"},
        {"name": "mul", "op": "mul", "args": [{"node": "relu"}, {"const": 1.5}], "attrs": {}}
        | {"shape": [256, 1024], "dtype": "float32"},
    ],
    "outputs": [{"node": "mul"}],
    "unsupported": [],
}


def test_a_graph_inspection_reads_as_ops_not_as_json(stack, browser, alice, alices_run):
    """Known-bad: the row said `inspect_graph: {`, the first line of the IR's JSON."""
    stack.start_web()
    inspected = {"turn": 1, "id": "c1", "name": "inspect_graph", "ok": True}
    inspected |= {"text": format_graph(GRAPH), "verdict": GRAPH}
    record(alices_run, TRACE[0], ("tool_result", inspected))
    viewer = Viewer(browser, stack, alice, alices_run)
    row = viewer.page.locator("#event-2 summary .summary")
    row.wait_for()
    assert row.inner_text() == "✓ inspect_graph: 2 ops (relu, mul) on x float32[256, 1024]"
    viewer.page.click("#event-2 summary")
    viewer.page.wait_for_selector("#event-2 .body")
    graph = viewer.page.locator("#event-2 .body pre").first.inner_text()
    assert graph.splitlines() == [
        "input x: float32[256, 1024]",
        "relu = relu(x) → float32[256, 1024]",
        "mul = mul(relu, 1.5) → float32[256, 1024]",
        "outputs: mul",
    ]


def test_a_live_candidate_row_says_why_it_did_not_verify(stack, browser, alice, alices_run):
    """Known-bad: the reason stood in a sixth column of its own, empty for every candidate
    that verified."""
    stack.start_web()
    failed = {"index": 1, "turn": 2, "verified": False, "best": False, "seq": 2}
    failed |= {"verify": {"ok": False, "violations": [{"code": "mismatch", "detail": "trial 0"}]}}
    record(alices_run, TRACE[0], TRACE[4], ("candidate", failed))
    viewer = Viewer(browser, stack, alice, alices_run)
    viewer.page.wait_for_selector("#event-3")
    cells = [
        row.locator("td").all_inner_texts()
        for row in viewer.page.locator("#candidates tbody tr").all()
    ]
    assert cells == [
        ["1", "verified", "2.50×", "1.25×", "40%"],
        ["2", "no mismatch: trial 0", "—", "—", "—"],
    ]


def test_a_tune_call_reads_as_its_variants(stack, browser, alice, alices_run):
    """Known-bad: the row said only `tune`, whatever it tried; the names are text, never markup."""
    stack.start_web()
    variants = [{"name": "threads=256", "files": {"model_new.py": "x"}}, {"files": {}}]
    variants.append({"name": XSS, "files": {}})
    call = {"turn": 2, "id": "c3", "name": "tune", "arguments": {"variants": variants}}
    record(alices_run, TRACE[0], ("tool_call", {**call, "raw_arguments": ""}))
    viewer = Viewer(browser, stack, alice, alices_run)
    row = viewer.page.locator("#event-2 summary .summary")
    row.wait_for()
    assert row.inner_text() == f"tune 3 variants: threads=256, v2, {XSS}"
    assert viewer.page.evaluate("window.pwned") is None
