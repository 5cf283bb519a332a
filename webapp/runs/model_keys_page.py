"""The Model keys page: a person saves, replaces or removes their own API key for an agent that
takes one. A saved key is never shown again, not even to its owner: only its last characters."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from webapp.errors import RequestRefused, refuse_on_form
from webapp.runs import model_keys


class ModelKeyForm(forms.Form):
    agent = forms.ChoiceField()
    key = forms.CharField(
        label="API key",
        max_length=model_keys.MAX_KEY_LENGTH,
        widget=forms.PasswordInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = [(a, a) for a in model_keys.agents_taking_keys()]


@never_cache
@login_required
def model_keys_page(request: HttpRequest) -> HttpResponse:
    """GET lists the person's keys; POST saves one (action=save) or removes one (action=remove)."""
    form = ModelKeyForm()
    if request.method == "POST" and request.POST.get("action") == "remove":
        agent = request.POST.get("agent", "")
        if model_keys.remove_key(request.user, agent):
            messages.success(request, f"Removed your key for {agent}: its runs use the operator's.")
        return redirect("model_keys")
    status = 200
    if request.method == "POST":
        form = ModelKeyForm(request.POST)
        status = 422
        if form.is_valid():
            agent = form.cleaned_data["agent"]
            try:
                model_keys.save_key(request.user, agent, form.cleaned_data["key"])
            except RequestRefused as refusal:
                status = refuse_on_form(form, refusal)
            else:
                messages.success(request, f"Saved your key for {agent}, encrypted.")
                return redirect("model_keys")
    context = {
        "form": form,
        "keys": model_keys.keys_of(request.user),
        "agents": model_keys.agents_taking_keys(),
    }
    return render(request, "runs/model_keys.html", context, status=status)
