"""The agent loop: run() repeats step() = execute(query()) until something ends the run.

The history is a plain list of OpenAI-format messages. Exceptions steer the loop: a FormatError is
fed back to the model (a run ends after max_format_errors in a row); Terminated (Finished,
LimitsExceeded, ...) ends the run. However a run ends, its result is the fastest verified
candidate it recorded, and the workspace as last compiled gets profiled first if it never was.
Every step emits TraceEvents {seq, at, kind, payload} through the caller's callback; a candidate's
payload carries its sources and a running or final status the run's usage so far, so the callback
needs nothing else from the agent.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from agent.backends import (
    Backend,
    BackendError,
    ContextLengthExceeded,
    DeadlineReached,
    Reply,
    ToolCall,
)
from agent.candidates import Candidate, Candidates
from agent.config import AgentConfig, describe_training
from agent.live_thought import LiveThought
from agent.prompts import initial_messages
from agent.tools import TOOL_NAMES, TOOLS, ToolCallError, ToolResult, check_arguments, run_tool
from agent.workspace import Workspace
from gpu_workers.harness.vocabulary import sources_digest

EVENT_KINDS = ("thought", "tool_call", "tool_result", "candidate", "status", "error")
MAX_EVENT_LOG_CHARS = 20_000


class FormatError(Exception):
    """A reply the loop cannot act on. feedback (if any) goes back to the model as a user turn."""

    def __init__(self, feedback: str | None):
        super().__init__(feedback or "every tool call in the reply was malformed")
        self.feedback = feedback


class Terminated(Exception):
    """Ends the run; status says how."""

    status = "terminated"


class Finished(Terminated):
    status = "finished"


class LimitsExceeded(Terminated):
    status = "limits_exceeded"

    def __init__(self, limit: str, detail: str):
        super().__init__(detail)
        self.limit = limit  # turns | tokens | seconds | dollars


class TooManyFormatErrors(Terminated):
    status = "format_errors"


class ModelUnavailable(Terminated):
    status = "backend_error"


class ContextFull(Terminated):
    status = "context_length"


class Crashed(Terminated):
    status = "crashed"


class Cancelled(Terminated):
    """Whoever started the run asked it to stop (should_stop said why)."""

    status = "cancelled"


@dataclass
class RunUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    estimated: bool = False  # some replies had no usage from the server

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class RunResult:
    # finished | limits_exceeded | format_errors | backend_error | context_length | crashed
    # | cancelled
    status: str
    detail: str
    best: Candidate | None
    candidates: list[Candidate]
    messages: list[dict]
    usage: RunUsage
    turns: int
    seconds: float
    limit: str | None = None  # which budget ended a limits_exceeded run
    started_at: str = ""


EventSink = Callable[[dict], None]
# Asked before every step; a reason (e.g. "cancelled by its owner") ends the run.
StopCheck = Callable[[], "str | None"]


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        backend: Backend,
        workspace: Workspace,
        on_event: EventSink | None = None,
        should_stop: StopCheck | None = None,
    ):
        self.config = config
        self.backend = backend
        self.workspace = workspace
        self.on_event = on_event
        self.should_stop = should_stop
        self.messages: list[dict] = []
        self.candidates = Candidates()
        self.usage = RunUsage()
        self.turns = 0
        self.format_errors = 0  # malformed replies in a row
        self.compiled: set[str] = set()  # digests of sources that compiled
        self.seq = 0
        self.started, self.started_at = time.monotonic(), _now()

    def run(self) -> RunResult:
        self.started, self.started_at = time.monotonic(), _now()
        problem = self.workspace.read_file("model.py")
        budget = self.config.budget
        self.messages = initial_messages(
            self.config.prompt_version, problem, self.workspace.skill(), budget.max_turns
        )
        started = {"state": "started", "agent": self.config.identity()}
        if self.config.training:
            started["trained"] = describe_training(self.config.training)
        self.emit("status", started)
        while True:
            try:
                self.step()
            except FormatError as error:
                self.feed_back(error)
            except Terminated as stop:
                return self.end(stop)
            except ContextLengthExceeded as error:
                return self.end(ContextFull(str(error)))
            except DeadlineReached as error:
                return self.end(LimitsExceeded("seconds", f"{self.seconds_used()}: {error}"))
            except BackendError as error:
                return self.end(ModelUnavailable(str(error)))
            except Exception:  # a harness or backend bug must not lose the candidates found so far
                return self.end(Crashed(traceback.format_exc()))
            self.emit_progress()

    def step(self) -> None:
        self.check_limits()
        self.execute(self.query())

    def check_limits(self) -> None:
        if self.should_stop is not None and (reason := self.should_stop()):
            raise Cancelled(reason)
        budget, usage = self.config.budget, self.usage
        if self.format_errors >= budget.max_format_errors:
            raise TooManyFormatErrors(f"{self.format_errors} malformed replies in a row")
        if self.turns >= budget.max_turns:
            raise LimitsExceeded("turns", f"used all {budget.max_turns} turns")
        if budget.max_tokens and usage.total_tokens >= budget.max_tokens:
            raise LimitsExceeded(
                "tokens", f"used {usage.total_tokens} of {budget.max_tokens} tokens"
            )
        if budget.max_seconds and self.elapsed() >= budget.max_seconds:
            raise LimitsExceeded("seconds", self.seconds_used())
        if budget.max_dollars and usage.cost_usd >= budget.max_dollars:
            raise LimitsExceeded("dollars", f"spent ${usage.cost_usd:.4f} of ${budget.max_dollars}")

    def seconds_used(self) -> str:
        return f"ran {self.elapsed():.0f} of {self.config.budget.max_seconds:.0f} s"

    def deadline(self) -> float | None:
        """When the run's time is up (time.monotonic()); each request is bounded by it."""
        max_seconds = self.config.budget.max_seconds
        return self.started + max_seconds if max_seconds else None

    def query(self) -> Reply:
        live = LiveThought(lambda payload: self.emit("thought", payload), turn=self.turns + 1)
        reply = self.backend.complete(self.messages, TOOLS, self.deadline(), live)
        self.turns += 1
        self.add_usage(reply)
        self.messages.append(reply.message())
        thought = reply.content if reply.thought is None else reply.thought
        if thought or reply.reasoning:
            self.emit(
                "thought", {"turn": self.turns, "text": thought, "reasoning": reply.reasoning}
            )
        return reply

    def execute(self, reply: Reply) -> None:
        if reply.format_error or not reply.tool_calls:
            raise FormatError(_no_action_feedback(reply))
        well_formed = [self.call_tool(call, reply) for call in reply.tool_calls]
        if not any(well_formed):
            raise FormatError(None)  # each tool message already says what was wrong
        self.format_errors = 0

    def call_tool(self, call: ToolCall, reply: Reply) -> bool:
        """Runs one call and answers it in the history; False when the call was malformed."""
        self.emit(
            "tool_call",
            {
                "turn": self.turns,
                "id": call.id,
                "name": call.name,
                "arguments": call.arguments,
                "raw_arguments": call.raw_arguments,
            },
        )
        try:
            if call.error:
                raise ToolCallError(f"{call.error}{_cut_off_note(reply)}")
            check_arguments(call.name, call.arguments or {})
            if call.name == "finish":
                self.answer(call, self.submit())
                raise Finished(str((call.arguments or {}).get("summary", "")))
            result = run_tool(
                self.workspace, call.name, call.arguments or {}, progress=self.emit_progress
            )
        except ToolCallError as error:
            self.answer(call, ToolResult(f"Error: {error}. Nothing was run.", ok=False))
            return False
        self.record(call.name, result)
        self.answer(call, result)
        return True

    def answer(self, call: ToolCall, result: ToolResult) -> None:
        self.messages.append(
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result.text}
        )
        self.emit(
            "tool_result",
            {
                "turn": self.turns,
                "id": call.id,
                "name": call.name,
                "ok": result.ok,
                "text": result.text,
                "verdict": _loggable(result.verdict),
            },
        )

    def record(self, name: str, result: ToolResult) -> None:
        """Keeps what a compile, verify, profile or tune says about the sources it judged."""
        if name == "tune":
            for sources, verify, profile in result.judged:
                self._judged(sources, verify=verify, profile=profile)
        if name not in ("compile", "verify", "profile") or result.verdict is None:
            self._say_best(name, result)
            return
        sources = self.workspace.sources()
        if result.ok and name in ("compile", "verify"):
            self.compiled.add(sources_digest(sources))
        if name != "compile":
            self._judged(sources, **{name: result.verdict})
        self._say_best(name, result)

    def _judged(self, sources: dict, verify: dict | None = None, profile: dict | None = None):
        if (verify or {}).get("ok"):
            self.compiled.add(sources_digest(sources))
        candidate = self.candidates.record(self.turns, sources, verify=verify, profile=profile)
        best = self.candidates.best()
        # The sources ride along so that whoever records the event needs nothing else from us.
        payload = {**candidate.summary(), "best": best is candidate, "sources": candidate.sources}
        self.emit("candidate", payload)

    def _say_best(self, name: str, result: ToolResult) -> None:
        best = self.candidates.best()
        if name in ("profile", "tune") and best is not None:
            result.text += f"\n{_describe_best(best)}"

    def submit(self) -> ToolResult:
        """finish: the workspace as it stands is profiled (once), then the best is reported."""
        profiled = self.profile_current(only_if_compiled=False)
        best = self.candidates.best()
        lines = [profiled.text] if profiled else []
        lines.append(
            _describe_best(best) if best else "No verified candidate: the run has no result."
        )
        return ToolResult("\n".join(lines), ok=best is not None)

    def profile_current(self, only_if_compiled: bool) -> ToolResult | None:
        """Profiles the workspace as it stands, unless these sources were profiled already."""
        sources = self.workspace.sources()
        digest = sources_digest(sources)
        candidate = self.candidates.find(digest)
        if candidate is not None and candidate.profile is not None:
            return None
        if only_if_compiled and digest not in self.compiled:
            return None
        if not any(path.startswith("kernels/") for path in sources):
            return None  # the untouched template: nothing to measure
        result = run_tool(self.workspace, "profile", {})
        self.record("profile", result)
        return result

    def feed_back(self, error: FormatError) -> None:
        self.format_errors += 1
        if error.feedback:
            self.messages.append({"role": "user", "content": error.feedback})
        self.emit(
            "error",
            {
                "turn": self.turns,
                "kind": "format",
                "message": str(error),
                "in_a_row": self.format_errors,
            },
        )

    def end(self, stop: Terminated) -> RunResult:
        if not isinstance(stop, (Finished, Crashed, Cancelled)):
            self.profile_last_compiled()
        best = self.candidates.best()
        if isinstance(stop, (Crashed, ModelUnavailable, ContextFull)):
            self.emit("error", {"turn": self.turns, "kind": stop.status, "message": str(stop)})
        self.emit(
            "status",
            {
                "state": stop.status,
                "detail": str(stop),
                "best": best.summary() if best else None,
                **self.progress(),
            },
        )
        return RunResult(
            status=stop.status,
            detail=str(stop),
            best=best,
            candidates=list(self.candidates.all),
            messages=self.messages,
            usage=self.usage,
            turns=self.turns,
            seconds=self.elapsed(),
            limit=getattr(stop, "limit", None),
            started_at=self.started_at,
        )

    def profile_last_compiled(self) -> None:
        """A run cut short keeps its last work: sources that compiled but were never profiled."""
        try:
            self.profile_current(only_if_compiled=True)
        except Exception:  # the run is ending anyway; what it recorded so far stands
            message = traceback.format_exc()
            self.emit("error", {"turn": self.turns, "kind": "final_profile", "message": message})

    def add_usage(self, reply: Reply) -> None:
        usage = reply.usage
        self.usage.prompt_tokens += usage.prompt_tokens
        self.usage.completion_tokens += usage.completion_tokens
        self.usage.cost_usd += self.config.prices.cost(usage.prompt_tokens, usage.completion_tokens)
        self.usage.estimated |= usage.estimated

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def progress(self) -> dict:
        budget = self.config.budget
        return {
            "turn": self.turns,
            "max_turns": budget.max_turns,
            "tokens": self.usage.total_tokens,
            "cost_usd": round(self.usage.cost_usd, 6),
            "seconds": round(self.elapsed(), 1),
            # Unrounded, for whoever stores the run's spend.
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "cost_usd": self.usage.cost_usd,
            },
        }

    def emit_progress(self, detail: str = "") -> None:
        """The run's status; `detail` says what a long tool call is doing meanwhile."""
        best = self.candidates.best()
        best_brief = None
        if best is not None:
            best_brief = {
                "index": best.index,
                "speedup_vs_eager": best.speedup_vs_eager,
                "speedup_vs_compile": best.speedup_vs_compile,
            }
        status = {"state": "running", "best": best_brief, **self.progress()}
        self.emit("status", {**status, "detail": detail} if detail else status)

    def emit(self, kind: str, payload: dict) -> None:
        assert kind in EVENT_KINDS, kind
        event = {"seq": self.seq, "at": _now(), "kind": kind, "payload": payload}
        self.seq += 1
        if self.on_event is not None:
            self.on_event(event)


