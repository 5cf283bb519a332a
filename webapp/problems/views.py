"""The problem pages: list, upload, detail (source, validation, runs), the Optimize form and
the form that submits a person's own kernel."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from gpu_workers.harness.problem_source import ProblemError
from webapp.highlight import highlight
from webapp.problems.forms import OptimizeForm, ProblemForm, SubmissionForm
from webapp.problems.models import Problem, ProblemStatus
from webapp.problems.upload import upload_problem
from webapp.runs import lifecycle
from webapp.runs.models import Run
from webapp.runs.submission import (
    MAX_FILE_BYTES,
    MAX_FILES,
    BadSubmission,
    files_from_uploads,
)

# While a problem is in these states its page polls the API and reloads when the state moves.
IN_PROGRESS = (ProblemStatus.PENDING, ProblemStatus.VALIDATING)


def _visible_problem(request: HttpRequest, problem_id: int) -> Problem:
    visible = Problem.objects.visible_to(request.user).select_related("owner")
    problem = visible.filter(pk=problem_id).first()
    if problem is None:
        raise Http404(f"There is no problem {problem_id} that you can see.")
    return problem


def problem_list(request: HttpRequest) -> HttpResponse:
    problems = Problem.objects.visible_to(request.user).select_related("owner")
    mine = request.user.is_authenticated and request.GET.get("mine") == "1"
    if mine:
        problems = problems.filter(owner=request.user)
    page = Paginator(problems.defer("source"), 50).get_page(request.GET.get("page"))
    return render(request, "problems/list.html", {"page": page, "mine": mine})


@login_required
def problem_new(request: HttpRequest) -> HttpResponse:
    posted = request.method == "POST"
    form = ProblemForm(request.POST, request.FILES) if posted else ProblemForm()
    if posted and form.is_valid():
        data = form.cleaned_data
        try:
            problem, created = upload_problem(
                request.user, data["title"], data["source"], data["visibility"]
            )
        except ProblemError as exc:
            form = _keep_source(form, data["source"])
            form.add_error(None, str(exc))
        else:
            if not created:
                messages.info(request, "You uploaded this source before: here it is.")
            return redirect("problem_detail", problem.pk)
    context = {"form": form, "max_kib": settings.PROBLEM_MAX_BYTES // 1024}
    return render(request, "problems/new.html", context, status=422 if form.errors else 200)


def _keep_source(form: ProblemForm, source: str) -> ProblemForm:
    """The form again with an uploaded file's text in the textarea, to fix it in place."""
    if not form.cleaned_data.get("file"):
        return form
    data = form.data.copy()
    data["source"] = source
    kept = ProblemForm(data)
    kept.is_valid()
    return kept


def problem_detail(request: HttpRequest, problem_id: int) -> HttpResponse:
    problem = _visible_problem(request, problem_id)
    return _render_detail(request, problem, OptimizeForm())


@login_required
def problem_optimize(request: HttpRequest, problem_id: int) -> HttpResponse:
    problem = _visible_problem(request, problem_id)
    if request.method != "POST":  # e.g. back here after logging in
        return redirect("problem_detail", problem.pk)
    form = OptimizeForm(request.POST)
    if form.is_valid():
        options = form.cleaned_data
        try:
            run = lifecycle.start_run(
                request.user, problem, options["agent"], options["gpu_type"], options["protocol"]
            )
        except lifecycle.BadRunOption as exc:
            form.add_error(None, str(exc))
            return _render_detail(request, problem, form, status=422)
        except lifecycle.RateLimited as exc:
            form.add_error(None, str(exc))
            return _render_detail(request, problem, form, status=429)
        except lifecycle.RunRefused as exc:
            form.add_error(None, str(exc))
            return _render_detail(request, problem, form, status=409)
        return redirect("run_detail", run.pk)
    return _render_detail(request, problem, form, status=422)


@login_required
def problem_submit(request: HttpRequest, problem_id: int) -> HttpResponse:
    """A person's own kernel, uploaded: queued as a submission run, then its page."""
    problem = _visible_problem(request, problem_id)
    if request.method != "POST":  # e.g. back here after logging in
        return redirect("problem_detail", problem.pk)
    form = SubmissionForm(request.POST, request.FILES)

    def refused(reasons: str | list[str], status: int) -> HttpResponse:
        form.add_error(None, reasons)
        return _render_detail(request, problem, submission_form=form, status=status)

    if not form.is_valid():
        return _render_detail(request, problem, submission_form=form, status=422)
    options = form.cleaned_data
    try:
        files = files_from_uploads(form.uploads())
        run = lifecycle.start_submission(
            request.user, problem, files, options["gpu_type"], options["protocol"]
        )
    except BadSubmission as exc:
        return refused(exc.problems, 422)  # one line per file to fix
    except lifecycle.BadRunOption as exc:
        return refused(str(exc), 422)
    except lifecycle.RateLimited as exc:
        return refused(str(exc), 429)
    except lifecycle.RunRefused as exc:
        return refused(str(exc), 409)
    return redirect("run_detail", run.pk)


def _render_detail(
    request: HttpRequest,
    problem: Problem,
    form: OptimizeForm | None = None,
    status: int = 200,
    submission_form: SubmissionForm | None = None,
) -> HttpResponse:
    runs = Run.objects.visible_to(request.user).filter(problem=problem).select_related("problem")
    intensity = None
    if problem.flops is not None and problem.bytes_moved:
        intensity = problem.flops / problem.bytes_moved
    context = {
        "problem": problem,
        "flops": _count(problem.flops),
        "bytes_moved": _count(problem.bytes_moved),
        "source_html": highlight(problem.source, "model.py"),
        "in_progress": problem.status in IN_PROGRESS,
        "intensity": intensity,
        "runs": runs[:100],
        "form": form or OptimizeForm(),
        "submission_form": submission_form or SubmissionForm(),
        "max_file_kib": MAX_FILE_BYTES // 1024,
        "max_files": MAX_FILES,
    }
    return render(request, "problems/detail.html", context, status=status)


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"
