"""Request bodies over the size limit (settings.DATA_UPLOAD_MAX_MEMORY_SIZE), refused with a
sentence that names the limit instead of Django's bare 400.

The API answers 413 {"detail": ...} (its handler in webapp/api.py). A page is shown again, as
if fetched, with the refusal as its message and status 413: Django raises RequestDataTooBig
when the form's fields are first read, which is the CSRF check, so the middleware reads them
first; the page's own form checks the sizes below the limit (a problem's source: 256 KiB).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse


def too_large(request: HttpRequest) -> str:
    """What to tell the sender of a body over the limit."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    size = int(request.META.get("CONTENT_LENGTH") or 0)
    sent = f"{size / 1024:.0f} KiB" if size else "over the limit"
    return (
        f"the request body is {sent}; the limit is {limit // 1024} KiB "
        f"(a problem's source may be at most {settings.PROBLEM_MAX_BYTES // 1024} KiB)"
    )


class BodyLimitMiddleware:
    """Before CsrfViewMiddleware: a page POST whose fields are over the limit becomes a GET of
    the same page that says why (the API's views are csrf-exempt and refuse on their own)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if getattr(request, "body_refused", False) and response.status_code == 200:
            response.status_code = 413
        return response

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs):
        if request.method != "POST" or getattr(view_func, "csrf_exempt", False):
            return None
        try:
            request.POST  # noqa: B018 -- read here, where a refusal can still become a page
        except RequestDataTooBig:
            messages.error(request, f"Nothing was sent: {too_large(request)}.")
            # A GET shows the page and changes nothing, so no CSRF token is needed for it.
            request.method = "GET"
            request.body_refused = True
        return None
