"""The run pages: My runs (the signed-in person's runs, filtered), the live run (its trace is
drawn by static/js/run_trace.js), a candidate's verdict, sources and diff, cancelling, and bundle
downloads."""

from __future__ import annotations

import difflib
import json
import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from webapp.durations import duration
from webapp.errors import RequestRefused, refuse_on_form
from webapp.highlight import highlight
from webapp.problems.models import Problem
from webapp.runs import lifecycle, run_filters
from webapp.runs.bundle import bundle_response
from webapp.runs.forms import RunFilterForm
from webapp.runs.models import ACTIVE, Candidate, EventKind, Run, RunStatus, TraceEvent
from webapp.work_kinds import GRADE, RUN

MY_RUNS_PER_PAGE = 25


def _visible_run(request: HttpRequest, run_id: int) -> Run:
    runs = Run.objects.visible_to(request.user).select_related("problem", "owner", "best_candidate")
    run = runs.filter(pk=run_id).first()
    if run is None:
        raise Http404(f"There is no run {run_id} that you can see.")
    return run


def _candidate(run: Run, seq: int) -> Candidate:
    candidate = Candidate.objects.filter(run=run, seq=seq).first()
    if candidate is None:
        raise Http404(f"Run {run.pk} has no candidate {seq}.")
    return candidate


@login_required
def my_runs(request: HttpRequest) -> HttpResponse:
    """The person's own runs, newest first, filtered by status, agent, GPU type and problem;
    a filter value that names nothing is shown on the form (422), never ignored."""
    mine = Run.objects.filter(owner=request.user)
    form = RunFilterForm(
        request.GET,
        statuses=RunStatus.values,
        agents=run_filters.agents_of(mine),
        gpu_types=run_filters.gpu_types_of(mine),
        problems=Problem.objects.filter(runs__owner=request.user).distinct().only("title"),
    )
    runs, status = Run.objects.none(), 422
    if form.is_valid():
        filters = run_filters.RunFilters(**form.filters())
        try:
            runs, status = run_filters.filtered_runs(mine, request.user, filters), 200
        except RequestRefused as refusal:
            status = refuse_on_form(form, refusal)
    runs = runs.select_related("problem", "grade").defer("problem__source", "submitted_sources")
    page = Paginator(runs, MY_RUNS_PER_PAGE).get_page(request.GET.get("page"))
    for run in page:
        seconds = _elapsed(run)
        run.elapsed_text = "" if seconds is None else duration(seconds)
    filtered = any(form.data.get(name) for name in form.fields)
    context = {"page": page, "form": form, "filtered": filtered}
    return render(request, "runs/mine.html", context, status=status)


def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _visible_run(request, run_id)
    candidates = run.candidates.defer("sources").order_by("seq")
    context = {
        "run": run,
        "can_cancel": run.status in ACTIVE and run.owner_id == request.user.pk,
        "elapsed": _elapsed(run),
        "tokens": f"{run.prompt_tokens + run.completion_tokens:,}",
        "progress": _last_progress(run),
        "candidates": [_candidate_row(c) for c in candidates],
        "has_bundle": run.best_candidate is not None and run.best_candidate.verified,
        "time_limit": RUN.limit_text(),
        "queue_position": run.queue_position(),
        "regrade_limit": GRADE.limit_text(),
        "headline": run.headline,
    }
    return render(request, "runs/detail.html", context)


@require_POST
@login_required
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _visible_run(request, run_id)
    if run.owner_id != request.user.pk:
        raise PermissionDenied(
            f"Run {run.pk} belongs to {run.owner.username}: only they can cancel it."
        )
    try:
        lifecycle.cancel_run(run)
    except lifecycle.RunRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Run {run.pk} is cancelled.")
    return redirect("run_detail", run.pk)


def candidate_detail(request: HttpRequest, run_id: int, seq: int) -> HttpResponse:
    run = _visible_run(request, run_id)
    candidate = _candidate(run, seq)
    previous = run.candidates.filter(seq__lt=seq).order_by("-seq").first()
    sources = _sources(candidate)
    old = _sources(previous) if previous is not None else None
    files = [
        {
            "path": path,
            "html": highlight(text, path),
            "lines": len(text.splitlines()),
            "diff": None if old is None else _diff(old.get(path, ""), text, path, previous, seq),
            "added": old is not None and path not in old,
        }
        for path, text in sources.items()
    ]
    later = run.candidates.filter(seq__gt=seq).order_by("seq")
    removed = [
        {"path": path, "diff": _diff(text, "", path, previous, seq)}
        for path, text in (old or {}).items()
        if path not in sources
    ]
    context = {
        "run": run,
        "candidate": candidate,
        "previous": previous,
        "next": later.values_list("seq", flat=True).first(),
        "verdict": _verdict(candidate.verdict),
        "files": files,
        "removed": removed,
    }
    return render(request, "runs/candidate.html", context)