def _no_action_feedback(reply: Reply) -> str:
    problem = reply.format_error or "your reply had no tool call"
    return (
        f"Error: {problem}.{_cut_off_note(reply)} Act with one of the tools "
        f"({', '.join(TOOL_NAMES)}); call finish when you are done."
    )


def _cut_off_note(reply: Reply) -> str:
    if reply.finish_reason != "length":
        return ""
    return " Your reply was cut off at the token limit: write less per reply (one file at a time)."


def _describe_best(best: Candidate) -> str:
    eager, compiled = best.speedup_vs_eager, best.speedup_vs_compile
    if eager is None:
        return f"Best so far: candidate {best.index + 1} (verified, not yet profiled)."
    versus_compile = "n/a" if compiled is None else f"{compiled:.2f}x"
    return (
        f"Best so far: candidate {best.index + 1}, {eager:.2f}x vs eager, "
        f"{versus_compile} vs torch.compile."
    )


def _loggable(verdict: dict | None) -> dict | None:
    """A verdict for the trace: a compile log can be megabytes; its start is what matters."""
    if verdict is None or len(verdict.get("log") or "") <= MAX_EVENT_LOG_CHARS:
        return verdict
    return {**verdict, "log": verdict["log"][:MAX_EVENT_LOG_CHARS] + "\n[log cut]"}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
