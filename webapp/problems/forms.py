from __future__ import annotations

from pathlib import PurePath

from django import forms
from django.conf import settings

from webapp.problems.models import Visibility
from webapp.runs import choices


def _kib(size: int) -> str:
    return f"{size / 1024:.0f} KiB"


class ProblemForm(forms.Form):
    """A problem's source, pasted or uploaded as a .py file (the file wins when both are given).

    cleaned_data["source"] is the text to store, decoded and size-checked; what makes a valid
    problem is upload_problem's business (it raises ProblemError)."""

    title = forms.CharField(max_length=200, required=False, help_text="Defaults to the file name.")
    visibility = forms.ChoiceField(
        choices=Visibility.choices,
        initial=Visibility.PRIVATE,
        widget=forms.RadioSelect,
        help_text="Public problems, their runs and kernels are visible to everyone and count on "
        "the leaderboard.",
    )
    source = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 22, "spellcheck": "false", "class": "code"}),
    )
    file = forms.FileField(required=False, label="or a .py file")

    def clean(self) -> dict:
        data = super().clean()
        upload = data.get("file")
        if upload:
            data["source"] = self._read(upload)
            if not data.get("title", "").strip():
                data["title"] = PurePath(upload.name).stem
        elif data.get("source", "").strip():
            # Browsers send a textarea's line breaks as CRLF.
            data["source"] = data["source"].replace("\r\n", "\n")
            self._check_size(len(data["source"].encode("utf-8")), "source")
        elif not self.has_error("file"):
            raise forms.ValidationError("Paste the problem's source or choose a .py file.")
        return data

    def _read(self, upload) -> str:
        if not upload.name.endswith(".py"):
            self.add_error("file", f"{upload.name} is not a .py file.")
            return ""
        if not self._check_size(upload.size, "file"):
            return ""
        try:
            # utf-8-sig: a byte-order mark some editors write is not part of the source.
            return upload.read().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            self.add_error(
                "file",
                f"{upload.name} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                f"{exc.start}): save it as UTF-8 and upload it again.",
            )
            return ""

    def _check_size(self, size: int, field: str) -> bool:
        limit = settings.PROBLEM_MAX_BYTES
        if size > limit:
            self.add_error(field, f"The source is {_kib(size)}; the limit is {_kib(limit)}.")
            return False
        return True


def default_agent(agents: list[str]) -> str:
    """The built-in fusion agent when installed, else the scripted demo, else the first."""
    for name in ("fusion", "scripted-demo"):
        if name in agents:
            return name
    return agents[0] if agents else ""


class OptimizeForm(forms.Form):
    """What a run starts with. The values are checked by lifecycle.start_run (BadRunOption),
    so the fields are plain text with the known values offered as selects."""

    agent = forms.CharField(max_length=100)
    gpu_type = forms.CharField(max_length=40, label="GPU type")
    protocol = forms.CharField(max_length=40)

    def __init__(self, *args, **kwargs):
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
        for name, values in (("agent", agents), ("gpu_type", gpu_types), ("protocol", protocols)):
            self.fields[name].widget = forms.Select(choices=[(v, v) for v in values])
        self.fusion_available = "fusion" in agents


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
