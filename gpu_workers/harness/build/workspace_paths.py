"""Which workspace files an agent (or a person's submission) may write: model_new.py and
kernels/<name>.<suffix>. Standard library only, so the web process checks a submission's file
names with the same rule the worker enforces."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

READ_ONLY = ("SKILL.md", "model.py", "binding.cpp", "binding_registry.h")
KERNEL_SUFFIXES = {
    "cuda": (".cu", ".cuh", ".cpp", ".h", ".hpp"),
    "cpu": (".cpp", ".h", ".hpp"),
}
_KERNEL_NAME = re.compile(r"^kernels/[A-Za-z0-9_]+\.[a-z]+$")
MAX_FILE_BYTES = 512 * 1024


def relative_path(path: str) -> PurePosixPath:
    """The path inside the workspace; ValueError if it would escape it."""
    rel = PurePosixPath(path.strip())
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ValueError(f"{path!r} is outside the workspace: use a relative path like model.py")
    return rel


def writable_path(path: str, target: str) -> str:
    """The normalised path if a candidate may write it on `target`; raises saying why not."""
    rel = str(relative_path(path))
    if rel in READ_ONLY:
        raise PermissionError(f"{rel} is read-only: write model_new.py and files in kernels/")
    suffixes = KERNEL_SUFFIXES[target]
    if rel == "model_new.py" or (_KERNEL_NAME.match(rel) and rel.endswith(suffixes)):
        return rel
    raise ValueError(
        f"{rel!r} cannot be written: only model_new.py and kernels/<name>"
        f"{{{','.join(suffixes)}}} (letters, digits and _ in the name)"
    )
