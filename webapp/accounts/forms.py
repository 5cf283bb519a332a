from __future__ import annotations

from django import forms


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        required=False,
        help_text="What it is for, e.g. “laptop” or “CI”, so you can tell tokens apart.",
    )
