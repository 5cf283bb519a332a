"""/ws/runs/<id>/: saved events, then live ones, each once and in order; only for those who may
see the run; closed by the server after the run's `ended` event. A token client needs no Origin;
a session must come from the site's own pages. Real ASGI app, real channel layer (Redis), real
database."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from tests.webapp.conftest import make_problem, make_run
from webapp.accounts.tokens import issue_token
from webapp.asgi import application
from webapp.runs.lifecycle import end_event
from webapp.runs.trace import record_event, run_group

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("redis_server")]
ORIGIN = (b"origin", b"http://127.0.0.1")


def session_cookie(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def bearer(user) -> tuple[bytes, bytes]:
    return (b"authorization", f"Bearer {issue_token(user)[1]}".encode())


@pytest.fixture
def layer_in_memory(settings):
    """For the handshakes refused before any event could flow: the refusal never reaches the
    channel layer, but the refused consumer still waits on a channel of it until the test's
    event loop closes, and cancelling channels_redis's blocking receive then hung that close on
    a busy 2-core host (the test waited on pytest-timeout)."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


def record(run, n: int, kind: str = "thought") -> None:
    for i in range(n):
        record_event(run, kind, {"text": f"step {i}"})


# How long a reply may take before the test calls it lost: it only bounds a hung test. The
# communicator's own default (1 s to connect) was crossed on a busy 2-core host, where the
# consumer's database reads wait for a thread.
WAIT_S = 60


async def open_socket(run, headers, after: int | None = None):
    query = "" if after is None else f"?after={after}"
    socket = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/{query}", headers=headers)
    connected, _ = await socket.connect(timeout=WAIT_S)
    assert connected
    return socket


async def seqs(socket, count: int) -> list[int]:
    return [(await socket.receive_json_from(timeout=WAIT_S))["event"]["seq"] for _ in range(count)]


