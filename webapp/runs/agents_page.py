"""The staff page of agents: every configured agent, its endpoint and model, and its latest check
(webapp/runs/agent_readiness.py); a button asks a worker to check again."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from agent.config import MODEL_BACKENDS
from webapp.dispatch import send_after_commit
from webapp.runs.agent_readiness import agent_rows


@staff_member_required
def agents_page(request: HttpRequest) -> HttpResponse:
    rows = agent_rows(request.user)
    if request.method == "POST":
        checkable = [row.name for row in rows if row.backend in MODEL_BACKENDS]
        asked = request.POST.get("agent")
        names = [asked] if asked in checkable else checkable
        send_after_commit("check_agents", names)
        messages.success(
            request, f"Asked a worker to check {', '.join(names)}: reload in a minute."
        )
        return redirect("agents")
    return render(request, "runs/agents.html", {"rows": rows, "model_backends": MODEL_BACKENDS})
