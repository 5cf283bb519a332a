"""What SFT and GRPO set up alike: the base model and its tokenizer (bf16 where the GPU has it)
and the trainer arguments every run of ours shares (its own folder, a log line per step, no
intermediate checkpoints, no tracker, the seed)."""

from __future__ import annotations

from pathlib import Path


def load_policy(base: str):
    """(model, tokenizer, bf16) from a model folder or hub id."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(
        base, dtype=torch.bfloat16 if bf16 else torch.float32
    )
    return model, tokenizer, bf16


def shared_arguments(output: str, seed: int, bf16: bool) -> dict:
    return {
        "output_dir": str(Path(output) / "trainer"),
        "bf16": bf16,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "seed": seed,
    }
