"""The answers to errors no view handled (handler400/403/404/500 in webapp/urls.py): under /api/
the API's own {"detail": "..."} body, never an HTML page; elsewhere the site's pages
(templates/404.html and the others)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

API_PREFIX = "/api/"


def is_api_request(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX) or request.path == API_PREFIX.rstrip("/")


def api_error(status: int, detail: str) -> JsonResponse:
    return JsonResponse({"detail": detail}, status=status)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return api_error(400, "the request could not be read: check its host, headers and body")
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return api_error(403, str(exception) or "you may not do this")
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        # The resolver's own message is a dict of the patterns it tried: not for a client.
        return api_error(404, f"no API route at {request.path}: the routes are at /api/docs")
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api_request(request):
        detail = "the server failed on this request and logged it: try again in a moment"
        return api_error(500, detail)
    return defaults.server_error(request)
