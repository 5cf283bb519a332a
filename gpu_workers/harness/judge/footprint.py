"""How much device memory judging a problem needs, and whether this device has it.

Asked only after a problem's validation ran out of memory: the `footprint` step (sandboxed, the
problem is untrusted code) builds the model and its inputs on meta tensors, which hold shapes and
no memory, runs the forward on them, and counts the bytes of the parameters, the inputs and the
outputs. Judging holds the parameters and two sets of inputs and outputs at once (validation
compares two seeds; a judged step lends the candidate copies of one set), so a problem needing
more than the device has can never be validated there: its rejection says so, with the
figures, instead of blaming the machine.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpu_workers.harness.judge.judge import device_memory_bytes
from gpu_workers.harness.sandbox import launch as sandbox
from gpu_workers.harness.vocabulary import DOES_NOT_FIT

# Sets of inputs and outputs judging holds at once (above).
SETS_HELD = 2
_GIB = 1 << 30


@dataclass(frozen=True)
class Footprint:
    params: int
    inputs: int
    outputs: int

    @property
    def needed(self) -> int:
        return self.params + SETS_HELD * (self.inputs + self.outputs)

    def misfit(self, device: str) -> str | None:
        """The rejection's reason where judging cannot fit the device's memory, else None."""
        available = device_memory_bytes(device)
        if self.needed <= available:
            return None
        return (
            f"{DOES_NOT_FIT}: judging it holds about {self.needed / _GIB:.1f} GiB (parameters "
            f"{self.params / _GIB:.1f} GiB, and {SETS_HELD} sets of inputs {self.inputs / _GIB:.1f}"
            f" GiB and outputs {self.outputs / _GIB:.1f} GiB), and this {device} device has "
            f"{available / _GIB:.1f} GiB; smaller shapes in get_inputs() or get_init_inputs() fit"
        )


def measure(source: str, device: str, timeout_s: float = 120) -> Footprint | None:
    """The problem's footprint, or None where the step failed (its reason is the validation's
    own, already reported)."""
    with tempfile.TemporaryDirectory(prefix="footprint-") as directory:
        (Path(directory) / "model.py").write_text(source)
        request = {"problem": str(Path(directory) / "model.py")}
        result, failure = sandbox.run_step(
            "footprint", request, Path(directory), device, timeout_s, view=sandbox.View()
        )
    if failure:
        return None
    return Footprint(result["params"], result["inputs"], result["outputs"])


# ---- child side: only ever runs inside the sandbox --------------------------------------------


def measure_in_child(request: dict) -> dict:
    import torch

    from gpu_workers.harness.runner import problem

    module = problem.load_module(Path(request["problem"]), "problem_model")
    with torch.device("meta"), torch.no_grad():
        model = problem.build_model(module, "meta", 0)
        inputs = problem.make_inputs(module, 0, "meta")
        outputs = problem.flatten(model(*inputs))
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    return {
        "params": sum(_nbytes(t) for t in model.state_dict().values()),
        "inputs": sum(_nbytes(t) for t in tensors),
        "outputs": sum(_nbytes(t) for t in outputs),
    }


def _nbytes(tensor) -> int:
    return tensor.numel() * tensor.element_size()
