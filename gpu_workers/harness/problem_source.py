"""What can be checked of a problem without running it: size, UTF-8, syntax, the three names,
and its identity (the hash of the normalised source). Standard library only, so the web process
uses it too without importing torch."""

from __future__ import annotations

import ast
import hashlib

MAX_SOURCE_BYTES = 256 * 1024
REQUIRED = ("Model", "get_inputs", "get_init_inputs")


class ProblemError(ValueError):
    """The problem cannot be used; the message says what to fix."""


def source_sha256(source: str) -> str:
    """Hash of the normalised source (line endings, trailing blanks), the problem's identity."""
    normalised = "\n".join(line.rstrip() for line in source.replace("\r\n", "\n").splitlines())
    return hashlib.sha256(normalised.strip().encode()).hexdigest()


def check_source(source: str) -> None:
    """Size, UTF-8, Python syntax and the three names a problem defines at module level."""
    try:
        size = len(source.encode("utf-8"))
    except UnicodeEncodeError:
        raise ProblemError("the source is not valid UTF-8 text (it has a lone surrogate)") from None
    if size > MAX_SOURCE_BYTES:
        raise ProblemError(
            f"the source is {size // 1024} KiB; the limit is {MAX_SOURCE_BYTES // 1024} KiB"
        )
    if "\0" in source:
        # ast.parse refuses it with no line number ("syntax error on line None").
        line = source.count("\n", 0, source.index("\0")) + 1
        raise ProblemError(f"a NUL character on line {line}: Python source cannot contain one")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        where = f" on line {exc.lineno}" if exc.lineno is not None else ""
        raise ProblemError(f"syntax error{where}: {exc.msg}") from None
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    }
    defined |= {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    missing = [name for name in REQUIRED if name not in defined]
    if missing:
        raise ProblemError(
            f"missing {', '.join(missing)}: a problem defines class Model(nn.Module), "
            "get_inputs() and get_init_inputs() at module level"
        )
