"""What SFT and GRPO set up alike: the base model and its tokenizer (bf16 where the GPU has it)
and the trainer arguments every run of ours shares (its own folder, a log line per step, no
intermediate checkpoints, no tracker, the seed)."""

from __future__ import annotations

from pathlib import Path

PRECISIONS = ("auto", "bf16", "fp32")


def use_bf16(precision: str) -> bool:
    """Whether the weights are bf16. auto: where the GPU has it; fp32 keeps full weights and
    updates (a small model learning from few examples, whose small steps bf16 rounds away)."""
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    supported = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if precision == "bf16" and not supported:
        raise ValueError("precision bf16 needs a GPU that has it: use auto or fp32")
    return supported and precision != "fp32"


def load_policy(base: str, precision: str = "auto"):
    """(model, tokenizer, bf16) from a model folder or hub id."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    bf16 = use_bf16(precision)
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
