"""What the agent tests share: the real harness Session on the cpu target, a way to run the real
loop with a scripted model over it, and a real chat-completions server on localhost.

The server answers from a queue of planned responses and speaks the protocol as vLLM and OpenAI
do: JSON replies, or server-sent events when the request says stream (content and tool-call
argument deltas in pieces, then a usage chunk, then [DONE]). Only the model is scripted; the HTTP,
the SDK, the backends, the loop and the harness are the real ones.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent.backends.scripted import ScriptedBackend
from agent.config import AgentConfig, Budget, Prices
from agent.loop import Agent, RunResult

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


def fixture_files(directory: Path) -> dict[str, str]:
    """A candidate directory's files by workspace path (model_new.py, kernels/...)."""
    if not directory.is_dir():
        pytest.skip(f"{directory.relative_to(REPO)} is not there yet")
    return {
        p.relative_to(directory).as_posix(): p.read_text()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def good_relu_scale() -> dict[str, str]:
    return fixture_files(FIXTURES / "candidates" / "cpu" / "good_relu_scale")


@pytest.fixture
def session(tmp_path):
    """A fresh workspace for the relu_scale problem on the cpu target (the harness's Session)."""
    session_module = pytest.importorskip("gpu_workers.harness.session")
    problem = (FIXTURES / "problems" / "relu_scale.py").read_text()
    with session_module.Session(problem, device="cpu", root=tmp_path / "session") as opened:
        yield opened


@dataclass
class Run:
    result: RunResult
    events: list[dict]

    def of_kind(self, kind: str) -> list[dict]:
        return [e["payload"] for e in self.events if e["kind"] == kind]

    def tool_texts(self) -> list[str]:
        return [m["content"] for m in self.result.messages if m["role"] == "tool"]


@pytest.fixture
def run_script(session):
    """Runs the real loop over the session with a scripted model; budget keys override."""

    def run(actions: list[dict], backend=None, prices: Prices | None = None, **budget) -> Run:
        config = AgentConfig(
            name="scripted-test",
            backend="scripted",
            script="-",
            budget=Budget(**{"max_turns": 20, **budget}),
            prices=prices or Prices(),
        )
        events: list[dict] = []
        agent = Agent(config, backend or ScriptedBackend(actions), session, on_event=events.append)
        return Run(agent.run(), events)

    return run


@dataclass
class Planned:
    content: str = ""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, raw arguments)
    usage: tuple[int, int] | None = (120, 30)  # (prompt, completion); None sends no usage
    finish_reason: str | None = None
    reasoning: str = ""
    status: int = 200
    error: dict | None = None  # the error object of a non-200 reply, or of a mid-stream error
    headers: dict = field(default_factory=dict)
    delay_s: float = 0.0  # before answering: longer than the client's timeout means a timeout
    body: dict | None = None  # a non-200 reply's whole JSON body, instead of {"error": error}
    # Stream faults, after the first content chunk: a `data:` line that is not JSON; the
    # connection closed mid-body; a pause (longer than the client's timeout means a stall).
    malformed_line: bool = False
    drop: bool = False
    stall_s: float = 0.0
    chunk_delay_s: float = 0.0  # between chunks: a model generating slowly


class ChatServer:
    def __init__(self) -> None:
        self.planned: deque[Planned] = deque()
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        # GET /models answers {"object": "list", "data": models}; None: 404, as a server without
        # it; models_status other than 200: that status with an error, as for a refused key
        self.models: list[dict] | None = None
        self.models_status = 200
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def plan_reply(self, content: str = "", *tool_calls: tuple[str, str], **options) -> None:
        """A model reply; tool_calls are (name, raw JSON arguments)."""
        self.planned.append(Planned(content=content, tool_calls=list(tool_calls), **options))

    def plan_failure(self, status: int, message: str, code: str | None = None, **options) -> None:
        error = {"message": message, "type": "error", "code": code}
        self.planned.append(Planned(status=status, error=error, **options))


