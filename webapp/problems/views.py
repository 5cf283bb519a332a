"""The problem pages: the list and the upload form. A problem's own page, which starts runs on
it, is webapp.runs.problem_page."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from gpu_workers.harness.problem_source import ProblemError
from webapp.errors import RequestRefused, refuse_on_form, unknown_value
from webapp.problems.forms import ProblemForm
from webapp.problems.models import Problem, ProblemStatus
from webapp.problems.upload import upload_problem


def problem_list(request: HttpRequest) -> HttpResponse:
    """Public problems and the person's own; "Yours" (?mine=1, the header's My problems) and a
    state (?status=) narrow it. A state that names nothing is said (422), never ignored."""
    problems = Problem.objects.visible_to(request.user).select_related("owner")
    mine = request.user.is_authenticated and request.GET.get("mine") == "1"
    status = request.GET.get("status") or None
    refusal, code = "", 200
    if status is not None and status not in ProblemStatus.values:
        refusal = unknown_value("status", status, ProblemStatus.values)
        problems, code = problems.none(), 422
    problems = problems.filtered(request.user, status=None if refusal else status, mine=mine)
    page = Paginator(problems.defer("source"), 50).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "mine": mine,
        "status": status,
        "statuses": ProblemStatus.values,
        "refusal": refusal,
    }
    return render(request, "problems/list.html", context, status=code)


@login_required
def problem_new(request: HttpRequest) -> HttpResponse:
    posted = request.method == "POST"
    form = ProblemForm(request.POST, request.FILES) if posted else ProblemForm()
    status = 422 if posted else 200  # unless it is stored, or refused for a limit
    if posted and form.is_valid():
        data = form.cleaned_data
        try:
            problem, created = upload_problem(
                request.user, data["title"], data["source"], data["visibility"]
            )
        except ProblemError as exc:
            form = _keep_source(form, data["source"])
            form.add_error(None, str(exc))
        except RequestRefused as refusal:  # the limit of problems waiting for validation
            form = _keep_source(form, data["source"])
            status = refuse_on_form(form, refusal)
        else:
            if not created:
                messages.info(request, "You uploaded this source before: here it is.")
            return redirect("problem_detail", problem.pk)
    context = {"form": form, "max_kib": settings.PROBLEM_MAX_BYTES // 1024}
    return render(request, "problems/new.html", context, status=status)


def _keep_source(form: ProblemForm, source: str) -> ProblemForm:
    """The form again with an uploaded file's text in the textarea, to fix it in place."""
    if not form.cleaned_data.get("file"):
        return form
    data = form.data.copy()
    data["source"] = source
    kept = ProblemForm(data)
    kept.is_valid()
    return kept
