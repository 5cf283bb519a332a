"""Which cached object a source may reuse: keyed by everything the compiler read.

A source's first key (toolchain, path, text) finds a manifest of the dependency lists its earlier
builds reported (`-MD -MF`, from g++ and nvcc alike). The object's key is the first key plus the
content of every listed workspace file and the list of the workspace's files, all taken from one
snapshot of the workspace before the build: a listed file that changed or is gone, or a new file
that an `#include` or `__has_include` could now find, gives another key, so a miss. Files outside
the workspace are the toolchain's (system, torch, CUDA headers, the precompiled prelude): the
toolchain's digest in the first key covers them. The manifest only names files to hash, so a
stale or damaged one costs a rebuild, never a wrong object.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path, PurePosixPath

from gpu_workers.harness import settings

MAX_DEPFILE_BYTES = 4 << 20  # torch's headers make about 1,000 lines of 100 characters
MAX_REMEMBERED = 8  # dependency lists kept per source text (say, one per included variant)
_DEPFILE_TOKEN = re.compile(r"(?:\\.|[^\s\\])+")
_IGNORED_PARTS = ("__pycache__",)  # what importing model_new.py leaves; never a compiler's input

Snapshot = dict[str, str]  # workspace-relative path -> sha256 of its bytes


def key_of(*parts: str) -> str:
    """One cache key from its parts, each ended by a NUL so no two lists of parts collide."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def snapshot(root: Path) -> Snapshot:
    """Every file of the workspace, by content: what a build's keys are computed from."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in files
        if not any(part in _IGNORED_PARTS for part in p.relative_to(root).parts)
    }


def object_key(first_key: str, dependencies: list[str], files: Snapshot) -> str | None:
    """The object's content key, or None when a dependency is no longer in the workspace."""
    if any(rel not in files for rel in dependencies):
        return None
    listing = key_of(*sorted(files))
    return key_of(first_key, listing, *(f"{rel}\n{files[rel]}" for rel in sorted(dependencies)))


def lookup(first_key: str, files: Snapshot) -> str | None:
    """The key of a cached object built from exactly these files, if there is one."""
    for dependencies in _remembered(first_key):
        key = object_key(first_key, dependencies, files)
        if key and object_path(key).is_file():
            return key
    return None


def object_path(key: str) -> Path:
    return settings.cache_dir() / "objects" / f"{key}.o"


def remember(first_key: str, dependencies: list[str]) -> None:
    """Adds a dependency list to the source's manifest, published by rename (two workers
    writing at once may lose one's entry: that costs a rebuild, never a wrong object)."""
    known = [d for d in _remembered(first_key) if d != dependencies]
    settings.publish_json(_manifest_path(first_key), [dependencies, *known][:MAX_REMEMBERED])


def _manifest_path(first_key: str) -> Path:
    return settings.cache_dir() / "manifests" / f"{first_key}.json"


def _remembered(first_key: str) -> list[list[str]]:
    try:
        entries = json.loads(_manifest_path(first_key).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, list) and all(isinstance(p, str) for p in e)]


def dependencies(depfile: Path, target: Path, root: Path, files: Snapshot) -> list[str] | None:
    """The workspace files a compile read, from the dependency file it wrote (untrusted text:
    the compiler ran on untrusted sources); None where it cannot be trusted to be complete (no
    file, too large, not about this target, or a workspace path that is not in the snapshot),
    and then the object is not cached."""
    try:
        with open(depfile, "rb") as handle:
            raw = handle.read(MAX_DEPFILE_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_DEPFILE_BYTES:
        return None
    text = raw.decode(errors="replace").replace("\\\r\n", " ").replace("\\\n", " ")
    head, colon, body = text.partition(":")
    if not colon or head.strip() != str(target):
        return None
    found: set[str] = set()
    for token in _DEPFILE_TOKEN.findall(body):
        path = _unescape(token)
        if not path.startswith("/"):
            return None  # these command lines name every file by its absolute path
        rel = _inside(path, root)
        if rel is not None and rel not in files:
            return None
        if rel is not None:
            found.add(rel)
    return sorted(found)


def _unescape(token: str) -> str:
    """Make's escapes as g++ and nvcc write them: `\\ ` for a space, `\\#`, `$$`."""
    return re.sub(r"\\([ #\\])", r"\1", token).replace("$$", "$")


def _inside(path: str, root: Path) -> str | None:
    """The normalised workspace-relative path; None outside the workspace (the toolchain's)."""
    normal = PurePosixPath(os.path.normpath(path))
    try:
        return normal.relative_to(PurePosixPath(root)).as_posix()
    except ValueError:
        return None
