"""The policy being trained, as a backend of the agent loop: the conversation rendered as the
serving stack renders it (chat_format), sampled from the model in this process, and the tool
calls read from the reply as a Hermes-style server parser reads them (<tool_call> JSON blocks).
What the model wrote is kept token for token, so a rollout trains on exactly what was sampled."""

from __future__ import annotations

import itertools
import json
import re

from agent.backends import Reply, ToolCall, Usage, parse_arguments
from agent.train import chat_format

_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class PolicyBackend:
    def __init__(self, model, tokenizer, served_by="vllm", max_new_tokens=1024, temperature=1.0):
        self.model, self.tokenizer = model, tokenizer
        self.served_by = served_by
        self.max_new_tokens, self.temperature = max_new_tokens, temperature
        self._serial = itertools.count(1)  # one backend serves a batch's concurrent episodes

    def complete(self, messages, tools, deadline=None, on_text=None) -> Reply:
        import torch

        record = {"messages": messages, "tools": tools, "protocol": "tools"}
        rendered, schemas = chat_format.served_messages(record, self.served_by)
        text = self.tokenizer.apply_chat_template(
            rendered, tools=schemas, tokenize=False, add_generation_prompt=True
        )
        prompt = self.tokenizer(text, add_special_tokens=False, return_tensors="pt")
        prompt = prompt.to(self.model.device)
        with torch.no_grad():
            out = self.model.generate(
                **prompt,
                max_new_tokens=self.max_new_tokens,
                do_sample=True,
                temperature=self.temperature,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        new = out[0, prompt["input_ids"].shape[1] :].tolist()
        ends = {self.tokenizer.eos_token_id, self.tokenizer.pad_token_id}
        written = new[: next((i for i, t in enumerate(new) if t in ends), len(new))]
        # special tokens kept: a tool call's tags may be special tokens of the vocabulary
        reply = self.tokenizer.decode(written, skip_special_tokens=False)
        usage = Usage(prompt["input_ids"].shape[1], len(new))
        return _reply(reply, next(self._serial), usage)


def _reply(text: str, serial: int, usage: Usage) -> Reply:
    """The reply as a Hermes-style server parser hands it back: every <tool_call> block a JSON
    object with a name, else no call at all and the whole text as content (vLLM's hermes parser
    does this when one block fails), which the loop answers as a reply without a tool call."""
    calls = []
    for i, block in enumerate(_CALL.findall(text)):
        try:
            parsed = json.loads(block)
        except json.JSONDecodeError:
            return Reply(content=text.strip(), tool_calls=[], usage=usage)
        if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
            return Reply(content=text.strip(), tool_calls=[], usage=usage)
        raw = json.dumps(parsed.get("arguments", {}))
        arguments, error = parse_arguments(raw)
        calls.append(ToolCall(f"policy_{serial}_{i}", parsed["name"], raw, arguments, error))
    content = _CALL.sub("", text).strip()
    return Reply(content=content, tool_calls=calls, usage=usage)
