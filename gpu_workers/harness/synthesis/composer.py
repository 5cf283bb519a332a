"""The rule-based composer: a chain of 1..max_ops seed operators with compatible shapes, rendered
as a KernelBench-format source. Offline and reproducible: candidate `index` of seed `seed` is the
same on every machine, whichever other candidates were made (each has its own random.Random).

The rules: a chain starts in one layout with shapes drawn for it; each next operator accepts the
current layout; a reduction only ends a chain; no operator follows itself; at most one change of
layout (an image flattened or pooled to features). The input is then sized for the chain's
estimated eager time (FLOPs and bytes over the Budget's rates), by the composer named:

- `chain-v2` (new suites): every chain aimed at the middle of the Budget's window, its batch
  scaled (then a sequence's tokens) as far as its largest tensor stays under the Budget's
  `max_tensor_mb`.
- `chain-v1` (kept so that its suites go on as they began): only a chain estimated outside the
  window is rescaled, its batch at most 1024. On a lent H100 its seed 1 came out at a median
  eager time of 0.11 ms, 37 of 100 problems under 0.05 ms, where the window's middle is 0.5 ms
  (docs/synthesis.md).

Both draw the same chains for a seed and index: they differ in sizes alone.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from gpu_workers.harness.synthesis.operators import (
    FEATURES,
    IMAGE,
    SEQUENCE,
    Operator,
    Shape,
    Step,
    available,
)

COMPOSER = "chain-v2"  # what a new suite is made with
_DRAWS = "chain-v1"  # every composer's random draws, so that each sizes the same chains

# Shapes per layout, before the batch is scaled to the budget.
_SHAPES = {
    FEATURES: lambda rng: (rng.choice((16, 32, 64, 128)), rng.choice((256, 512, 1024, 2048))),
    SEQUENCE: lambda rng: (
        rng.choice((2, 4, 8)),
        rng.choice((64, 128, 256)),
        rng.choice((256, 512, 768, 1024)),
    ),
    IMAGE: lambda rng: (
        rng.choice((2, 4, 8)),
        rng.choice((3, 16, 32, 64)),
        *([rng.choice((16, 32, 64))] * 2),
    ),
}
_MAX_BATCH = 1024


@dataclass(frozen=True)
class Budget:
    """The window of estimated eager time a chain's shapes are chosen for, and the rates the
    estimate assumes (a cpu by default; the measured eager time is filtered again after
    validation, with the command's window)."""

    min_ms: float = 0.2
    max_ms: float = 20.0
    gflops: float = 20.0  # sustained FLOP/s of the target, in GFLOP/s
    gbytes: float = 5.0  # sustained memory bandwidth, in GB/s
    max_tensor_mb: float = 64.0  # the largest input or intermediate chain-v2 makes

    def estimate_ms(self, flops: float, nbytes: float) -> float:
        return flops / (self.gflops * 1e6) + nbytes / (self.gbytes * 1e6)


CPU = Budget()
CUDA = Budget(min_ms=0.05, max_ms=5.0, gflops=20_000.0, gbytes=1_500.0, max_tensor_mb=1024.0)
BUDGETS = {"cpu": CPU, "cuda": CUDA}


@dataclass(frozen=True)
class Candidate:
    seed: int
    index: int
    ops: tuple[str, ...]
    layout: str
    input_shape: Shape
    shapes: tuple[Shape, ...]  # after each op
    estimated_ms: float
    source: str
    composer: str = COMPOSER

    @property
    def name(self) -> str:
        return f"{self.index:04d}_" + "_".join(self.ops)[:150]

    def provenance(self) -> dict:
        return {
            "composer": self.composer,
            "seed": self.seed,
            "index": self.index,
            "ops": list(self.ops),
            "layout": self.layout,
            "input_shape": list(self.input_shape),
            "shapes": [list(s) for s in self.shapes],
            "estimated_ms": round(self.estimated_ms, 4),
        }


def compose(
    seed: int,
    index: int,
    max_ops: int = 5,
    budget: Budget = CPU,
    operators: tuple[Operator, ...] | None = None,
    composer: str = COMPOSER,
) -> Candidate:
    """Candidate `index` of `seed`: the same arguments give the same source."""
    if composer not in COMPOSERS:
        raise ValueError(f"unknown composer {composer!r}: one of {', '.join(COMPOSERS)}")
    operators = available() if operators is None else operators
    rng = random.Random(f"{_DRAWS}:{seed}:{index}")
    layout = rng.choice([lay for lay in (FEATURES, SEQUENCE, IMAGE) if _first(operators, lay)])
    length = rng.randint(1, max_ops)
    shape = _SHAPES[layout](rng)
    chain = _chain(rng, operators, layout, shape, length)
    steps, estimated = COMPOSERS[composer](chain, layout, shape, budget)
    return Candidate(
        composer=composer,
        seed=seed,
        index=index,
        ops=tuple(op.name for op, _ in chain),
        layout=layout,
        input_shape=steps[0][0],
        shapes=tuple(step.shape for _, step in steps),
        estimated_ms=estimated,
        source=render(layout, steps[0][0], [s for _, s in steps], chain),
    )


def _first(operators, layout: str) -> list[Operator]:
    return [op for op in operators if layout in op.layouts and not op.terminal]


def _chain(rng, operators, layout: str, shape: Shape, length: int) -> list[tuple[Operator, int]]:
    """The operators, each with its own draw (so a rescaled batch keeps every other choice)."""
    chain: list[tuple[Operator, int]] = []
    changed_layout = False
    for position in range(length):
        last = position == length - 1
        prev = chain[-1][0] if chain else None
        choices = [
            op
            for op in operators
            if layout in op.layouts
            and (last or not op.terminal)
            and op is not prev
            and not (changed_layout and op.family == "layout")
            and not (op.terminal and prev is not None and prev.family in ("norm", "softmax"))
            and _fits(op, shape)
        ]
        if not choices:
            break
        op = rng.choice(choices)
        draw = rng.getrandbits(32)
        step = op.step(shape, random.Random(draw))
        chain.append((op, draw))
        shape = step.shape
        if step.layout:
            layout, changed_layout = step.layout, True
        if op.terminal:
            break
    return chain


def _fits(op: Operator, shape: Shape) -> bool:
    if op.family == "pool":
        return min(shape[2:]) >= 8
    if op.name == "flatten":
        return 256 <= _numel(shape[1:]) <= 16384
    if op.name == "multihead_attention":
        return shape[-1] % 4 == 0
    return True


def _numel(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _steps(chain, shape: Shape) -> list[tuple[Shape, Step]]:
    out = []
    for op, draw in chain:
        step = op.step(shape, random.Random(draw))
        out.append((shape, step))
        shape = step.shape
    return out


def _fit(chain, layout: str, shape: Shape, budget: Budget) -> tuple[list, float]:
    """Scales the batch (every cost is linear in it), and a sequence's tokens where one sequence
    is too much, toward the middle of the budget's window."""

    def cost(shape: Shape) -> tuple[list, float]:
        steps = _steps(chain, shape)
        return steps, budget.estimate_ms(sum(s.flops for _, s in steps), _bytes(steps))

    def scaled(size: int, estimated: float, least: int) -> int:
        return max(least, min(_MAX_BATCH, round(size * target / max(estimated, 1e-9))))

    target = (budget.min_ms * budget.max_ms) ** 0.5
    steps, estimated = cost(shape)
    if not budget.min_ms <= estimated <= budget.max_ms:
        shape = (scaled(shape[0], estimated, 1), *shape[1:])
        steps, estimated = cost(shape)
    if estimated > budget.max_ms and layout == SEQUENCE:  # one sequence is still too long
        shape = (shape[0], scaled(shape[1], estimated, 16), shape[2])
        steps, estimated = cost(shape)
    return steps, estimated


def _fit_to_middle(chain, layout: str, shape: Shape, budget: Budget) -> tuple[list, float]:
    """chain-v2: the batch, then a sequence's tokens, scaled toward the window's middle, each as
    far as the largest tensor stays within budget.max_tensor_mb (every size is linear in it)."""
    target = (budget.min_ms * budget.max_ms) ** 0.5
    steps = _steps(chain, shape)
    estimated = _estimate(steps, budget)
    for dim, least in ((0, 1), (1, 16)) if layout == SEQUENCE else ((0, 1),):
        largest = max(_numel(s) for s in (shape, *(step.shape for _, step in steps))) * 4
        most = max(least, int(shape[dim] * budget.max_tensor_mb * 2**20 // largest))
        size = max(least, min(most, round(shape[dim] * target / max(estimated, 1e-9))))
        shape = (*shape[:dim], size, *shape[dim + 1 :])
        steps = _steps(chain, shape)
        estimated = _estimate(steps, budget)
    return steps, estimated


def _estimate(steps, budget: Budget) -> float:
    return budget.estimate_ms(sum(s.flops for _, s in steps), _bytes(steps))


COMPOSERS = {"chain-v1": _fit, "chain-v2": _fit_to_middle}


def _bytes(steps) -> float:
    return sum(s.bytes for _, s in steps)


def render(layout: str, input_shape: Shape, steps: list[Step], chain) -> str:
    names = " -> ".join(op.name for op, _ in chain)
    imports = sorted({line for step in steps for line in step.imports})
    init, forward = [], []
    for position, step in enumerate(steps):
        expr = step.forward
        if step.module:
            attr = f"self.op{position}"
            init.append(f"        {attr} = {step.module}")
            expr = expr.replace("{m}", attr)
        shape = ", ".join(str(d) for d in step.shape)
        forward.append(f"        x = {expr}  # ({shape})")
    dims = ", ".join(str(d) for d in input_shape)
    lines = [
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
        *imports,
        "",
        "",
        "class Model(nn.Module):",
        f'    """{names} on a {layout} input ({dims}), fp32."""',
        "",
        "    def __init__(self):",
        "        super().__init__()",
        *(init or ["        pass"]),
        "",
        "    def forward(self, x):",
        *forward,
        "        return x",
        "",
        "",
        "def get_inputs():",
        f"    return [torch.randn({dims})]",
        "",
        "",
        "def get_init_inputs():",
        "    return []",
        "",
    ]
    return "\n".join(lines)
