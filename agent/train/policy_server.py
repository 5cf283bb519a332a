"""The policy being trained, served over HTTP as an OpenAI-compatible chat endpoint, so that a
batch's rollouts can run where the harness is: each of the site's GPU workers runs whole
episodes through its own loop and sandboxed harness (gpu_workers/rollout.py) and asks this
endpoint for every reply, as a run asks vLLM. It answers from the weights of the moment, so a
GRPO step's rollouts all sample the policy as that step left it.

    GET  /v1/models              the one model, "policy"
    POST /v1/chat/completions    {"messages", "tools"}: one reply, not streamed (the workers'
                                 agent config says stream = false); tool calls as a Hermes-style
                                 server parser hands them back (policy_backend)

Requests are answered concurrently (a thread each), as the trainer's own threads share one
backend. Anything else gets a JSON error that says what to send.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "policy"
MAX_BODY_BYTES = 64 * 1024 * 1024  # a long episode's conversation, with margin


class PolicyServer:
    """`backend` answers each request (anything with `complete(messages, tools)`, such as
    PolicyBackend); set it again to serve newer weights."""

    def __init__(self, backend, host: str = "127.0.0.1", port: int = 0):
        self.backend = backend
        self.http = ThreadingHTTPServer((host, port), _handler(self))
        self.http.daemon_threads = True
        self._thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL a worker's openai backend is given: this host's name where the server
        listens on every interface."""
        host, port = self.http.server_address[:2]
        if host in ("0.0.0.0", "::"):
            host = socket.getfqdn()
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> PolicyServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.http.shutdown()
        self.http.server_close()


def completion(reply, serial: int) -> dict:
    """A chat completion object, as the OpenAI API writes one, for a backend's Reply."""
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.raw_arguments},
        }
        for call in reply.tool_calls
    ]
    message = {"role": "assistant", "content": reply.content or None}
    if calls:
        message["tool_calls"] = calls
    usage = reply.usage
    return {
        "id": f"chatcmpl-policy-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        },
    }


def _handler(server: PolicyServer):
    serials = itertools.count(1)  # next() on a count is atomic under the GIL

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/") != "/v1/models":
                return self._error(404, f"no {self.path}: GET /v1/models")
            self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._error(404, f"no {self.path}: POST /v1/chat/completions")
            request, problem = self._request()
            if problem:
                return self._error(400, problem)
            try:
                reply = server.backend.complete(request["messages"], request.get("tools"))
            except Exception as error:  # the worker's backend retries a 5xx, and says why
                return self._error(500, f"the policy failed to answer: {error!r}")
            self._json(200, completion(reply, next(serials)))

        def _request(self) -> tuple[dict, str]:
            size = int(self.headers.get("Content-Length") or 0)
            if size > MAX_BODY_BYTES:
                return {}, f"the body is {size} bytes; at most {MAX_BODY_BYTES}"
            try:
                request = json.loads(self.rfile.read(size) or b"{}")
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                return {}, f"the body is not JSON: {error}"
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                return {}, 'send {"messages": [...], "tools": [...]} as JSON'
            if request.get("stream"):
                return {}, "this endpoint does not stream: send stream = false"
            return request, ""

        def _error(self, status: int, message: str) -> None:
            self._json(status, {"error": {"message": message, "type": "invalid_request_error"}})

        def _json(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:  # the trainer's output is its own
            pass

    return Handler
