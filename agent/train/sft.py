"""Rejection fine-tuning: a causal LM trained on the trajectories `selection` keeps, with TRL's
SFTTrainer, full or LoRA (PEFT), bf16 where the device has it, the loss on the assistant's
tokens alone. The result is a Hugging Face checkpoint (a LoRA's adapter merged in, so any server
loads it as it is) with a model card naming the base, the data and the steps."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agent.config import TRAINING_RECORD
from agent.train import chat_format
from agent.train.selection import Selection
from agent.train.trainer_setup import load_policy, shared_arguments
from agent.trajectory import read_trajectories


@dataclass
class SftPlan:
    base: str  # a model folder or hub id (no download happens where HF_HUB_OFFLINE is set)
    data: list[str]  # trajectory files (JSON Lines) or a suite's export folder
    output: str
    served_by: str = "vllm"
    epochs: float = 3.0
    learning_rate: float = 2e-5
    lr_scheduler: str = "linear"  # transformers' lr_scheduler_type
    warmup_steps: int = 0
    batch_size: int = 1
    gradient_accumulation: int = 1
    max_length: int | None = 16384
    lora_rank: int = 0  # 0: full fine-tuning
    min_reward: int = 3
    drop_invalid_calls: bool = True
    seed: int = 0
    precision: str = "auto"  # trainer_setup.PRECISIONS
    extra: dict = field(default_factory=dict)


def load_records(paths: list[str]) -> list[dict]:
    """Trajectory records from files, or from every trajectories*.jsonl under a folder."""
    records = []
    for name in paths:
        path = Path(name)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such trajectory file or folder")
        files = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
        if not files:
            raise FileNotFoundError(f"{path}: holds no .jsonl trajectory file")
        for file in files:
            records += read_trajectories(file)
    return records


def dataset_of(records: list[dict], tokenizer, served_by: str):
    from datasets import Dataset

    rows = [
        chat_format.tokenized(tokenizer, *chat_format.served_messages(r, served_by))
        for r in records
    ]
    return Dataset.from_list(rows)


def train(plan: SftPlan, selection: Selection) -> dict:
    """Trains on selection.kept and saves the checkpoint in plan.output; what was done."""
    import torch
    from trl import SFTConfig, SFTTrainer

    if not selection.kept:
        raise ValueError(f"nothing to train on: {selection.describe()}")
    torch.manual_seed(plan.seed)
    model, tokenizer, bf16 = load_policy(plan.base, plan.precision)
    dataset = dataset_of(selection.kept, tokenizer, plan.served_by)
    config = SFTConfig(
        **shared_arguments(plan.output, plan.seed, bf16),
        num_train_epochs=plan.epochs,
        learning_rate=plan.learning_rate,
        lr_scheduler_type=plan.lr_scheduler,
        warmup_steps=plan.warmup_steps,
        per_device_train_batch_size=plan.batch_size,
        gradient_accumulation_steps=plan.gradient_accumulation,
        max_length=plan.max_length,
        **plan.extra,
    )
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=_lora(plan.lora_rank),
    )
    started = time.monotonic()
    result = trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    trained = trainer.model
    if plan.lora_rank:
        trained = trained.merge_and_unload()
    _save(plan, trained, tokenizer)
    summary = {
        "kind": "sft (rejection fine-tuning)",
        "plan": asdict(plan),
        "data": {
            "kept": len(selection.kept),
            "turned_away": dict(selection.turned_away),
            "dropped_turns": selection.dropped_turns,
            "tokens": sum(map(len, dataset["input_ids"])),
        },
        "steps": result.global_step,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "seconds": round(time.monotonic() - started, 1),
        "bf16": bf16,
    }
    output = Path(plan.output)
    (output / TRAINING_RECORD).write_text(json.dumps(summary, indent=2) + "\n")
    (output / "README.md").write_text(model_card(summary))
    return summary


def _lora(rank: int):
    if not rank:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=rank, lora_alpha=2 * rank, target_modules="all-linear", task_type="CAUSAL_LM"
    )


def _save(plan: SftPlan, model, tokenizer) -> None:
    output = Path(plan.output)
    output.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output)
    tokenizer.save_pretrained(output)


def model_card(summary: dict) -> str:
    plan, data = summary["plan"], summary["data"]
    method = f"LoRA rank {plan['lora_rank']}, merged" if plan["lora_rank"] else "full fine-tuning"
    turned = ", ".join(f"{n} {why}" for why, n in data["turned_away"].items()) or "none"
    return f"""---
base_model: {plan["base"]}
library_name: transformers
tags: [kernelarena, cuda-kernels, rft, trl, sft]
---

# A KernelArena agent, rejection fine-tuned

- **Base model:** `{plan["base"]}`
- **Method:** supervised fine-tuning with TRL's SFTTrainer ({method}), loss on the assistant's
  tokens alone, rendered as `{plan["served_by"]}` serves the model
- **Data:** {data["kept"]} trajectories from {", ".join(f"`{d}`" for d in plan["data"])}: each
  one's best candidate verified with milestone reward >= {plan["min_reward"]}
  (agent/reward.py); turned away: {turned}; {data["dropped_turns"]} assistant turns with
  invalid tool calls dropped; {data["tokens"]} tokens
- **Steps:** {summary["steps"]} ({plan["epochs"]} epochs, learning rate {plan["learning_rate"]}
  ({plan["lr_scheduler"]}, {plan["warmup_steps"]} warm-up steps),
  batch {plan["batch_size"]} x {plan["gradient_accumulation"]}); loss {summary["first_loss"]}
  at the first logged step, {summary["last_loss"]} at the last
- **Made by:** `python -m agent.train sft` (KernelArena); the full record is
  `{TRAINING_RECORD}` beside this card
"""
