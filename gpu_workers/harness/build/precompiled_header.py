"""A precompiled header of torch's extension headers, built once per toolchain.

Parsing `<torch/types.h>` and pybind11 is most of a binding file's compile time (29 s of 29 at
-O3 on a 2-core host; 14 s with this header precompiled). GCC takes `-include prelude.h` and
uses `prelude.h.gch` beside it when the flags match, or parses the header itself when they do
not (a .gch of other flags costs time, never correctness); the cache publishes it by rename, so
no compile reads half of one. Only translation units that include torch's headers get it, since
forcing torch into a plain kernel file would slow it down.

The header is built like any object: by the toolchain in the sandbox, published into the cache
by rename, keyed by the toolchain's digest. A toolchain that cannot build it (not GCC, or a
failure) is remembered and compiles without it.
"""

from __future__ import annotations

import fcntl
import functools
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from gpu_workers.harness import settings
from gpu_workers.harness.sandbox import launch as sandbox

PRELUDE = "prelude.h"
# what every binding file includes first (the registry's SKILL.md and the fusion agent's codegen)
_PRELUDE_TEXT = """\
// Precompiled for every translation unit that includes torch's headers (compile.py).
#pragma once
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
"""
_USES_TORCH = re.compile(r"^\s*#\s*include\s*[<\"](torch|ATen|c10)/", re.MULTILINE)


def uses_torch(source: str) -> bool:
    """Whether a translation unit includes torch's headers, so the prelude only saves time."""
    return bool(_USES_TORCH.search(source))


def prelude(cxx: str, cflags: tuple[str, ...], key: str, device: str, memory: int) -> Path | None:
    """The prelude header with its .gch beside it for these flags, built on first use; None
    where this toolchain does not build one."""
    root = settings.cache_dir() / "pch"
    ready = root / key / PRELUDE
    if ready.is_file():
        return ready
    if not _is_gcc(cxx):
        return None
    root.mkdir(exist_ok=True)
    # one build per toolchain: builds that start together (a batch of candidates, two workers
    # of one machine) wait for it instead of each spending a minute and a GiB on the same file
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.is_file():
            return ready
        if (root / f"{key}.failed").is_file():
            return None
        return _build(cxx, cflags, key, device, memory)


def _build(cxx: str, cflags: tuple[str, ...], key: str, device: str, memory: int) -> Path | None:
    root = settings.cache_dir() / "pch"
    ready, failed = root / key / PRELUDE, root / f"{key}.failed"
    staged = Path(tempfile.mkdtemp(prefix="pch-", dir=root))
    try:
        (staged / PRELUDE).write_text(_PRELUDE_TEXT)
        argv = [cxx, *cflags, "-x", "c++-header", PRELUDE, "-o", f"{PRELUDE}.gch"]
        result = sandbox.run(
            argv,
            cwd=staged,
            device=device,
            view=sandbox.View(writable=(staged,)),
            limits=sandbox.Limits(timeout_s=600, output_bytes=16_000, address_space_bytes=memory),
            harness=False,
        )
        if not result.ok:
            failed.write_text(result.stdout + result.stderr + (result.failure() or ""))
            return None
        try:
            staged.rename(root / key)
        except OSError:  # another process published it first
            pass
        return ready if ready.is_file() else None
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def refused(log: str) -> bool:
    """Whether a failed build failed on the .gch itself: GCC rejects a mismatched one quietly,
    but a damaged one is an error of the compiler's own, with no file and line of a source."""
    return any(
        line.startswith("cc1plus:") and "precompiled header" in line for line in log.splitlines()
    )


def give_up(key: str, log: str) -> None:
    """This toolchain compiles without the prelude from now on."""
    root = settings.cache_dir() / "pch"
    (root / f"{key}.failed").write_text(log)
    shutil.rmtree(root / key, ignore_errors=True)


@functools.cache
def _is_gcc(cxx: str) -> bool:
    """Clang reads `-include x.h` without looking for x.h.gch: building one would be waste."""
    try:
        shown = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Free Software Foundation" in shown.stdout and "clang" not in shown.stdout
