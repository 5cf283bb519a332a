from django.urls import path

from webapp.problems import views

urlpatterns = [
    path("", views.problem_list, name="problem_list"),
    path("new/", views.problem_new, name="problem_new"),
    path("<int:problem_id>/", views.problem_detail, name="problem_detail"),
    path("<int:problem_id>/optimize", views.problem_optimize, name="problem_optimize"),
    path("<int:problem_id>/submit", views.problem_submit, name="problem_submit"),
]
