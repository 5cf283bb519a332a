"""A problem's page: its source, validation and runs, with the forms that start an agent's run
(Optimize) or queue a person's own kernel (Submit). It lives with the runs because it starts them;
the problem list and upload pages are webapp.problems.views."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from webapp.durations import duration
from webapp.errors import RequestRefused, refuse_on_form
from webapp.highlight import highlight
from webapp.problems import validation
from webapp.problems.models import Problem, ProblemStatus
from webapp.runs import lifecycle
from webapp.runs.agent_readiness import unavailable_agents
from webapp.runs.forms import OptimizeForm, SubmissionForm
from webapp.runs.models import Run
from webapp.runs.submission import MAX_FILE_BYTES, MAX_FILES, files_from_uploads
from webapp.work_kinds import VALIDATE

# While a problem is in these states its page polls the API and reloads when the state moves.
IN_PROGRESS = (ProblemStatus.PENDING, ProblemStatus.VALIDATING)


def _visible_problem(request: HttpRequest, problem_id: int) -> Problem:
    visible = Problem.objects.visible_to(request.user).select_related("owner")
    problem = visible.filter(pk=problem_id).first()
    if problem is None:
        raise Http404(f"There is no problem {problem_id} that you can see.")
    return problem


def problem_detail(request: HttpRequest, problem_id: int) -> HttpResponse:
    problem = _visible_problem(request, problem_id)
    return _render_detail(request, problem, _optimize_form(request))


@login_required
def problem_optimize(request: HttpRequest, problem_id: int) -> HttpResponse:
    problem = _visible_problem(request, problem_id)
    if request.method != "POST":  # e.g. back here after logging in
        return redirect("problem_detail", problem.pk)
    form = _optimize_form(request, request.POST)
    if form.is_valid():
        options = form.cleaned_data
        try:
            run = lifecycle.start_run(
                request.user, problem, options["agent"], options["gpu_type"], options["protocol"]
            )
        except RequestRefused as refusal:
            return _render_detail(request, problem, form, status=refuse_on_form(form, refusal))
        return redirect("run_detail", run.pk)
    return _render_detail(request, problem, form, status=422)


@login_required
def problem_submit(request: HttpRequest, problem_id: int) -> HttpResponse:
    """A person's own kernel, uploaded: queued as a submission run, then its page."""
    problem = _visible_problem(request, problem_id)
    if request.method != "POST":  # e.g. back here after logging in
        return redirect("problem_detail", problem.pk)
    form = SubmissionForm(request.POST, request.FILES)
    if not form.is_valid():
        return _render_detail(request, problem, submission_form=form, status=422)
    options = form.cleaned_data
    try:
        files = files_from_uploads(form.uploads())
        run = lifecycle.start_submission(
            request.user, problem, files, options["gpu_type"], options["protocol"]
        )
    except RequestRefused as refusal:  # a bad submission: one line per file to fix
        status = refuse_on_form(form, refusal)
        return _render_detail(request, problem, submission_form=form, status=status)
    return redirect("run_detail", run.pk)


def _render_detail(
    request: HttpRequest,
    problem: Problem,
    form: OptimizeForm | None = None,
    status: int = 200,
    submission_form: SubmissionForm | None = None,
) -> HttpResponse:
    runs = Run.objects.visible_to(request.user).filter(problem=problem)
    runs = runs.select_related("problem", "grade")
    intensity = None
    if problem.flops is not None and problem.bytes_moved:
        intensity = problem.flops / problem.bytes_moved
    context = {
        "problem": problem,
        "flops": _count(problem.flops),
        "bytes_moved": _count(problem.bytes_moved),
        "source_html": highlight(problem.source, "model.py"),
        "in_progress": problem.status in IN_PROGRESS,
        "validation": _validation_progress(problem),
        "intensity": intensity,
        "runs": runs[:100],
        "form": form or _optimize_form(request),
        "submission_form": submission_form or SubmissionForm(),
        "max_file_kib": MAX_FILE_BYTES // 1024,
        "max_files": MAX_FILES,
    }
    return render(request, "problems/detail.html", context, status=status)


def _optimize_form(request: HttpRequest, data=None) -> OptimizeForm:
    """The run form, its agents marked where this person cannot run them now."""
    return OptimizeForm(data, unavailable=unavailable_agents(request.user))


def _validation_progress(problem: Problem) -> dict:
    """While it waits or runs: the validation's time limit, its place in the queue (pending)
    or how long it has run (validating)."""
    elapsed = validation.validation_elapsed_s(problem)
    return {
        "limit": VALIDATE.limit_text(),
        "position": problem.queue_position(),
        "elapsed": None if elapsed is None else duration(elapsed),
        "elapsed_s": None if elapsed is None else round(elapsed),  # the page counts on from it
    }


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"
