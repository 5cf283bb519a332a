"""Which workspace files an agent (or a person's submission) may write, model_new.py and
kernels/<name>.<suffix>, and what their text may hold. Standard library only, so the web process
checks a submission's files with the same rules the worker enforces."""

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


def text_fault(path: str, text: str) -> str | None:
    """Why `text` cannot be a source file at `path`, or None. Source is UTF-8 text without NUL:
    compilers skip a NUL, and the database (PostgreSQL) cannot store one."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        return (
            f"{path} is not valid UTF-8 text (character {exc.start} cannot be encoded): "
            "save it as UTF-8"
        )
    if size > MAX_FILE_BYTES:
        return size_fault(path, size)
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        return f"{path} contains a NUL character (line {line}): source files are text, not binary"
    return None


def size_fault(path: str, size: int) -> str:
    return (
        f"{path} is {size:,} bytes; a file may be at most {MAX_FILE_BYTES:,} bytes "
        f"({MAX_FILE_BYTES // 1024} KiB): split it into several kernel files"
    )
