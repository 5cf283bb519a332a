"""The plain-text action format: parsing replies and rendering the history a text model sees."""

from __future__ import annotations

import json

from agent.backends.scripted import ScriptedBackend
from agent.backends.text_actions import TextActionBackend, parse_actions, to_text_messages
from agent.tools import TOOLS

KERNEL = """#include <cstdint>
extern "C" void f(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0;  // "quotes" and \\backslashes
}
"""


def test_it_parses_a_write_with_code_verbatim():
    text = (
        "I will write the kernel.\n"
        "<function=write_file>\n<parameter=path>kernels/relu.cpp</parameter>\n"
        f"<parameter=content>\n{KERNEL}\n</parameter>\n</function>"
    )
    calls, error = parse_actions(text, TOOLS)
    assert error is None
    assert calls[0].name == "write_file"
    assert calls[0].arguments == {"path": "kernels/relu.cpp", "content": KERNEL}


def test_several_blocks_run_in_order_and_integers_are_converted():
    text = (
        "<tool_call>\n<function=read_file>\n<parameter=path>model.py</parameter>\n"
        "<parameter=start_line>\n20\n</parameter>\n</function>\n</tool_call>\n"
        "<function=compile>\n</function>"
    )
    calls, error = parse_actions(text, TOOLS)
    assert error is None
    assert [(c.name, c.arguments) for c in calls] == [
        ("read_file", {"path": "model.py", "start_line": 20}),
        ("compile", {}),
    ]


def test_a_reply_without_an_action_is_a_format_error():
    calls, error = parse_actions("The kernel looks right to me.", TOOLS)
    assert calls == [] and "no action found" in error


def test_an_unclosed_block_is_a_format_error():
    calls, error = parse_actions("<function=compile>\n", TOOLS)
    assert calls == [] and "not closed" in error


def test_a_bad_integer_makes_that_call_malformed():
    text = "<function=read_file><parameter=path>model.py</parameter>"
    text += "<parameter=start_line>ten</parameter></function>"
    calls, _ = parse_actions(text, TOOLS)
    assert calls[0].arguments is None and "integer" in calls[0].error


def test_the_history_is_rendered_as_plain_turns_with_the_tools_described():
    history = [
        {"role": "system", "content": "You optimise kernels."},
        {"role": "user", "content": "Go."},
        {
            "role": "assistant",
            "content": "<function=list_files>\n</function>",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "list_files", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "a", "name": "list_files", "content": "model.py"},
    ]
    rendered = to_text_messages(history, TOOLS)
    assert [m["role"] for m in rendered] == ["system", "user", "assistant", "user"]
    assert "<function=TOOL_NAME>" in rendered[0]["content"]
    assert "- write_file(path (string), content (string))" in rendered[0]["content"]
    assert rendered[3]["content"] == "<result of list_files>\nmodel.py\n</result>"
    assert all(set(m) == {"role", "content"} for m in rendered)


def test_the_backend_sends_no_tools_and_returns_parsed_calls():
    inner = ScriptedBackend([{"text": "Let me look.\n<function=list_files>\n</function>"}])
    reply = TextActionBackend(inner).complete([{"role": "system", "content": "s"}], TOOLS)
    assert [c.name for c in reply.tool_calls] == ["list_files"]
    assert reply.thought == "Let me look."
    assert reply.format_error is None


def test_an_array_is_written_as_json_and_anything_else_is_malformed():
    variants = [{"name": "threads=256", "files": {"model_new.py": "x = 1\n"}}]
    block = "<function=tune>\n<parameter=variants>\n{}\n</parameter>\n</function>"
    (call,), error = parse_actions(block.format(json.dumps(variants)), TOOLS)
    assert error is None and call.error is None and call.arguments == {"variants": variants}
    for bad in ("threads=256", '{"name": "a"}'):
        (call,), _ = parse_actions(block.format(bad), TOOLS)
        assert call.arguments is None and "must be a JSON array" in call.error
