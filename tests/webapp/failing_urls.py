"""The site's URLs and error handlers, plus a page and API routes that fail: what a bug in a view
looks like to a visitor (tests/webapp/test_error_pages.py)."""

from django.core.exceptions import PermissionDenied
from django.urls import path
from ninja import NinjaAPI

from webapp import urls as site

failing_api = NinjaAPI(urls_namespace="failing-api")


@failing_api.get("/bug")
def api_bug(request):
    raise RuntimeError("a bug in an API route")


@failing_api.get("/forbidden")
def api_forbidden(request):
    raise PermissionDenied("only the owner may read this")


def page_bug(request):
    raise RuntimeError("a bug in a page")


urlpatterns = [
    path("api/failing/", failing_api.urls),
    path("failing-page/", page_bug),
    *site.urlpatterns,
]
handler400 = site.handler400
handler403 = site.handler403
handler404 = site.handler404
handler500 = site.handler500
