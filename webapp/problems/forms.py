from __future__ import annotations

from pathlib import PurePath

from django import forms
from django.conf import settings

from webapp.problems.models import Visibility


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
