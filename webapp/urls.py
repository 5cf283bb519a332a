from django.contrib import admin
from django.urls import include, path

from webapp.api import api
from webapp.leaderboard.views import home

urlpatterns = [
    path("", home, name="home"),
    path("accounts/", include("webapp.accounts.urls")),
    path("problems/", include("webapp.problems.urls")),
    path("runs/", include("webapp.runs.urls")),
    path("suites/", include("webapp.suites.urls")),
    path("leaderboard/", include("webapp.leaderboard.urls")),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
