"""python -m agent check: against `transformers serve` with a tiny random model, against a port
where nothing listens, and against the scripted chat server (conftest.py) for what a random model
never does (a tool call, a parsable action block, a refusal, a vLLM-style context length)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openai")

from agent.cli import main  # noqa: E402
from agent.config import AgentConfig  # noqa: E402
from agent.preflight import check_agent  # noqa: E402
from tests.agent.served_model import free_port  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def agents_file(tmp_path: Path, **agents: dict) -> Path:
    """An agents TOML with one table per keyword: name=dict of top-level keys and sampling."""
    lines = []
    for name, table in agents.items():
        sampling = table.pop("sampling", {})
        lines.append(f"[agents.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in table.items()]
        lines.append(f"[agents.{name}.sampling]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in sampling.items()]
    path = tmp_path / "agents.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def check(path: Path, agent: str, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agent", "check", "--agent", agent, "--agents-file", str(path)]
        + list(options),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def lines_of(output: str) -> dict[str, str]:
    """The report's lines by check name: 'tool call' -> 'WARN none returned ...'."""
    return {line[:12].strip(): line[13:] for line in output.splitlines()}


def test_the_tiny_served_model_is_reachable_and_both_round_trips_are_reported(served_model):
    config = AgentConfig(
        name="tiny",
        backend="openai",
        model=served_model.model,
        base_url=served_model.base_url,
        sampling={"max_tokens": 16},
    )
    report = check_agent(config, timeout_s=60)
    assert report.reachable and report.models == [served_model.model]
    assert report.model_served is True
    assert report.context_length is None  # transformers serve does not tell it
    # A random model calls no tool and writes no action block: findings, not a crash.
    assert report.tool_call["tool_calls"] == [] and report.tool_call["content"]
    assert report.tool_call["finish_reason"] == "length"
    assert report.text_action["tool_calls"] == [] and report.text_action["format_error"]
    levels = {f.check: f.level for f in report.findings}
    assert levels == {
        "endpoint": "ok",
        "models": "info",
        "model": "ok",
        "context": "info",
        "tool call": "warn",
        "text action": "warn",
    }
    assert not report.failed


def test_check_prints_the_report_and_exits_0_with_warnings(served_model, tmp_path):
    path = agents_file(
        tmp_path,
        tiny={
            "backend": "text",
            "model": served_model.model,
            "base_url": served_model.base_url,
            "stream": False,
            "sampling": {"max_tokens": 16},
        },
    )
    done = check(path, "tiny")
    assert done.returncode == 0, done.stdout + done.stderr
    report = lines_of(done.stdout)
    assert report["endpoint"].startswith(f"OK   {served_model.base_url} answers")
    assert report["model"] == f"OK   {served_model.model!r} is served"
    assert report["context"] == "INFO not reported by the server"
    assert report["tool call"].startswith("WARN none returned (the reply was text: ")
    assert report["text action"].startswith("WARN no parsable <function=...> block (no action")
    assert report["result"] == "OK with 2 warning(s)"
    assert check(path, "tiny", "--strict").returncode == 1


