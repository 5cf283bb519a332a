"""The downloadable bundle of a candidate: its sources, the problem, the read-only binding files,
a standalone build.py that compiles and checks them with torch alone, a report and a README.

Everything sits under one top-level folder named like the zip. Entries are written in a fixed
order with a fixed timestamp, so the same candidate always gives the same bytes. The web process
builds bundles without torch: the skills/ templates and build.py are read as plain text.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.http import HttpResponse

from gpu_workers.harness.vocabulary import (
    PROTOCOL_NAMES,
    PROTOCOL_TOLERANCES,
    device_for,
    sources_digest,
)
from webapp.runs.models import Candidate, EventKind, Run

FORMAT = "kernelarena.bundle/1"
BUILD_SCRIPT = Path(__file__).with_name("bundle_build.py")
TEMPLATE_FILES = ("binding.cpp", "binding_registry.h")
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can hold: the bytes never vary
_SAFE_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def bundle_filename(candidate: Candidate) -> str:
    """e.g. kernelarena-run12-candidate3.zip (the run's id, the candidate's seq in that run)."""
    return f"{_folder(candidate)}.zip"


def _folder(candidate: Candidate) -> str:
    return f"kernelarena-run{candidate.run_id}-candidate{candidate.seq}"


def safe_source_path(path: object) -> str | None:
    """The normalised relative path of a stored source that may go in the bundle (model_new.py
    or a file under kernels/), or None: absolute paths, `..`, backslashes, odd characters and
    anything else are dropped, so no entry can land outside the bundle's folder."""
    if not isinstance(path, str) or not path or "\\" in path or "\0" in path:
        return None
    rel = PurePosixPath(path)
    if rel.is_absolute() or not all(_SAFE_PART.match(part) for part in rel.parts):
        return None
    name = rel.as_posix()
    if name == "model_new.py" or (len(rel.parts) >= 2 and rel.parts[0] == "kernels"):
        return name
    return None


def candidate_files(candidate: Candidate) -> dict[str, str]:
    """model_new.py and kernels/… from the candidate's sources, by safe relative path."""
    sources = candidate.sources if isinstance(candidate.sources, dict) else {}
    files: dict[str, str] = {}
    for path, text in sources.items():
        rel = safe_source_path(path)
        if rel is not None and isinstance(text, str):
            files[rel] = text
    return files


def _verdict(candidate: Candidate) -> dict:
    return candidate.verdict if isinstance(candidate.verdict, dict) else {}


def _section(verdict: dict, name: str) -> dict:
    value = verdict.get(name)
    return value if isinstance(value, dict) else {}


def _protocol(run: Run, verdict: dict) -> dict:
    recorded = verdict.get("protocol")
    if isinstance(recorded, dict) and recorded:
        return recorded
    # A verdict that recorded no protocol: its run's, or the default's tolerance.
    default = PROTOCOL_TOLERANCES[PROTOCOL_NAMES[0]]
    tolerance = PROTOCOL_TOLERANCES.get(run.protocol, default)
    return {"name": run.protocol, "atol": tolerance, "rtol": tolerance}


def _iso(moment) -> str | None:
    return moment.isoformat() if moment is not None else None


def _agent_identity(run: Run):
    """The payload["agent"] of the run's first status event that names one."""
    payload = (
        run.events.filter(kind=EventKind.STATUS, payload__has_key="agent")
        .order_by("seq")
        .values_list("payload", flat=True)
        .first()
    )
    return payload.get("agent") if isinstance(payload, dict) else None


def _turns(run: Run) -> int | None:
    """The turn of the run's last event that records one (turns only go up)."""
    payload = (
        run.events.filter(payload__has_key="turn")
        .order_by("-seq")
        .values_list("payload", flat=True)
        .first()
    )
    turn = payload.get("turn") if isinstance(payload, dict) else None
    return turn if isinstance(turn, int) else None


def _trajectory(run: Run) -> dict:
    candidates = []
    for other in run.candidates.order_by("seq"):
        profile = _section(_verdict(other), "profile")
        candidates.append(
            {
                "seq": other.seq,
                "verified": other.verified,
                "speedup_vs_eager": profile.get("speedup_vs_eager"),
                "speedup_vs_compile": other.speedup_vs_compile,
            }
        )
    return {"turns": _turns(run), "status": run.status, "candidates": candidates}


def build_report(candidate: Candidate) -> dict:
    """What report.json holds: the run, problem, candidate, verdict and the run's trajectory."""
    run = candidate.run
    problem = run.problem
    verdict = _verdict(candidate)
    return {
        "format": FORMAT,
        "run": {
            "id": run.pk,
            "agent": run.agent,
            "gpu_type": run.gpu_type,
            "protocol": run.protocol,
            "status": run.status,
            "prompt_tokens": run.prompt_tokens,
            "completion_tokens": run.completion_tokens,
            "cost_dollars": run.cost_dollars,
            "started": _iso(run.started),
            "finished": _iso(run.finished),
        },
        "problem": {"id": problem.pk, "title": problem.title, "sha256": problem.sha256},
        "candidate": {
            "seq": candidate.seq,
            "verified": candidate.verified,
            "speedup_vs_compile": candidate.speedup_vs_compile,
        },
        "target": device_for(run.gpu_type),
        "verdict": verdict,
        "protocol": _protocol(run, verdict),
        "environment": _section(verdict, "environment"),
        "agent": _agent_identity(run),
        "trajectory": _trajectory(run),
    }


