"""python -m agent check --agent NAME: is an agent's endpoint ready for a run?

The check asks the endpoint the agent would use, with the agent's own key, model, sampling and
transport (streaming or not), and reports one finding per line:

    endpoint      the URL, and whether anything answers there
    models        the models it lists (GET /models)
    model         whether the configured model is among them; if not, what is served
    context       the context length, where the server tells it (vLLM: max_model_len)
    tool call     one native tool-call round trip: one tiny request offering one tool
    text action   one text-action round trip: the same request in the `text` backend's format

A finding is ok, info, warn or fail. fail is what makes every run end at once: nothing answers,
the key is refused, the model is not served, or the round trip of the agent's own protocol
(`tool call` for backend openai, `text action` for backend text) is refused by the server.
warn is what makes runs poor but possible: a reply without a tool call or without a parsable
action block (the model answered in prose, the server's tool-call parser does not match the
model, or the reply was cut off), a reply the server failed on while writing it (it took the
request), a server that lists no models, or the other protocol refused.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import openai

from agent.backends import Backend, BackendError, Reply, ReplyBrokeOff
from agent.backends.openai import server_message
from agent.config import AgentConfig
from agent.tools import TOOLS

LEVELS = ("ok", "info", "warn", "fail")
# Where servers put a model's context length in /models entries: vLLM (max_model_len), OpenRouter
# and others (context_length), LM Studio (max_context_length), llama.cpp (meta.n_ctx_train).
_CONTEXT_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length")
_SYSTEM = "You check that a tool-using agent can reach you. Answer by calling the list_files tool."
_USER = "Call list_files now, with no arguments."
_QUOTE = 120  # characters of a reply quoted in a finding


@dataclass
class Finding:
    check: str  # endpoint | models | model | context | tool call | text action
    level: str  # ok | info | warn | fail
    message: str


@dataclass
class CheckReport:
    agent: str
    backend: str
    endpoint: str
    model: str
    reachable: bool = False
    key_refused: bool = False  # the endpoint answered 401/403: another key may well work
    models: list[str] | None = None  # None: the endpoint listed none
    model_served: bool | None = None  # None: unknown (no list)
    context_length: int | None = None
    # The round trips: tool_calls, content, format_error, finish_reason, seconds; or error.
    tool_call: dict | None = None
    text_action: dict | None = None
    findings: list[Finding] = field(default_factory=list)

    def add(self, check: str, level: str, message: str) -> None:
        assert level in LEVELS, level
        self.findings.append(Finding(check, level, message))

    def count(self, level: str) -> int:
        return sum(finding.level == level for finding in self.findings)

    @property
    def failed(self) -> bool:
        return self.count("fail") > 0

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "failed": self.failed}


def check_agent(config: AgentConfig, timeout_s: float = 60.0, max_tokens: int = 512) -> CheckReport:
    """Asks the agent's endpoint everything a run needs; never raises for what the server says.

    timeout_s bounds each request (connecting: 5 s at most); max_tokens caps each round trip's
    reply, whatever the agent's sampling says.
    """
    report = CheckReport(config.name, config.backend, config.base_url, config.model)
    client = openai.OpenAI(
        base_url=config.base_url,
        api_key=config.api_key(),
        timeout=openai.Timeout(timeout_s, connect=min(5.0, timeout_s)),
        max_retries=0,
    )
    entries = _list_models(report, client, timeout_s)
    if not report.reachable:
        return report
    _check_model(report, entries)
    if report.model_served is False:
        report.add("tool call", "info", "skipped: the model is not served")
        report.add("text action", "info", "skipped: the model is not served")
        return report
    quick = dataclasses.replace(
        config,
        request_timeout_s=timeout_s,
        max_retries=0,
        sampling=_capped(config.sampling, max_tokens),
    )
    _tool_call_round_trip(report, quick)
    _text_action_round_trip(report, quick)
    return report


def _list_models(report: CheckReport, client: openai.OpenAI, timeout_s: float) -> list[dict]:
    started = time.monotonic()
    try:
        entries = [entry.model_dump() for entry in client.models.list()]
    except openai.APITimeoutError:
        report.add("endpoint", "fail", f"{report.endpoint} did not answer within {timeout_s:g} s")
        return []
    except openai.APIConnectionError as error:
        cause = error.__cause__ or error
        report.add("endpoint", "fail", f"cannot reach {report.endpoint}: {_describe(cause)}")
        return []
    except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
        report.key_refused = True
        report.add(
            "endpoint",
            "fail",
            f"{report.endpoint} refused the key (HTTP {error.status_code}): "
            f"{server_message(error)}",
        )
        return []
    except openai.APIStatusError as error:
        report.reachable = True
        report.add("endpoint", "ok", f"{report.endpoint} answers")
        report.add(
            "models",
            "warn",
            f"GET {report.endpoint}/models answered HTTP {error.status_code}: the endpoint "
            "lists no models, so whether the model is served is not known",
        )
        return []
    report.reachable = True
    seconds = time.monotonic() - started
    report.add("endpoint", "ok", f"{report.endpoint} answers ({seconds:.2f} s to list models)")
    report.models = [str(entry.get("id")) for entry in entries]
    report.add("models", "info", _names(report.models) or "(an empty list)")
    return entries


def _check_model(report: CheckReport, entries: list[dict]) -> None:
    if report.models is None:
        report.add("context", "info", "not reported (no model list)")
        return
    entry = next((e for e in entries if e.get("id") == report.model), None)
    report.model_served = entry is not None
    if entry is None:
        served = _names(report.models) or "nothing"
        report.add(
            "model",
            "fail",
            f"{report.model!r} is not served at {report.endpoint}; it serves: {served} "
            "(set the agent's model to one of these)",
        )
        return
    report.add("model", "ok", f"{report.model!r} is served")
    report.context_length = _context_length(entry)
    if report.context_length is None:
        report.add("context", "info", "not reported by the server")
    else:
        report.add("context", "info", f"{report.context_length} tokens")


def _context_length(entry: dict) -> int | None:
    for key in _CONTEXT_KEYS:
        if isinstance(entry.get(key), int):
            return entry[key]
    meta = entry.get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("n_ctx_train"), int):
        return meta["n_ctx_train"]
    return None


def _tool_call_round_trip(report: CheckReport, config: AgentConfig) -> None:
    from agent.backends.openai import OpenAIBackend

    reply, report.tool_call = _ask(OpenAIBackend(config))
    if reply is None:
        return _refused(report, "tool call", config.backend == "openai")
    if not reply.tool_calls:
        report.add(
            "tool call",
            "warn",
            f"none returned (the reply was text: {_quote(reply.content)}; "
            f"{_took(report.tool_call)}){_hint(reply)}",
        )
        return
    shown = ", ".join(f"{c.name}({c.raw_arguments[:60]})" for c in reply.tool_calls)
    _calls_found(report, "tool call", reply, f"returned {shown}")


def _text_action_round_trip(report: CheckReport, config: AgentConfig) -> None:
    from agent.backends.openai import OpenAIBackend
    from agent.backends.text_actions import TextActionBackend

    reply, report.text_action = _ask(TextActionBackend(OpenAIBackend(config)))
    if reply is None:
        return _refused(report, "text action", config.backend == "text")
    if reply.format_error or not reply.tool_calls:
        report.add(
            "text action",
            "warn",
            f"no parsable <function=...> block ({reply.format_error}); the reply was "
            f"{_quote(reply.content)} ({_took(report.text_action)}){_hint(reply)}",
        )
        return
    blocks = ", ".join(f"<function={c.name}>" for c in reply.tool_calls)
    _calls_found(report, "text action", reply, f"parsable {blocks}")


def _ask(backend: Backend) -> tuple[Reply | None, dict]:
    """One request offering list_files: the reply (None when refused) and what to record."""
    tools = [t for t in TOOLS if t["function"]["name"] == "list_files"]
    messages = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _USER}]
    started = time.monotonic()
    try:
        reply = backend.complete(messages, tools)
    except BackendError as error:
        took = round(time.monotonic() - started, 2)
        return None, {
            "error": str(error),
            "broke_off": isinstance(error, ReplyBrokeOff),
            "seconds": took,
        }
    calls = [
        {"name": c.name, "arguments": c.raw_arguments, "error": c.error} for c in reply.tool_calls
    ]
    return reply, {
        "tool_calls": calls,
        "content": reply.content,
        "format_error": reply.format_error,
        "finish_reason": reply.finish_reason,
        "seconds": round(time.monotonic() - started, 2),
    }


def _refused(report: CheckReport, check: str, own_protocol: bool) -> None:
    """A refused request fails the check for the protocol the agent uses, else warns. A reply
    that broke off only warns: the server took the request, and what it failed on was this one
    reply (often the model's own output), which a run retries."""
    record = report.tool_call if check == "tool call" else report.text_action
    if record["broke_off"]:
        message = (
            f"the server took the request but failed while writing the reply: {record['error']} "
            "(a model writing a call the server's parser cannot read does this)"
        )
        return report.add(check, "warn", message)
    report.add(
        check, "fail" if own_protocol else "warn", f"the request was refused: {record['error']}"
    )


def _calls_found(report: CheckReport, check: str, reply: Reply, found: str) -> None:
    record = report.tool_call if check == "tool call" else report.text_action
    broken = [c.error for c in reply.tool_calls if c.error]
    if broken or reply.tool_calls[0].name != "list_files":
        problem = broken[0] if broken else "not the tool asked for (list_files)"
        report.add(check, "warn", f"{found}, but {problem} ({_took(record)})")
        return
    report.add(check, "ok", f"{found} ({_took(record)})")


def _took(record: dict) -> str:
    return f"{record['seconds']:.1f} s, finish_reason {record['finish_reason']}"


def _capped(sampling: dict, max_tokens: int) -> dict:
    """The agent's sampling, its output limit lowered to max_tokens (the key it already uses)."""
    capped = dict(sampling)
    key = "max_completion_tokens" if "max_completion_tokens" in capped else "max_tokens"
    capped[key] = min(int(capped.get(key) or max_tokens), max_tokens)
    return capped


def _names(models: list[str], most: int = 20) -> str:
    more = f" and {len(models) - most} more (--json lists all)" if len(models) > most else ""
    return ", ".join(models[:most]) + more


def _hint(reply) -> str:
    if reply.finish_reason == "length":
        return "; the reply hit its token limit"
    return ""


def _quote(text: str) -> str:
    return repr(text if len(text) <= _QUOTE else text[:_QUOTE] + "...")


def _describe(cause: BaseException) -> str:
    text = str(cause) or type(cause).__name__
    if "refused" in text.lower():
        return "connection refused (is the server running, on this host and port?)"
    return text


def format_report(report: CheckReport) -> str:
    """The report as lines for a terminal: one per finding, then the verdict."""
    lines = [f"agent        {report.agent} (backend {report.backend}, model {report.model})"]
    for finding in report.findings:
        lines.append(f"{finding.check:12} {finding.level.upper():4} {finding.message}")
    warnings = report.count("warn")
    if report.failed:
        verdict = f"FAILED: {report.count('fail')} failure(s), {warnings} warning(s)"
    else:
        verdict = f"OK with {warnings} warning(s)" if warnings else "OK"
    lines.append(f"{'result':12} {verdict}")
    return "\n".join(lines)
