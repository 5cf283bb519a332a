from django.urls import path

from webapp.problems import views

urlpatterns = [
    path("", views.problem_list, name="problem_list"),
    path("new/", views.problem_new, name="problem_new"),
]