def _handler(chat: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Streams go chunked, as uvicorn (vLLM, transformers serve) sends them, so a connection
        # closed mid-body is a broken stream to the client, not a short one.
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if not self.path.rstrip("/").endswith("/models") or chat.models is None:
                error = {"message": f"no route {self.path}", "type": "not_found"}
                return self._json(404, {"error": error})
            if chat.models_status != 200:
                error = {"message": "Invalid API key", "type": "invalid_request_error"}
                return self._json(chat.models_status, {"error": error})
            self._json(200, {"object": "list", "data": chat.models})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            chat.requests.append(body)
            chat.headers.append({k.lower(): v for k, v in self.headers.items()})
            if not chat.planned:
                chat.plan_failure(500, "the test planned no more responses")
            planned = chat.planned.popleft()
            time.sleep(planned.delay_s)
            try:
                self._answer(body, planned)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and left, as the test intended

        def _answer(self, body: dict, planned: Planned) -> None:
            if planned.status != 200:
                payload = planned.body or {"error": planned.error}
                return self._json(planned.status, payload, planned.headers)
            if body.get("stream"):
                return self._stream(body, planned)
            return self._json(200, _completion(body, planned))

        def _json(self, status: int, payload: dict, headers: dict | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, body: dict, planned: Planned) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            for i, chunk in enumerate(_chunks(body, planned)):
                self._send(f"data: {json.dumps(chunk)}\n\n")
                time.sleep(planned.chunk_delay_s)
                if i == 1 and self._fault(planned):
                    return
            self._send("data: [DONE]\n\n")
            self._send("")  # the last chunk of the body

        def _send(self, text: str) -> None:
            data = text.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _fault(self, planned: Planned) -> bool:
            """Breaks the stream as planned; True when nothing more is to be sent."""
            time.sleep(planned.stall_s)
            if planned.malformed_line:
                self._send('data: {"choices": [{"delta": {"content": "unterminated\n\n')
            if planned.drop:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)  # mid-body: no closing chunk
                return True
            return False

        def log_message(self, *args) -> None:
            pass

    return Handler


def _completion(body: dict, planned: Planned) -> dict:
    message: dict = {"role": "assistant", "content": planned.content or None}
    if planned.reasoning:
        message["reasoning_content"] = planned.reasoning
    if planned.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(planned.tool_calls)
        ]
    finish = planned.finish_reason or ("tool_calls" if planned.tool_calls else "stop")
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if planned.usage:
        completion["usage"] = _usage(planned.usage)
    return completion


def _chunks(body: dict, planned: Planned) -> list[dict]:
    """The deltas a server streams: role, content in pieces, each tool call's arguments in
    pieces (id and name only in the first), the finish reason, then usage with no choices."""

    def chunk(delta: dict, finish: str | None = None) -> dict:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body["model"],
            "choices": [choice],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    if planned.reasoning:
        chunks.append(chunk({"reasoning_content": planned.reasoning}))
    half = len(planned.content) // 2
    for piece in (planned.content[:half], planned.content[half:]):
        if piece:
            chunks.append(chunk({"content": piece}))
    for i, (name, arguments) in enumerate(planned.tool_calls):
        first = {
            "index": i,
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [first]}))
        third = max(1, len(arguments) // 3)
        for start in range(0, len(arguments), third):
            part = {"index": i, "function": {"arguments": arguments[start : start + third]}}
            chunks.append(chunk({"tool_calls": [part]}))
    if planned.error:
        chunks.append({"error": planned.error})  # a server failing mid-reply
        return chunks
    chunks.append(
        chunk({}, planned.finish_reason or ("tool_calls" if planned.tool_calls else "stop"))
    )
    include_usage = (body.get("stream_options") or {}).get("include_usage")
    if planned.usage and include_usage:
        chunks.append(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body["model"],
                "choices": [],
                "usage": _usage(planned.usage),
            }
        )
    return chunks


def _usage(usage: tuple[int, int]) -> dict:
    prompt, completion = usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


@pytest.fixture
def chat_server():
    server = ChatServer()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture(scope="session")
def served_model(tmp_path_factory):
    """`transformers serve` with a tiny random-weight model built here (served_model.py); stopped,
    with nothing left running, when the session ends."""
    from tests.agent import served_model as serving

    missing = serving.serving_missing()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("served-model")
    model_dir = serving.build_tiny_model(root / "tiny-qwen2")
    served = serving.serve(model_dir, root / "serve.log")
    yield served
    served.stop()