def _speedup(value) -> str | None:
    return f"{value:.2f}x" if isinstance(value, int | float) else None


def build_readme(candidate: Candidate, report: dict, files: list[str]) -> str:
    run = candidate.run
    profile = _section(report["verdict"], "profile")
    environment = report["environment"]
    protocol = report["protocol"]
    verified = "verified" if candidate.verified else "NOT verified"
    lines = [
        f"# {run.problem.title}: KernelArena run {run.pk}, candidate {candidate.seq}",
        "",
        f"A {report['target']} kernel written by agent `{run.agent}` ({verified} by the harness "
        f"under protocol `{protocol.get('name', run.protocol)}`).",
        "",
        "Inside: `model.py` (the problem: Model, get_inputs, get_init_inputs), `model_new.py`",
        "(ModelNew, which calls `kernel_ext`), " + ", ".join(f"`{f}`" for f in files) + ",",
        "`binding.cpp` + `binding_registry.h` (the module definition), `build.py`, `report.json`",
        "(the run, the harness's full verdict and the trajectory).",
        "",
        "    python build.py                    # build kernel_ext into build/, import model_new",
        "    python build.py --verify [--device cpu|cuda]   # also check ModelNew against Model",
        "",
        "Needs torch and ninja (and nvcc for cuda). `--verify` exits 0 when all trials match, 1 on "
        "a mismatch, 2 when the build or an import fails.",
    ]
    measured = [
        f"{_speedup(profile.get(key))} vs {label}"
        for key, label in (
            ("speedup_vs_eager", "eager PyTorch"),
            ("speedup_vs_compile", "torch.compile"),
        )
        if _speedup(profile.get(key))
    ]
    if measured:
        device = environment.get("gpu") or environment.get("device") or report["target"]
        timing = ""
        if isinstance(profile.get("candidate_ms"), int | float):
            timing = f" ({profile['candidate_ms']:.4g} ms per call)"
        lines += ["", f"Measured on {device}: {', '.join(measured)}{timing}."]
    else:
        lines += ["", "No timing was recorded for this candidate."]
    return "\n".join(lines) + "\n"


def _template(target: str, name: str) -> str:
    return (Path(settings.BASE_DIR) / "skills" / target / name).read_text()


def _write(archive: zipfile.ZipFile, path: str, text: str, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(path, date_time=_ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100000 | mode) << 16  # a regular file with these permissions
    info.create_system = 3  # unix, so the permissions are honoured
    archive.writestr(info, text.encode())


class NotTheJudgedSources(ValueError):
    """The candidate's stored sources are not those its verify verdict judged."""


def check_judged(candidate: Candidate) -> None:
    """Refuses sources whose digest differs from the one the verify or profile verdict recorded
    (agent/tools.py stamps it; a verdict from before it did has none to compare)."""
    verdict = _verdict(candidate)
    stored = candidate.sources if isinstance(candidate.sources, dict) else {}
    digest = sources_digest(stored)
    for step in ("verify", "profile"):
        judged = _section(verdict, step).get("sources_digest")
        if judged is not None and judged != digest:
            raise NotTheJudgedSources(
                f"candidate {candidate.seq} of run {candidate.run_id}: its sources (digest "
                f"{digest[:12]}) are not the ones its {step} verdict judged ({str(judged)[:12]}); "
                "no bundle is built from them"
            )


def build_bundle(candidate: Candidate) -> bytes:
    """The zip of a candidate, ready to download, from the very sources that were judged."""
    check_judged(candidate)
    run = candidate.run
    target = device_for(run.gpu_type)
    sources = candidate_files(candidate)
    report = build_report(candidate)
    kernels = sorted(p for p in sources if p != "model_new.py")
    entries = {
        "README.md": build_readme(candidate, report, kernels),
        "report.json": json.dumps(report, indent=2, ensure_ascii=False) + "\n",
        "model.py": run.problem.source,
        **{name: _template(target, name) for name in TEMPLATE_FILES},
        **sources,
    }
    folder = _folder(candidate)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        _write(archive, f"{folder}/build.py", BUILD_SCRIPT.read_text(), mode=0o755)
        for name in sorted(entries):
            _write(archive, f"{folder}/{name}", entries[name])
    return buffer.getvalue()


def bundle_response(candidate: Candidate) -> HttpResponse:
    """The zip as a download, for the page and the API alike; 409 with the reason for sources
    that were not the judged ones."""
    try:
        data = build_bundle(candidate)
    except NotTheJudgedSources as refused:
        return HttpResponse(str(refused), status=409, content_type="text/plain")
    response = HttpResponse(data, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{bundle_filename(candidate)}"'
    return response
