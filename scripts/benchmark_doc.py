"""docs/benchmarks.md is written by several scripts, each owning one marked section."""

from __future__ import annotations

from pathlib import Path

HEADER = "# Benchmarks\n\nMeasured by scripts; each section names the command and the device.\n"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- begin {name} -->", f"<!-- end {name} -->"


def write_section(path: Path, name: str, section: str) -> None:
    """Replaces the section between `name`'s markers (section includes them), else appends."""
    begin, end = markers(name)
    text = path.read_text() if path.is_file() else HEADER
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    path.write_text(text)
