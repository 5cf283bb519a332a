from django.contrib import admin
from django.urls import include, path

from webapp.api import api
from webapp.leaderboard import suite_page
from webapp.leaderboard.views import home
from webapp.runs import agents_page, model_keys_page, problem_page

urlpatterns = [
    path("", home, name="home"),
    path("accounts/", include("webapp.accounts.urls")),
    path("problems/", include("webapp.problems.urls")),
    # A problem's page starts runs, and a suite's page shows its board: each lives in the app
    # above the one its URL is named after (docs/architecture.md, "Layers").
    path("problems/<int:problem_id>/", problem_page.problem_detail, name="problem_detail"),
    path(
        "problems/<int:problem_id>/optimize", problem_page.problem_optimize, name="problem_optimize"
    ),
    path("problems/<int:problem_id>/submit", problem_page.problem_submit, name="problem_submit"),
    path("runs/", include("webapp.runs.urls")),
    path("keys/", model_keys_page.model_keys_page, name="model_keys"),
    path("staff/agents/", agents_page.agents_page, name="agents"),
    path("suites/", include("webapp.suites.urls")),
    path("suites/<slug:name>/", suite_page.suite_detail, name="suite_detail"),
    path("leaderboard/", include("webapp.leaderboard.urls")),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]

# Errors no view handled: JSON under /api/, the site's pages elsewhere (webapp/error_pages.py).
handler400 = "webapp.error_pages.bad_request"
handler403 = "webapp.error_pages.permission_denied"
handler404 = "webapp.error_pages.page_not_found"
handler500 = "webapp.error_pages.server_error"
