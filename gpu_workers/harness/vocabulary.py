"""The words webapp, agent and workers share: GPU types and their devices, protocols and their
tolerances, the digest that names a set of sources, the agent name of a person's submission.

Standard library only, so the web process imports it without torch or the harness's runtime;
`protocol.py` builds its Protocols from these names and tolerances.
"""

from __future__ import annotations

import hashlib
import json

# A GPU type is a worker queue's name ("cpu", "h100", ...); the harness knows two devices.
CPU_GPU_TYPE = "cpu"
DEVICES = ("cpu", "cuda")

# atol = rtol for each protocol; the first is the default (CUDA-Agent's 1e-2).
PROTOCOL_TOLERANCES = {"loose": 1e-2, "fp32-strict": 1e-4}
PROTOCOL_NAMES = tuple(PROTOCOL_TOLERANCES)

# The `agent` of a run that replays a person's own files instead of asking a model.
SUBMISSION_AGENT = "submission"

# How the rejection of a problem too large for the GPU begins (judge/footprint.py): neither the
# problem's defect nor the machine's failure, and reported apart from both.
DOES_NOT_FIT = "does not fit this GPU's memory"


def device_for(gpu_type: str) -> str:
    """The harness device of a GPU type: the cpu type runs on the cpu, every other on cuda."""
    return "cpu" if gpu_type == CPU_GPU_TYPE else "cuda"


def sources_digest(sources: dict[str, str]) -> str:
    """sha256 of a workspace's sources (path -> text): equal sources, equal digest."""
    return hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()
