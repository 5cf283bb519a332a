"""Tool calls that a server's parser left in the text are recognised, with what was wrong."""

from __future__ import annotations

import pytest

from agent.backends.tool_markup import unparsed_tool_call


@pytest.mark.parametrize(
    "content,expected",
    [
        ('<tool_call>\n{"name": "compile", "arguments": {"a": }}\n</tool_call>', "not valid JSON"),
        ('<tool_call>\n{"name": "compile", "arguments": {}}', "not closed"),
        ('<tool_call>["compile"]</tool_call>', 'must be an object with "name"'),
        ('<tool_call>{"name": "compile", "arguments": "{bad"}</tool_call>', "arguments that are"),
        ('<tool_call>{"name": "compile", "arguments": {}}</tool_call>', "well formed, but"),
        ("Let me compile.\n<function=compile>\n</function>", "Qwen3-Coder"),
        ('[TOOL_CALLS][{"name": "compile"}]', "Mistral"),
        ('<|python_tag|>{"name": "compile"}', "Llama 3"),
        ('{"name": "compile", "parameters": {"x": 1,}}', "not valid JSON"),
    ],
)
def test_tool_call_markup_left_in_the_text_is_named(content, expected):
    assert expected in unparsed_tool_call(content)


@pytest.mark.parametrize(
    "content",
    [
        "",
        "I will fuse the two ops into one kernel.",
        'The config is {"block": 256} for now.',  # JSON in prose is no call
        "Use <tool> tags? No: the compile tool is next.",
    ],
)
def test_prose_is_no_tool_call(content):
    assert unparsed_tool_call(content) is None
