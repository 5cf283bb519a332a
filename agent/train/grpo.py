"""GRPO over a suite's problems with TRL's GRPOTrainer, where a rollout is a whole agent episode
(episodes.py): the policy, sampled in this process (policy_backend.py), works through the same
loop, tools and sandboxed harness as any run, and the reward is the milestone reward of the
episode's best candidate. TRL's `rollout_func` hands the trainer each episode as one sequence:
the first prompt, then everything after it, with the model's own tokens marked (`env_mask`) so
tool results are context, never learned. An episode the machine failed is retried once; failed
again, its reward is withheld (None) and its tokens are all masked, so it moves no weight."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from agent.config import TRAINING_RECORD
from agent.train import chat_format, episodes, worker_rollouts
from agent.train.policy_backend import PolicyBackend
from agent.train.policy_server import PolicyServer
from agent.train.trainer_setup import load_policy, shared_arguments
from agent.trajectory import write_trajectory

ROLLOUTS = "rollouts.jsonl"  # in the output folder: every rollout's trajectory, in order


@dataclass
class GrpoPlan:
    base: str
    problems: str  # a suite export's problems.jsonl (docs/synthesis.md)
    output: str
    device: str = "cuda"  # the harness's target
    served_by: str = "vllm"
    max_turns: int = 8
    max_new_tokens: int = 1024
    num_generations: int = 4
    concurrent_rollouts: int = 4  # episodes of a batch at once (threads sharing the policy)
    # a GPU type: each rollout runs on one of the site's workers of that type, asking the policy
    # served by this process at policy_host:policy_port (0: a free port) for its replies
    rollouts_on: str = ""
    policy_host: str = "127.0.0.1"
    policy_port: int = 0
    steps: int = 100
    learning_rate: float = 1e-6
    temperature: float = 1.0
    seed: int = 0
    precision: str = "auto"  # trainer_setup.PRECISIONS


def load_problems(path: str) -> list[dict]:
    file = Path(path)
    if file.is_dir():
        file = file / "problems.jsonl"
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no such problems file (python manage.py export_dataset)")
    problems = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
    if not problems:
        raise ValueError(f"{file}: holds no problem")
    return problems


def sequences(episode: episodes.Episode, tokenizer, served_by: str) -> dict:
    """The episode as prompt ids (up to the model's first token), completion ids, and env_mask
    (1 on the model's tokens)."""
    messages, tools = chat_format.served_messages(episode.record, served_by)
    example = chat_format.tokenized(tokenizer, messages, tools)
    ids, mask = example["input_ids"], example["assistant_masks"]
    first = mask.index(1) if 1 in mask else len(ids)
    env_mask = mask[first:] if not episode.harness_failed else [0] * (len(ids) - first)
    return {"prompt_ids": ids[:first], "completion_ids": ids[first:], "env_mask": env_mask}


def token_logprobs(model, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
    """The policy's log-probability of each completion token, as it sampled them."""
    import torch

    if not completion_ids:
        return []
    ids = torch.tensor([prompt_ids + completion_ids], device=model.device)
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
    chosen = torch.tensor(completion_ids, device=model.device)
    return torch.log_softmax(logits, dim=-1).gather(1, chosen[:, None])[:, 0].tolist()


def make_rollout(
    plan: GrpoPlan, problems: dict[str, dict], tokenizer, log: list, server: PolicyServer | None
):
    def rollout(prompts: list, trainer) -> dict:
        model = trainer.model_wrapped if hasattr(trainer, "model_wrapped") else trainer.model
        model = getattr(model, "module", model)
        backend = PolicyBackend(
            model, tokenizer, plan.served_by, plan.max_new_tokens, plan.temperature
        )
        out = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": []}
        out["milestone_reward"] = []
        batch = run_batch(plan, [problems[name] for name in prompts], backend, server)
        for name, episode in zip(prompts, batch, strict=True):
            # every rollout as a trajectory (agent/trajectory.py), to read what the policy did
            write_trajectory(Path(plan.output) / ROLLOUTS, episode.record, append=True)
            seq = sequences(episode, tokenizer, plan.served_by)
            out["prompt_ids"].append(seq["prompt_ids"])
            out["completion_ids"].append(seq["completion_ids"])
            out["env_mask"].append(seq["env_mask"])
            out["logprobs"].append(token_logprobs(model, seq["prompt_ids"], seq["completion_ids"]))
            out["milestone_reward"].append(episodes.reward_of(episode))
            log.append(
                {
                    "problem": name,
                    "reward": episode.reward,
                    "status": episode.record["status"],
                    "harness_failed": episode.harness_failed,
                    "judged": bool(episode.record["candidates"]),
                    "at": time.time(),
                }
            )
        return out

    return rollout


def run_batch(
    plan: GrpoPlan, batch: list[dict], backend: PolicyBackend, server: PolicyServer | None
) -> list[episodes.Episode]:
    """The batch's episodes: in this process's threads, or on the site's workers, which ask
    `server` (answering with this step's weights) for each reply."""
    if server is None:
        return episodes.run_episodes(
            batch, backend, plan.device, plan.max_turns, plan.concurrent_rollouts
        )
    server.backend = backend
    return worker_rollouts.run_episodes_on_workers(
        batch, server.url, plan.rollouts_on, plan.max_turns
    )


def milestone_reward(prompts, completions, milestone_reward, **_) -> list[float | None]:
    """The harness's reward of each rollout, as its episode earned it (None: withheld)."""
    return list(milestone_reward)


def rank_gpu(env) -> str:
    """The GPU of this accelerate rank as the host numbers it: LOCAL_RANK counts the devices the
    process sees, which CUDA_VISIBLE_DEVICES may have narrowed ("2,3": rank 1 is GPU 3)."""
    rank = int(env["LOCAL_RANK"])
    visible = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return visible[rank] if rank < len(visible) else str(rank)


def train(plan: GrpoPlan) -> dict:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    problems = {p["name"]: p for p in load_problems(plan.problems)}
    if plan.device == "cuda" and "LOCAL_RANK" in os.environ:
        # under accelerate launch: each rank's rollouts judged on its own GPU (the harness pins
        # its sandboxes to KERNELARENA_GPU, by the host's numbering, and refuses a judge elsewhere)
        os.environ.setdefault("KERNELARENA_GPU", rank_gpu(os.environ))
    if plan.rollouts_on:
        worker_rollouts.check_workers(plan.rollouts_on)
    model, tokenizer, bf16 = load_policy(plan.base, plan.precision)
    tokenizer.padding_side = "left"
    Path(plan.output).mkdir(parents=True, exist_ok=True)
    (Path(plan.output) / ROLLOUTS).unlink(missing_ok=True)  # this run's rollouts only
    log: list[dict] = []
    server = PolicyServer(None, plan.policy_host, plan.policy_port) if plan.rollouts_on else None
    config = GRPOConfig(
        **shared_arguments(plan.output, plan.seed, bf16),
        max_steps=plan.steps,
        learning_rate=plan.learning_rate,
        num_generations=plan.num_generations,
        per_device_train_batch_size=plan.num_generations,
        max_completion_length=None,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=milestone_reward,
        args=config,
        train_dataset=Dataset.from_list([{"prompt": name} for name in problems]),
        processing_class=tokenizer,
        rollout_func=make_rollout(plan, problems, tokenizer, log, server),
    )
    started = time.monotonic()
    with server or contextlib.nullcontext():
        result = trainer.train()
    seconds = time.monotonic() - started
    output = Path(plan.output)
    output.mkdir(parents=True, exist_ok=True)
    trainer.model.save_pretrained(output)
    tokenizer.save_pretrained(output)
    summary = {
        "kind": "grpo",
        "plan": asdict(plan),
        "steps": result.global_step,
        "rollouts": len(log),
        "rewards": [r["reward"] for r in log],
        "harness_failures": sum(r["harness_failed"] for r in log),
        "judged": sum(r["judged"] for r in log),  # rollouts with a candidate the harness judged
        # how the episodes ended (agent/loop.py's statuses): why rollouts earned what they did
        "ended": dict(collections.Counter(r["status"] for r in log)),
        "seconds": round(seconds, 1),
        "rollouts_per_minute": round(60 * len(log) / seconds, 2) if seconds else None,
    }
    (output / TRAINING_RECORD).write_text(json.dumps(summary, indent=2) + "\n")
    return summary
