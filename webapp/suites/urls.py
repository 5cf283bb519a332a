from django.urls import path

from webapp.suites import views

urlpatterns = [
    path("", views.suite_list, name="suite_list"),
]
