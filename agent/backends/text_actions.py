"""Tool use in plain text, for models served without a tool-call parser.

The model writes each action as a block (the XML-like form Qwen3-Coder was trained on, so kernel
source needs no JSON escaping):

    <function=write_file>
    <parameter=path>kernels/relu.cpp</parameter>
    <parameter=content>
    ...the whole file...
    </parameter>
    </function>

Several blocks in one reply run in order; text outside the blocks is the model's thinking. One
newline right after `<parameter=...>` and one right before `</parameter>` are not part of the
value. Integer parameters are written as digits, arrays as JSON.

The history stays canonical (assistant tool_calls and tool messages, as with native tool calls),
so trajectories look the same whichever backend made them; to_text_messages renders it as the
plain user/assistant conversation that this model actually saw.
"""

from __future__ import annotations

import json
import re
import uuid

from agent.backends import Backend, Reply, TextSink, ToolCall

_FUNCTION = re.compile(r"<function=([\w-]+)>(.*?)</function>", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([\w-]+)>\n?(.*?)\n?</parameter>", re.DOTALL)
_WRAPPER = re.compile(r"</?tool_call>")  # Qwen wraps blocks in these; they carry nothing


class TextActionBackend:
    """Wraps a chat backend: sends no tools, describes them in text, parses actions back."""

    def __init__(self, inner: Backend):
        self.inner = inner

    def complete(
        self,
        messages: list[dict],
        tools: list[dict],
        deadline: float | None = None,
        on_text: TextSink | None = None,
    ) -> Reply:
        reply = self.inner.complete(to_text_messages(messages, tools), [], deadline, on_text)
        reply.tool_calls, reply.format_error = parse_actions(reply.content, tools)
        reply.thought = _WRAPPER.sub("", _FUNCTION.sub("", reply.content)).strip()
        return reply


def parse_actions(text: str, tools: list[dict]) -> tuple[list[ToolCall], str | None]:
    """The actions in a reply, or no actions and what is wrong with the reply."""
    blocks = _FUNCTION.findall(text)
    if not blocks:
        if "<function=" in text:
            return [], "an action block is not closed: end it with </function>"
        return [], "no action found: write one <function=NAME> block (see the system prompt)"
    types = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in tools}
    calls = []
    for name, body in blocks:
        arguments, error = _arguments(body, types.get(name, {}))
        raw = json.dumps(arguments) if arguments is not None else body
        calls.append(ToolCall(f"call_{uuid.uuid4().hex[:12]}", name, raw, arguments, error))
    return calls, None


def _arguments(body: str, properties: dict) -> tuple[dict | None, str | None]:
    arguments: dict = {}
    for key, value in _PARAMETER.findall(body):
        kind = properties.get(key, {}).get("type")
        if kind == "integer":
            if not value.strip().lstrip("-").isdigit():
                return None, f"parameter {key} must be an integer, got {value.strip()[:40]!r}"
            value = int(value.strip())
        elif kind == "array":  # written as JSON, as Qwen3-Coder writes non-string parameters
            try:
                value = json.loads(value)
            except json.JSONDecodeError as error:
                return None, f"parameter {key} must be a JSON array: {error}"
            if not isinstance(value, list):
                return None, f"parameter {key} must be a JSON array, got {type(value).__name__}"
        arguments[key] = value
    leftover = _PARAMETER.sub("", body).strip()
    if "<parameter=" in leftover:
        return None, "a <parameter=...> is not closed: end it with </parameter>"
    return arguments, None


def to_text_messages(messages: list[dict], tools: list[dict]) -> list[dict]:
    """The canonical history as plain system/user/assistant turns, tools described in text."""
    names = {}
    rendered: list[dict] = []
    for message in messages:
        role = message["role"]
        if role == "system":
            rendered.append({"role": "system", "content": message["content"] + describe(tools)})
        elif role == "assistant":
            for call in message.get("tool_calls", []):
                names[call["id"]] = call["function"]["name"]
            rendered.append({"role": "assistant", "content": message.get("content") or ""})
        elif role == "tool":
            name = names.get(message.get("tool_call_id"), message.get("name", "tool"))
            observation = f"<result of {name}>\n{message['content']}\n</result>"
            if rendered and rendered[-1]["role"] == "user" and rendered[-1].get("_results"):
                rendered[-1]["content"] += "\n" + observation
            else:
                rendered.append({"role": "user", "content": observation, "_results": True})
        else:
            rendered.append({"role": role, "content": message["content"]})
    return [{k: v for k, v in m.items() if k != "_results"} for m in rendered]


def describe(tools: list[dict]) -> str:
    """The action format and every tool, appended to the system prompt."""
    lines = [
        "",
        "",
        "# Actions",
        "Act by writing one or more blocks like this; they run in order:",
        "<function=TOOL_NAME>",
        "<parameter=NAME>",
        "value",
        "</parameter>",
        "</function>",
        "Write the whole value between the tags as it is: no quoting, no escaping.",
        "",
        "Tools:",
    ]
    for tool in tools:
        function = tool["function"]
        parameters = function["parameters"]
        params = [
            f"{key} ({spec['type']}{'' if key in parameters['required'] else ', optional'})"
            for key, spec in parameters["properties"].items()
        ]
        lines.append(f"- {function['name']}({', '.join(params)}): {function['description']}")
    return "\n".join(lines)
