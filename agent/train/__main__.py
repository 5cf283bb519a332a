"""python -m agent.train sft --base MODEL --data FILE_OR_FOLDER [...] --output DIR [options]
python -m agent.train grpo --base MODEL --problems EXPORT --output DIR [options]

sft   rejection fine-tuning on trajectory files (agent/trajectory.py) or a suite's export:
      keeps the runs whose best candidate verified and beat torch.compile by the protocol's
      margin (reward 3), drops turns with invalid tool calls (--keep-invalid-calls keeps them),
      trains full or LoRA (--lora-rank R) and writes a checkpoint with its model card.
grpo  GRPO over a suite export's problems: each rollout a whole agent episode through the loop and
      the sandboxed harness (--device), rewarded with its best candidate's milestone reward.
Exit 0 with the summary printed; 2 with one line when the input cannot be used.
"""

from __future__ import annotations

import argparse
import json
import sys

from agent.train import chat_format
from agent.train.trainer_setup import PRECISIONS, use_bf16

PRECISION_HELP = "the weights' dtype (auto: bf16 where the GPU has it)"
SCHEDULERS = ("linear", "cosine", "constant", "constant_with_warmup")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.train")
    sub = parser.add_subparsers(dest="command", required=True)
    sft = sub.add_parser("sft", help="rejection fine-tuning on trajectories")
    sft.add_argument("--base", required=True, help="the model to start from (folder or hub id)")
    sft.add_argument("--data", required=True, nargs="+", help="trajectory .jsonl files or folders")
    sft.add_argument("--output", required=True, help="the checkpoint's folder")
    sft.add_argument(
        "--served-by",
        choices=chat_format.SERVERS,
        default="vllm",
        help="the server whose rendering of a chat the model will see",
    )
    sft.add_argument("--epochs", type=float, default=3.0)
    sft.add_argument("--learning-rate", type=float, default=2e-5)
    sft.add_argument(
        "--lr-scheduler",
        choices=SCHEDULERS,
        default="linear",
        help="how the learning rate moves over the steps (linear: down to 0)",
    )
    sft.add_argument("--warmup-steps", type=int, default=0)
    sft.add_argument("--batch-size", type=int, default=1)
    sft.add_argument("--gradient-accumulation", type=int, default=1)
    sft.add_argument("--max-length", type=int, default=16384)
    sft.add_argument("--lora-rank", type=int, default=0, help="0 (default): full fine-tuning")
    sft.add_argument(
        "--min-reward",
        type=int,
        default=3,
        choices=(1, 2, 3),
        help="the milestone a run's best candidate must reach (3: beats compile)",
    )
    sft.add_argument("--keep-invalid-calls", action="store_true")
    sft.add_argument("--seed", type=int, default=0)
    sft.add_argument("--precision", choices=PRECISIONS, default="auto", help=PRECISION_HELP)
    grpo = sub.add_parser("grpo", help="GRPO with the harness's milestone reward")
    grpo.add_argument("--base", required=True, help="the policy to start from (folder or hub id)")
    grpo.add_argument("--problems", required=True, help="a suite export (export_dataset)")
    grpo.add_argument("--output", required=True, help="the checkpoint's folder")
    grpo.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    grpo.add_argument("--served-by", choices=chat_format.SERVERS, default="vllm")
    grpo.add_argument("--max-turns", type=int, default=8)
    grpo.add_argument("--max-new-tokens", type=int, default=1024)
    grpo.add_argument("--num-generations", type=int, default=4)
    grpo.add_argument(
        "--concurrent-rollouts",
        type=int,
        default=4,
        help="episodes of a batch at once (the harness's GPU lock orders their timing)",
    )
    grpo.add_argument(
        "--rollouts-on",
        default="",
        metavar="GPU_TYPE",
        help="run each rollout on one of the site's workers of this GPU type (Celery, through "
        "REDIS_URL), which asks this process's policy endpoint for its replies",
    )
    grpo.add_argument("--policy-host", default="127.0.0.1", help="where the endpoint listens")
    grpo.add_argument("--policy-port", type=int, default=0, help="0: a free port")
    grpo.add_argument("--steps", type=int, default=100)
    grpo.add_argument("--learning-rate", type=float, default=1e-6)
    grpo.add_argument("--temperature", type=float, default=1.0)
    grpo.add_argument("--seed", type=int, default=0)
    grpo.add_argument("--precision", choices=PRECISIONS, default="auto", help=PRECISION_HELP)
    args = parser.parse_args(argv)
    return _sft(args) if args.command == "sft" else _grpo(args)


def _grpo(args) -> int:
    from agent.train import grpo, worker_rollouts

    options = {k: v for k, v in vars(args).items() if k != "command"}
    plan = grpo.GrpoPlan(**options)
    try:
        grpo.load_problems(plan.problems)
        use_bf16(plan.precision)
    except (FileNotFoundError, ValueError) as error:  # JSONDecodeError is a ValueError
        print(f"agent.train grpo: {error}", file=sys.stderr)
        return 2
    # what fails once training runs is no bad input: it ends with its traceback
    try:
        summary = grpo.train(plan)
    except worker_rollouts.NoRolloutWorkers as error:  # checked before the model loads
        print(f"agent.train grpo: {error}", file=sys.stderr)
        return 2
    print(json.dumps({k: summary[k] for k in ("steps", "rollouts", "rewards", "seconds")}))
    print(f"checkpoint: {plan.output}")
    return 0


def _sft(args) -> int:
    from agent.train import sft
    from agent.train.selection import select

    plan = sft.SftPlan(
        base=args.base,
        data=args.data,
        output=args.output,
        served_by=args.served_by,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        lr_scheduler=args.lr_scheduler,
        warmup_steps=args.warmup_steps,
        batch_size=args.batch_size,
        gradient_accumulation=args.gradient_accumulation,
        max_length=args.max_length,
        lora_rank=args.lora_rank,
        min_reward=args.min_reward,
        drop_invalid_calls=not args.keep_invalid_calls,
        seed=args.seed,
        precision=args.precision,
    )
    try:
        records = sft.load_records(plan.data)
        selection = select(records, plan.min_reward, plan.drop_invalid_calls)
        print(f"trajectories: {len(records)} read, {selection.describe()}", flush=True)
        summary = sft.train(plan, selection)
    except (FileNotFoundError, ValueError, json.JSONDecodeError) as error:
        print(f"agent.train sft: {error}", file=sys.stderr)
        return 2
    print(json.dumps({k: summary[k] for k in ("steps", "first_loss", "last_loss", "seconds")}))
    print(f"checkpoint: {plan.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