def run_bundle(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _visible_run(request, run_id)
    if run.best_candidate is None or not run.best_candidate.verified:
        raise Http404(
            f"Run {run.pk} has no verified candidate, so there is no bundle to download"
            f"{' yet' if run.status in ACTIVE else ''}."
        )
    return bundle_response(run.best_candidate)


def candidate_bundle(request: HttpRequest, run_id: int, seq: int) -> HttpResponse:
    """Only verified candidates download, as from the API: a bundle is a kernel that works."""
    candidate = _candidate(_visible_run(request, run_id), seq)
    if not candidate.verified:
        raise Http404(f"Candidate {seq} of run {run_id} did not verify: it has no bundle.")
    return bundle_response(candidate)


# ---- presentation ------------------------------------------------------------------------------


def _elapsed(run: Run) -> float | None:
    """Seconds the run has been running (until it ended), or None before a worker took it."""
    if run.started is None:
        return None
    return ((run.finished or timezone.now()) - run.started).total_seconds()


def _last_progress(run: Run) -> dict:
    """turn, max_turns and the like from the newest status event that has them, so the header
    is right before the page script has replayed the trace."""
    recent = TraceEvent.objects.filter(run=run, kind=EventKind.STATUS).order_by("-seq")[:50]
    for payload in recent.values_list("payload", flat=True):
        if isinstance(payload, dict) and "max_turns" in payload:
            return payload
    return {}


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _candidate_row(candidate: Candidate) -> dict:
    verdict = _dict(candidate.verdict)
    verify, profile = _dict(verdict.get("verify")), _dict(verdict.get("profile"))
    # Why it did not verify, or was not timed: beside "no" or "verified" in the table (a
    # column of its own was empty for every candidate that passed)
    issues = [
        f"{v.get('code')}: {v.get('detail')}"
        for part in (verify, profile)
        for v in part.get("violations") or []
        if isinstance(v, dict)
    ]
    issues += [_last_line(part["error"]) for part in (verify, profile) if part.get("error")]
    return {
        "seq": candidate.seq,
        "verified": candidate.verified,
        "speedup_vs_eager": profile.get("speedup_vs_eager"),
        "speedup_vs_compile": candidate.speedup_vs_compile,
        "sol_fraction": profile.get("sol_fraction"),
        "issue": issues[0] if issues else "",
    }


def _last_line(text) -> str:
    """A traceback's last line says what went wrong."""
    lines = str(text).strip().splitlines()
    return lines[-1] if lines else ""


def _sources(candidate: Candidate) -> dict[str, str]:
    """path -> text, model_new.py first, then the rest by path."""
    sources = {p: t for p, t in _dict(candidate.sources).items() if isinstance(t, str)}
    return dict(sorted(sources.items(), key=lambda item: (item[0] != "model_new.py", item[0])))


def _diff(old: str, new: str, path: str, previous: Candidate, seq: int) -> list[tuple[str, str]]:
    """A unified diff as (css class, line) pairs; empty when nothing changed."""
    lines = difflib.unified_diff(
        old.splitlines(),
        new.splitlines(),
        f"candidate {previous.seq}/{path}",
        f"candidate {seq}/{path}",
        lineterm="",
    )
    return [(_diff_class(line), line) for line in lines]


def _diff_class(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "meta"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "ctx")


def _verdict(verdict) -> dict:
    verdict = _dict(verdict)
    verify, profile = _dict(verdict.get("verify")), _dict(verdict.get("profile"))
    compiled = _dict(verdict.get("compile"))
    violations = [
        {"stage": stage, "code": v.get("code"), "detail": v.get("detail")}
        for stage, part in (("verify", verify), ("profile", profile))
        for v in part.get("violations") or []
        if isinstance(v, dict)
    ]
    errors = [
        (stage, part["error"])
        for stage, part in (("verify", verify), ("profile", profile))
        if part.get("error")
    ]
    return {
        "verify": verify,
        "profile": profile,
        "violations": violations,
        "errors": errors,
        "compile_log": _log_lines(compiled.get("log")),
        "environment": _pairs(verdict.get("environment")),
        "protocol": _pairs(verdict.get("protocol")),
    }


_ERROR_LINE = re.compile(r"\b(error|fatal)\b|FAILED", re.IGNORECASE)


def _log_lines(log) -> list[tuple[bool, str]]:
    """(is an error line, line) for a compile log: errors are shown in red."""
    if not isinstance(log, str):
        return []
    return [(bool(_ERROR_LINE.search(line)), line) for line in log.splitlines()]


def _pairs(value) -> list[tuple[str, str]]:
    return [
        (str(key), item if isinstance(item, str) else json.dumps(item, sort_keys=True))
        for key, item in sorted(_dict(value).items())
    ]
