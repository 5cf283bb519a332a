"""Tool calls that reached us as plain text: the server's tool-call parser failed on them.

A server with native tool calling (vLLM with --tool-call-parser, transformers serve) parses the
model's tool-call markup out of the text. When that parse fails (bad JSON inside the markup, an
unclosed tag, a format the configured parser does not know), the server does not say so: it
returns the markup as ordinary content. Telling the model "your reply had no tool call" then
misleads it; recognising the markup lets the loop say what was wrong with the call instead.
"""

from __future__ import annotations

import json
import re

# The markups of the common tool-call formats, as they appear in a model's raw text.
_TAGGED_JSON = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)  # Hermes, Qwen
_MARKERS = {
    "<function=": "Qwen3-Coder's <function=NAME> block",
    "[TOOL_CALLS]": "Mistral's [TOOL_CALLS] marker",
    "<|python_tag|>": "Llama 3's <|python_tag|> call",
    "<|tool_call_begin|>": "a <|tool_call_begin|> block",
    "<｜tool▁calls▁begin｜>": "DeepSeek's tool-call block",
}
_BARE_CALL = re.compile(r'^\s*\{\s*"(?:name|function)"\s*:', re.DOTALL)  # Llama 3.x JSON calls


def unparsed_tool_call(content: str) -> str | None:
    """Why the tool call written in this text was not taken as one, or None when the text holds
    no tool-call markup."""
    tagged = _TAGGED_JSON.search(content)
    if tagged:
        if "</tool_call>" not in content[tagged.start() :]:
            return "a <tool_call> block is not closed: end it with </tool_call>"
        return _json_problem(tagged.group(1), "the JSON inside <tool_call>")
    for marker, name in _MARKERS.items():
        if marker in content:
            return (
                f"the reply holds {name}, but the server did not parse it as a tool call "
                "(malformed, or not the format its tool-call parser expects)"
            )
    if _BARE_CALL.match(content):
        return _json_problem(content.strip(), "the JSON tool call in the reply")
    return None


def _json_problem(text: str, what: str) -> str:
    try:
        call = json.loads(text)
    except json.JSONDecodeError as error:
        return f"{what} is not valid JSON ({error.msg} at line {error.lineno} column {error.colno})"
    if not isinstance(call, dict) or "name" not in call:
        return f'{what} must be an object with "name" and "arguments"'
    arguments = call.get("arguments", call.get("parameters"))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as error:
            return f"{what} has arguments that are not valid JSON ({error.msg})"
    if not isinstance(arguments, dict):
        return f'{what} must give "arguments" as a JSON object'
    return (
        f"{what} is well formed, but the server returned it as text: its tool-call parser did "
        "not take it (a different format, or no parser configured)"
    )
