"""The forms that start work on a problem: an agent's run (OptimizeForm) and a person's own
kernel (SubmissionForm); both are shown on the problem's page (webapp.runs.problem_page)."""

from __future__ import annotations

from django import forms

from webapp.runs import choices


def default_agent(agents: list[str]) -> str:
    """The built-in fusion agent when installed, else the scripted demo, else the first."""
    for name in ("fusion", "scripted-demo"):
        if name in agents:
            return name
    return agents[0] if agents else ""


class OptimizeForm(forms.Form):
    """What a run starts with. The values are checked by lifecycle.start_run (BadRunOption,
    AgentNotReady), so the fields are plain text with the known values offered as selects; an
    agent that cannot run for the person now (`unavailable`, agent_readiness) stays offered,
    marked with why, so that choosing it shows the whole reason and its fix."""

    agent = forms.CharField(max_length=100)
    gpu_type = forms.CharField(max_length=40, label="GPU type")
    protocol = forms.CharField(max_length=40)

    def __init__(self, *args, unavailable: dict | None = None, **kwargs):
        agents, gpu_types, protocols = (
            choices.agent_names(),
            choices.gpu_types(),
            choices.protocols(),
        )
        kwargs.setdefault(
            "initial",
            {"agent": default_agent(agents), "gpu_type": gpu_types[0], "protocol": protocols[0]},
        )
        super().__init__(*args, **kwargs)
        self.unavailable = unavailable or {}
        for name, values in (("gpu_type", gpu_types), ("protocol", protocols)):
            self.fields[name].widget = forms.Select(choices=[(v, v) for v in values])
        self.fields["agent"].widget = forms.Select(choices=[(a, self._label(a)) for a in agents])
        self.fusion_available = "fusion" in agents

    def _label(self, agent: str) -> str:
        why = self.unavailable.get(agent)
        return agent if why is None else f"{agent} (unavailable: {why.short})"


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Any number of files (Django's documented pattern): cleaned to a list."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        if isinstance(data, list | tuple):
            return [super(MultipleFileField, self).clean(item, initial) for item in data]
        return [super().clean(data, initial)] if data else []


class SubmissionForm(forms.Form):
    """A person's own kernel: model_new.py and kernel files, uploaded. Each file's name decides
    its path (webapp.runs.submission.path_for_upload); what makes a good submission and which
    options exist are lifecycle.start_submission's business (it raises with what to fix), so the
    file fields are optional here and the options are plain text offered as selects."""

    model_new = forms.FileField(required=False, label="model_new.py")
    kernels = MultipleFileField(required=False, label="Kernel files")
    gpu_type = forms.CharField(max_length=40, label="GPU type")
    protocol = forms.CharField(max_length=40)

    def __init__(self, *args, **kwargs):
        gpu_types, protocols = choices.gpu_types(), choices.protocols()
        kwargs.setdefault("initial", {"gpu_type": gpu_types[0], "protocol": protocols[0]})
        kwargs.setdefault("prefix", "submit")
        super().__init__(*args, **kwargs)
        for name, values in (("gpu_type", gpu_types), ("protocol", protocols)):
            self.fields[name].widget = forms.Select(choices=[(v, v) for v in values])

    def uploads(self) -> list:
        """Every chosen file, model_new.py's first."""
        model_new = self.cleaned_data.get("model_new")
        return ([model_new] if model_new else []) + list(self.cleaned_data.get("kernels") or [])


class RunFilterForm(forms.Form):
    """My runs' filters, read from the query string. The values are checked by
    run_filters.filtered_runs (BadRunOption lists what exists), as the API's are; the fields
    offer the values the person's runs have as selects, "any" first."""

    status = forms.CharField(max_length=12, required=False)
    agent = forms.CharField(max_length=100, required=False)
    gpu_type = forms.CharField(max_length=40, required=False, label="GPU type")
    problem = forms.IntegerField(min_value=1, required=False)

    def __init__(self, *args, statuses=(), agents=(), gpu_types=(), problems=(), **kwargs):
        super().__init__(*args, **kwargs)
        offered = {"status": statuses, "agent": agents, "gpu_type": gpu_types}
        for name, values in offered.items():
            self.fields[name].widget = forms.Select(
                choices=[("", "any"), *((v, v) for v in values)]
            )
        problem_choices = [(p.pk, f"#{p.pk} {p.title}") for p in problems]
        self.fields["problem"].widget = forms.Select(choices=[("", "any"), *problem_choices])

    def filters(self) -> dict:
        """The chosen filters, without the empty ones (RunFilters' keywords)."""
        return {name: value for name, value in self.cleaned_data.items() if value not in ("", None)}
