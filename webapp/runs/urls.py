from django.urls import path

from webapp.runs import views

urlpatterns = [
    path("", views.my_runs, name="my_runs"),
    path("<int:run_id>/", views.run_detail, name="run_detail"),
    path("<int:run_id>/cancel", views.run_cancel, name="run_cancel"),
    path("<int:run_id>/bundle.zip", views.run_bundle, name="run_bundle"),
    path("<int:run_id>/candidates/<int:seq>/", views.candidate_detail, name="candidate_detail"),
    path(
        "<int:run_id>/candidates/<int:seq>/bundle.zip",
        views.candidate_bundle,
        name="candidate_bundle",
    ),
]