def test_it_sends_saved_then_live_events_in_order(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    record(run, 3)
    headers = [ORIGIN, session_cookie(alice)]

    async def scenario():
        socket = await open_socket(run, headers)
        assert await seqs(socket, 3) == [1, 2, 3]
        await sync_to_async(record)(run, 2)
        assert await seqs(socket, 2) == [4, 5]
        assert await socket.receive_nothing(timeout=0.3)
        await socket.disconnect()

    async_to_sync(scenario)()


def test_it_resumes_after_a_sequence_number(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    record(run, 5)
    headers = [ORIGIN, bearer(alice)]

    async def scenario():
        socket = await open_socket(run, headers, after=3)
        assert await seqs(socket, 2) == [4, 5]
        assert await socket.receive_nothing(timeout=0.3)
        await socket.disconnect()

    async_to_sync(scenario)()


def test_it_drops_repeats_and_fills_a_lost_message_from_the_database(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    record(run, 2)
    headers = [ORIGIN, bearer(alice)]

    async def scenario():
        socket = await open_socket(run, headers)
        assert await seqs(socket, 2) == [1, 2]
        layer = get_channel_layer()
        repeat = {"type": "trace.event", "event": {"seq": 2, "kind": "thought", "payload": {}}}
        await layer.group_send(run_group(run.pk), repeat)
        assert await socket.receive_nothing(timeout=0.3)
        # Events 3 and 4 are saved but only 4's message arrives: 3 comes from the database.
        await sync_to_async(_save_quietly)(run, 2)
        late = {"type": "trace.event", "event": {"seq": 4, "kind": "thought", "payload": {}}}
        await layer.group_send(run_group(run.pk), late)
        assert await seqs(socket, 2) == [3, 4]
        await socket.disconnect()

    async_to_sync(scenario)()


def _save_quietly(run, n: int) -> None:
    """Saves events without sending them, as if the channel layer had lost the messages."""
    from webapp.runs import trace

    original = trace.broadcast
    trace.broadcast = lambda *args: None
    try:
        record(run, n)
    finally:
        trace.broadcast = original


@pytest.mark.parametrize("who", ["charlie", "anonymous"])
@pytest.mark.usefixtures("layer_in_memory")
def test_it_closes_on_a_private_run_of_someone_else(alice, charlie, relu_scale, who):
    run = make_run(alice, make_problem(alice, relu_scale))
    record(run, 1)
    headers = [ORIGIN] + ([session_cookie(charlie)] if who == "charlie" else [])

    async def scenario():
        socket = await open_socket(run, headers)
        closed = await socket.receive_output(timeout=WAIT_S)
        assert closed == {"type": "websocket.close", "code": 4404}
        await socket.disconnect(timeout=WAIT_S)

    async_to_sync(scenario)()


def test_anyone_may_watch_a_run_on_a_public_problem(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale, public=True))
    record(run, 2)

    async def scenario():
        socket = await open_socket(run, [ORIGIN])
        assert await seqs(socket, 2) == [1, 2]
        await socket.disconnect()

    async_to_sync(scenario)()


@pytest.mark.usefixtures("layer_in_memory")
def test_it_refuses_a_bad_after(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    headers = [ORIGIN, bearer(alice)]

    async def scenario():
        socket = await open_socket(run, headers, after="-1")
        assert await socket.receive_output(timeout=WAIT_S) == {
            "type": "websocket.close",
            "code": 4400,
        }
        await socket.disconnect(timeout=WAIT_S)

    async_to_sync(scenario)()


@pytest.mark.usefixtures("layer_in_memory")
def test_it_refuses_a_handshake_from_another_site(alice, relu_scale):
    run = make_run(alice, make_problem(alice, relu_scale))
    headers = [(b"origin", b"https://evil.example"), session_cookie(alice)]

    async def scenario():
        path = f"/ws/runs/{run.pk}/"
        socket = WebsocketCommunicator(application, path, headers=headers)
        connected, _ = await socket.connect(timeout=WAIT_S)
        assert not connected
        await socket.disconnect(timeout=WAIT_S)

    async_to_sync(scenario)()


async def closed_with(socket) -> int:
    """The close code of the server's next frame, which must be a close."""
    frame = await socket.receive_output(timeout=WAIT_S)
    assert frame["type"] == "websocket.close", frame
    return frame["code"]


def test_a_token_client_without_origin_streams_to_the_end_and_is_closed(alice, relu_scale):
    # Known-bad before: 403 at the handshake (the origin check applied to token clients too),
    # and the socket stayed open after `ended`.
    run = make_run(alice, make_problem(alice, relu_scale))
    record(run, 2)
    headers = [bearer(alice)]

    async def scenario():
        socket = await open_socket(run, headers)
        assert await seqs(socket, 2) == [1, 2]
        await sync_to_async(record)(run, 1)
        await sync_to_async(end_event)(run, "succeeded", "done")
        assert await seqs(socket, 2) == [3, 4]
        assert await closed_with(socket) == 1000
        await socket.disconnect(timeout=WAIT_S)

    async_to_sync(scenario)()


@pytest.mark.parametrize("after", [0, 2, 3], ids=["from-the-start", "before-the-end", "past-it"])
@pytest.mark.usefixtures("layer_in_memory")
def test_a_client_of_an_ended_run_gets_the_rest_of_its_trace_then_a_close(alice, relu_scale, after):
    run = make_run(alice, make_problem(alice, relu_scale))
    record(run, 2)
    end_event(run, "failed", "no verified candidate")  # seq 3
    headers = [bearer(alice)]

    async def scenario():
        socket = await open_socket(run, headers, after=after)
        assert await seqs(socket, 3 - after) == list(range(after + 1, 4))
        assert await closed_with(socket) == 1000
        await socket.disconnect(timeout=WAIT_S)

    async_to_sync(scenario)()


@pytest.mark.usefixtures("layer_in_memory")
def test_an_imported_run_without_a_trace_is_closed_at_once(alice, relu_scale):
    """A run from a results file has no `ended` event here and never will: a client waiting for
    the end of its trace is closed at once (known-bad: it waited forever)."""
    run = make_run(alice, make_problem(alice, relu_scale))
    run.imported_from, run.status = "gpu-host/run/46", "succeeded"
    run.save()
    headers = [bearer(alice)]

    async def scenario():
        socket = await open_socket(run, headers)
        assert await closed_with(socket) == 1000
        await socket.disconnect(timeout=WAIT_S)

    async_to_sync(scenario)()


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param(lambda alice: [session_cookie(alice)], id="session-without-origin"),
        pytest.param(
            lambda alice: [(b"authorization", b"Bearer not-a-token")], id="bad-token-no-origin"
        ),
    ],
)
@pytest.mark.usefixtures("layer_in_memory")
def test_a_handshake_without_a_valid_token_needs_the_sites_origin(alice, relu_scale, headers):
    run = make_run(alice, make_problem(alice, relu_scale))
    handshake = headers(alice)

    async def scenario():
        socket = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/", headers=handshake)
        connected, _ = await socket.connect(timeout=WAIT_S)
        assert not connected
        await socket.disconnect(timeout=WAIT_S)

    async_to_sync(scenario)()


def test_the_api_docs_describe_the_websocket_and_its_token_auth(client):
    described = client.get("/api/openapi.json").json()["info"]["description"]
    assert "/ws/runs/{run_id}/?after=SEQ" in described
    assert "no `Origin` header is needed" in described
    assert "closes the socket with 1000" in described
