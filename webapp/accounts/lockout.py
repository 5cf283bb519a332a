"""Lock-outs after repeated failures (django-axes; settings.py, "Failed log-ins"): the log-in page
and the API say when to try again."""

from __future__ import annotations

from math import ceil

from axes.helpers import get_cool_off
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from webapp.error_pages import api_error, is_api_request


def when_to_try_again(request: HttpRequest) -> str:
    # Each try while locked out starts the cool-off again, so it runs from now.
    cool_off = get_cool_off(request)
    until = timezone.now() + cool_off
    return f"try again after {until:%H:%M} UTC (in {ceil(cool_off.total_seconds() / 60)} minutes)"


def bad_tokens_message(request: HttpRequest) -> str:
    return f"too many bad API tokens from your address: {when_to_try_again(request)}"


def locked_out(request: HttpRequest, *_: object) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the answer to the failure that reached the limit, and to every try
    while locked out. Axes passes (request, response, credentials), or (request, credentials)
    under ASGI: neither is needed."""
    if is_api_request(request):
        return api_error(429, bad_tokens_message(request))
    username = request.POST.get("username", "")
    context = {
        "form": AuthenticationForm(request, initial={"username": username}),
        "next": request.POST.get("next", ""),
        "locked_out": (
            f"Too many failed log-ins as {username} from your address: "
            f"{when_to_try_again(request)}."
        ),
    }
    return render(request, "accounts/login.html", context, status=429)
