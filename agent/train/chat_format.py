"""A trajectory as the token ids a served model is shown, with the assistant's tokens marked.

A server renders a chat request with the model's chat template, after its own conversion of the
OpenAI messages: vLLM and `transformers serve` both parse each tool call's `arguments` from its
JSON string into a mapping (templates iterate it), and `transformers serve` drops an assistant
turn's text when the turn holds tool calls. Training renders what the server that will serve the
checkpoint renders (`served_by`), so the model learns the text it will be prompted with. A
trajectory of the text protocol is rendered first as the text backend sends it (tools described
in the system prompt, results as user turns).

The loss mask comes from rendering prefixes: the text that rendering through an assistant turn
adds to rendering up to it (with the generation prompt) is that turn's, what the model writes;
the whole conversation is tokenized once and a token is the assistant's where its text is.
"""

from __future__ import annotations

import copy
import json

from agent.backends.text_actions import to_text_messages

SERVERS = ("vllm", "transformers")


def served_messages(record: dict, served_by: str = "vllm") -> tuple[list[dict], list[dict] | None]:
    """The record's conversation as the server hands it to the chat template: (messages, tools)."""
    if served_by not in SERVERS:
        raise ValueError(f"served_by must be one of {', '.join(SERVERS)}, not {served_by!r}")
    if record.get("protocol") == "text":
        rendered = to_text_messages(record["messages"], record["tools"])
        return [{k: v for k, v in m.items() if not k.startswith("_")} for m in rendered], None
    messages = []
    for message in record["messages"]:
        message = copy.deepcopy(message)
        message.pop("reasoning_content", None)
        for call in message.get("tool_calls") or []:
            arguments = call["function"].get("arguments")
            if isinstance(arguments, str):
                call["function"]["arguments"] = _arguments(arguments)
        if served_by == "transformers" and message.get("tool_calls"):
            message["content"] = ""
        messages.append(message)
    return messages, record["tools"]


def _arguments(raw: str) -> dict | str:
    """A call's arguments as the template iterates them; text that is no JSON object (a
    backend kept what a model wrote) stays text, which templates write as a string."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, dict) else raw


def tokenized(tokenizer, messages: list[dict], tools: list[dict] | None) -> dict:
    """{input_ids, assistant_masks}: the whole conversation's ids, 1 on the assistant's tokens
    (a token is the assistant's where its characters are; needs a fast tokenizer's offsets)."""
    spans, text = [], ""
    for end, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = _text(tokenizer, messages[:end], tools, generation_prompt=True)
        through = _text(tokenizer, messages[: end + 1], tools, generation_prompt=False)
        if not through.startswith(prompt) or not prompt.startswith(text):
            raise ValueError(
                "the chat template does not render a conversation as a prefix of its "
                "continuation; its assistant turns cannot be told apart for the loss"
            )
        spans.append((len(prompt), len(through)))
        text = through
    whole = _text(tokenizer, messages, tools, generation_prompt=False)
    encoded = tokenizer(whole, add_special_tokens=False, return_offsets_mapping=True)
    mask = [
        int(any(start <= first and last <= end for start, end in spans))
        for first, last in encoded["offset_mapping"]
    ]
    return {"input_ids": encoded["input_ids"], "assistant_masks": mask}


def _text(tokenizer, messages, tools, generation_prompt: bool) -> str:
    if not messages:
        return ""
    return tokenizer.apply_chat_template(
        messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt
    )
