"""A real OpenAI-compatible server for the agent tests: `transformers serve` with a tiny model.

Nothing is downloaded. The model is a Qwen2 causal LM built from a config (hidden size 64, two
layers) with random weights; the tokenizer is a byte-level BPE trained here, in-process, on this
repository's skill files, wrapped in a PreTrainedTokenizerFast with a ChatML chat template that
renders the system prompt, the tools (Hermes style: a <tools> list, calls as <tool_call> JSON) and
the conversation. Both are saved with save_pretrained and served by `transformers serve PATH`,
which pins the server to that model: its /v1/models lists the path as the model's id, and a
request must name that id (or none).

The model writes garbage, as any random model does, but the HTTP, the chat template, the server's
tool-call parser (its Qwen2 response template), the SDK, the backends and the loop are all real.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
]
# ChatML, as Qwen2.5 writes it: tools listed in the system turn, tool calls as <tool_call> JSON,
# tool results as user turns in <tool_response>.
CHAT_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools

You may call one or more functions. The function signatures are in <tools></tools>:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>

For each call, write <tool_call>{"name": <function-name>, "arguments": <args-json-object>}\
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% elif message.role != 'system' %}<|im_start|>{{ message.role }}
{{ message.content or '' }}
{%- for call in message.tool_calls or [] %}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def serving_missing() -> str | None:
    """Why `transformers serve` cannot run here, or None when it can."""
    try:
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
        from transformers.utils.import_utils import is_serve_available
    except ImportError as error:
        return f"transformers is not importable ({error}); pip install -e '.[serve]'"
    if not is_serve_available():
        return "transformers serve needs its extra: pip install 'transformers[serving]'"
    return None


def build_tiny_model(directory: Path, vocab_size: int = 1024, babbling: bool = True) -> Path:
    """A random-weight Qwen2 causal LM and a locally trained tokenizer, saved in directory.
    babbling=False: the generation config a real model ships (greedy, nothing suppressed), for a
    base that training will teach to call tools."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = sorted(REPO.glob("skills/*/SKILL.md")) + [REPO / "agent" / "prompts.py"]
    bpe.train_from_iterator((path.read_text() for path in corpus), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    # Sampled, not greedy (which repeats one token): replies of visible garbage that never holds
    # a special token, so never a <tool_call> nor an end before max_tokens. A request without
    # max_tokens gets transformers serve's default of 1024 new tokens: the tests always set it.
    if babbling:
        generation = model.generation_config
        generation.do_sample, generation.temperature, generation.top_k = True, 1.0, 0
        generation.suppress_tokens = tokenizer.convert_tokens_to_ids(SPECIAL_TOKENS)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(directory)
    model.save_pretrained(directory)
    return directory


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class ServedModel:
    process: subprocess.Popen
    port: int
    model: str  # the id a request names: the path the server was started with
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        """SIGTERM to the server's own process group (uvicorn shuts down), SIGKILL if it hangs."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)


def _detach() -> None:
    """In the server's child before exec: its own process group (stop() signals the group), and
    SIGTERM when the test process dies without a teardown (Linux), so no server outlives it."""
    os.setsid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: stop() still ends it at teardown


def serve(model_dir: Path, log: Path, timeout_s: float = 900) -> ServedModel:
    """`transformers serve MODEL_DIR` on a free port of 127.0.0.1, once /v1/models answers. A
    server that exits is reported at once; timeout_s only guards a hang, never a speed: a busy
    host's start (imports on two shared cores) takes what it takes."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "transformers.cli.transformers",
        "serve",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
    ]
    # Offline: nothing is fetched from the hub, and no check for a newer transformers.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1"}
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env, preexec_fn=_detach
        )
    served = ServedModel(process, port, str(model_dir), log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            exited = f"transformers serve exited {process.returncode}"
            raise RuntimeError(f"{exited}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{served.base_url}/models", timeout=2) as response:
                if response.status == 200:
                    return served
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.25)
    served.stop()
    silent = f"transformers serve did not answer in {timeout_s:.0f} s"
    raise RuntimeError(f"{silent}:\n{log.read_text()}")
