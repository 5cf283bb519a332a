"""The tune step: several variants of the workspace judged in one tool call, ranked.

A variant is a set of whole files that replace the workspace's (model_new.py with other launch
parameters, a kernel with another block size or algorithm). The variants are first compiled side
by side (the Session's `prebuild`: a 16-core GPU host builds eight at once), then each is
profiled in turn by the workspace's own harness session, so all of them are compared with the
same cached baselines, each in a fresh confined candidate process as every candidate is
(docs/verification.md), and each verified one is recorded as a candidate of the run. A variant
that fails to compile, verify or profile is a row of the table, not the end of the call. The
workspace is left holding the fastest verified variant, or as it was when none verified.

Where the workspace screens (the Session's `screening`), the variants are ranked on a shorter
timing, and the fastest is then measured in full, again while a screened variant still ranks
above every one measured in full (a short timing may flatter one), up to CONFIRMATIONS: what the
call keeps, and what the run records as its time, is a full measurement.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

from agent.candidates import ranking
from agent.workspace import Workspace
from gpu_workers.harness.vocabulary import sources_digest

log = logging.getLogger(__name__)

# Each variant is a judged step (about 2 s on a GPU once baselines are cached): 16 keep one
# call near half a minute.
MAX_VARIANTS = 16
# Full measurements of screened variants a call makes at most (`_confirm`).
CONFIRMATIONS = 3


class TuneError(ValueError):
    """Variants the call cannot run; nothing in the workspace was changed."""


@dataclass
class Variant:
    name: str
    files: dict[str, str]
    sources: dict[str, str] = field(default_factory=dict)  # the whole sources it judged
    verify: dict = field(default_factory=dict)
    profile: dict | None = None  # None when it did not verify

    @property
    def timed(self) -> bool:
        return bool((self.profile or {}).get("ok"))

    @property
    def screened(self) -> bool:
        """Timed on a tune call's shorter screening only, not measured in full."""
        return bool((self.profile or {}).get("screened"))

    def place(self) -> tuple[bool, float]:
        return ranking((self.profile or {}).get("speedup_vs_eager") if self.timed else None)

    def row(self) -> dict:
        """The variant as the tool result's verdict lists it (its verdicts are its candidate's)."""
        profile = self.profile or {}
        return {
            "name": self.name,
            "sources_digest": self.verify.get("sources_digest"),
            "verified": bool(self.verify.get("ok")),
            "timed": self.timed,
            "screened": self.screened,
            **{key: profile.get(key) for key in _FIGURES},
            "why": None if self.timed else self.why(),
        }

    def why(self) -> str:
        """Why it was not timed: its profile's failure where it verified, else its verify's."""
        return _why(self.profile if self.verify.get("ok") else self.verify)


_FIGURES = ("candidate_ms", "speedup_vs_eager", "speedup_vs_compile", "sol_fraction")


def parse_variants(variants: list, existing: list[str]) -> list[Variant]:
    """The call's variants, checked before anything is written: each a {"name", "files"} object
    whose files replace files the workspace has."""
    if not variants:
        raise TuneError("tune needs at least one variant")
    if len(variants) > MAX_VARIANTS:
        raise TuneError(f"tune takes at most {MAX_VARIANTS} variants a call, not {len(variants)}")
    parsed, names = [], set()
    for n, item in enumerate(variants, start=1):
        if not isinstance(item, dict) or not isinstance(item.get("files"), dict):
            shape = '{"name": ..., "files": {path: text}}'
            raise TuneError(f"variant {n} must be an object {shape}")
        name = str(item.get("name") or f"v{n}")
        if name in names:
            raise TuneError(f"two variants are named {name!r}: names must differ")
        names.add(name)
        files = item["files"]
        if not files or not all(isinstance(v, str) for v in files.values()):
            raise TuneError(f"variant {name!r}: files must map each path to its whole new text")
        if missing := sorted(set(files) - set(existing)):
            raise TuneError(
                f"variant {name!r} changes {', '.join(missing)}, which the workspace does not "
                "have: write it first with write_file (a variant replaces files that exist)"
            )
        parsed.append(Variant(name, dict(files)))
    return parsed


def tune(
    workspace: Workspace,
    variants: list[Variant],
    on_judged: Callable[[Variant, int], None] | None = None,
) -> list[Variant]:
    """Profiles each variant; returns them ranked, fastest verified first, failures last.
    `on_judged(variant, number)` hears of each as it is judged (a call judges up to
    MAX_VARIANTS, for a minute or more, and the run's page should not sit still meanwhile)."""
    touched = sorted({path for variant in variants for path in variant.files})
    original = {path: workspace.read_file(path) for path in touched}
    for path, text in original.items():  # a read-only path refuses here, before any change
        workspace.write_file(path, text)
    if prebuild := getattr(workspace, "prebuild", None):  # the harness's Session has it
        try:
            prebuild([variant.files for variant in variants])
        except Exception:  # only a head start: each variant's own compile builds it anyway
            log.warning("building the variants side by side failed", exc_info=True)
    screening = getattr(workspace, "screening", None) or nullcontext
    try:
        with screening():
            for number, variant in enumerate(variants, start=1):
                _judge(workspace, original, variant)
                if on_judged:
                    on_judged(variant, number)
        _confirm(workspace, original, variants)
    finally:
        for path, text in original.items():
            workspace.write_file(path, text)
    ranked = sorted(variants, key=lambda v: v.place(), reverse=True)
    if ranked[0].timed:
        for path, text in ranked[0].files.items():
            workspace.write_file(path, text)
    return ranked


def _judge(workspace: Workspace, original: dict[str, str], variant: Variant) -> None:
    """The variant's files in the workspace, verified, and profiled where it verified."""
    for path, text in {**original, **variant.files}.items():
        workspace.write_file(path, text)
    variant.sources = workspace.sources()
    digest = {"sources_digest": sources_digest(variant.sources)}
    variant.verify = {**workspace.verify(), **digest}
    variant.profile = None
    if variant.verify.get("ok"):  # else the profile would only say it did not verify
        variant.profile = {**workspace.profile(), **digest}


def _confirm(workspace: Workspace, original: dict[str, str], variants: list[Variant]) -> None:
    """Measures the fastest in full while it is a screened one, up to CONFIRMATIONS times: a
    full measurement may rank it below another screened variant, which is measured next."""
    for _ in range(CONFIRMATIONS):
        fastest = max(variants, key=lambda v: v.place())
        if not (fastest.timed and fastest.screened):
            return
        _judge(workspace, original, fastest)


def progress_line(variant: Variant, number: int, total: int) -> str:
    """One judged variant, as the run's live status says it."""
    head = f"tune: {number} of {total} variants judged; {variant.name}"
    if variant.timed:
        return f"{head}: {variant.profile.get('speedup_vs_eager') or 0:.2f}x vs eager"
    return f"{head}: not timed ({variant.why()[:120]})"


def _why(verdict: dict) -> str:
    violations = verdict.get("violations") or []
    if violations:
        first = violations[0]
        return f"{first.get('code')}: {first.get('detail', '')}"[:300]
    return str(verdict.get("error") or "failed")[:300].splitlines()[0]
