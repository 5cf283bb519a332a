"""Sign-up and API tokens. Log in and out are Django's own views (accounts/urls.py)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from webapp.accounts.forms import TokenForm
from webapp.accounts.models import ApiToken
from webapp.accounts.tokens import issue_token


def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("home")
    posted = request.method == "POST"
    form = UserCreationForm(request.POST) if posted else UserCreationForm()
    if posted and form.is_valid():
        user = form.save()
        # Named because axes' backend comes first in AUTHENTICATION_BACKENDS and logs no one in.
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"Welcome, {user.username}: you are signed in.")
        return redirect("home")
    return render(request, "accounts/signup.html", {"form": form})


@never_cache  # the page that shows a token's plaintext must not sit in any cache
@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    """List the user's tokens; POST issues one and shows its plaintext in this response only."""
    posted = request.method == "POST"
    form = TokenForm(request.POST) if posted else TokenForm()
    plaintext = None
    if posted and form.is_valid():
        _, plaintext = issue_token(request.user, form.cleaned_data["name"])
        form = TokenForm()
    context = {
        "form": form,
        "plaintext": plaintext,
        "tokens": ApiToken.objects.filter(user=request.user).order_by("-created", "-id"),
    }
    return render(request, "accounts/tokens.html", context)


@require_POST
@login_required
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = ApiToken.objects.filter(pk=token_id, user=request.user).first()
    if token is None:  # someone else's token is as absent as one that never existed
        raise Http404(f"You have no API token {token_id}.")
    token.delete()
    messages.success(request, f"Revoked token {token.prefix}…: it no longer authenticates.")
    return redirect("tokens")