def test_a_model_it_does_not_serve_fails_and_lists_what_it_serves(served_model, tmp_path):
    path = agents_file(
        tmp_path,
        wrong={"backend": "openai", "model": "kernel-model", "base_url": served_model.base_url},
    )
    done = check(path, "wrong", "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["failed"] and report["reachable"] and report["model_served"] is False
    assert report["models"] == [served_model.model]
    model = next(f for f in report["findings"] if f["check"] == "model")
    assert model["level"] == "fail"
    assert f"it serves: {served_model.model}" in model["message"]
    assert report["tool_call"] is None and report["text_action"] is None  # skipped


def test_nothing_listening_names_the_endpoint_and_exits_1(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    path = agents_file(tmp_path, nowhere={"backend": "openai", "model": "m", "base_url": url})
    done = check(path, "nowhere")
    assert done.returncode == 1
    report = lines_of(done.stdout)
    assert report["endpoint"] == f"FAIL cannot reach {url}: connection refused (is the server " + (
        "running, on this host and port?)"
    )
    assert report["result"] == "FAILED: 1 failure(s), 0 warning(s)"
    assert "tool call" not in report


def test_an_agent_without_an_endpoint_is_unusable_input(tmp_path, capsys):
    (tmp_path / "script.json").write_text("[]")
    path = tmp_path / "agents.toml"
    path.write_text('[agents.replay]\nbackend = "scripted"\nscript = "script.json"\n')
    code = main(["check", "--agent", "replay", "--agents-file", str(path)])
    assert code == 2 and "has no endpoint" in capsys.readouterr().err


def config_for(chat_server, backend: str = "openai", **changes) -> AgentConfig:
    options = {"name": "planned", "backend": backend, "model": "kernel-model"}
    return AgentConfig(base_url=chat_server.url, **{**options, **changes})


def test_a_tool_call_and_a_parsable_block_pass_and_max_model_len_is_the_context(chat_server):
    chat_server.models = [{"id": "kernel-model", "object": "model", "max_model_len": 32768}]
    chat_server.plan_reply("", ("list_files", "{}"))
    chat_server.plan_reply("Listing.\n<function=list_files>\n</function>")
    report = check_agent(config_for(chat_server, sampling={"max_tokens": 8192}), max_tokens=256)
    assert report.context_length == 32768
    assert [f.level for f in report.findings] == ["ok", "info", "ok", "info", "ok", "ok"]
    assert report.findings[4].message.startswith("returned list_files({})")
    assert report.findings[5].message.startswith("parsable <function=list_files>")
    # The agent's own sampling, its output capped; the text round trip sends no tools.
    tools_request, text_request = chat_server.requests
    assert tools_request["max_tokens"] == 256 and tools_request["stream"] is True
    assert [t["function"]["name"] for t in tools_request["tools"]] == ["list_files"]
    assert "tools" not in text_request and "<function=" in text_request["messages"][0]["content"]


def test_a_refused_tool_request_fails_an_openai_agent_and_warns_a_text_agent(chat_server):
    chat_server.models = [{"id": "kernel-model", "object": "model"}]
    refusal = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser'
    for backend, level in (("openai", "fail"), ("text", "warn")):
        chat_server.plan_failure(400, refusal)
        chat_server.plan_reply("<function=list_files>\n</function>")
        report = check_agent(config_for(chat_server, backend))
        tool_call = next(f for f in report.findings if f.check == "tool call")
        assert tool_call.level == level and "--enable-auto-tool-choice" in tool_call.message
        assert report.failed is (level == "fail")


def test_a_server_without_a_model_list_warns_and_still_round_trips(chat_server):
    chat_server.plan_reply("no tools here")
    chat_server.plan_reply("nor here")
    report = check_agent(config_for(chat_server))
    assert report.reachable and report.models is None and report.model_served is None
    models = next(f for f in report.findings if f.check == "models")
    assert models.level == "warn" and "HTTP 404" in models.message
    assert report.tool_call["content"] == "no tools here" and not report.failed


def test_a_refused_key_fails_naming_the_endpoint(chat_server):
    chat_server.models, chat_server.models_status = [], 401
    report = check_agent(config_for(chat_server))
    assert report.failed and not report.reachable and chat_server.requests == []
    (endpoint,) = report.findings
    assert endpoint.level == "fail"
    assert endpoint.message == f"{chat_server.url} refused the key (HTTP 401): Invalid API key"


def test_a_reply_the_server_fails_on_mid_stream_warns_and_a_refusal_still_fails(chat_server):
    """`transformers serve` takes the request, then fails writing a tool call its parser cannot
    read (an error event in the stream): that is one reply of the model's, not a refused request.
    Known-bad beside it: the same failure as a 400 before any reply still fails the check."""
    chat_server.models = [{"id": "kernel-model", "object": "model"}]
    broken = {"message": "json parser could not parse region as JSON", "type": "error"}
    chat_server.plan_reply("<tool_call>\n{", error=broken)
    chat_server.plan_reply("<function=list_files>\n</function>")
    report = check_agent(config_for(chat_server, max_retries=0))
    tool_call = next(f for f in report.findings if f.check == "tool call")
    assert tool_call.level == "warn" and not report.failed
    assert "failed while writing the reply" in tool_call.message
    assert "could not parse region as JSON" in tool_call.message
    assert report.tool_call["broke_off"] is True

    chat_server.plan_failure(400, "json parser could not parse region as JSON")
    chat_server.plan_reply("<function=list_files>\n</function>")
    report = check_agent(config_for(chat_server, max_retries=0))
    tool_call = next(f for f in report.findings if f.check == "tool call")
    assert tool_call.level == "fail" and report.failed
    assert tool_call.message.startswith("the request was refused: ")
