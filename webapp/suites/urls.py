from django.urls import path

from webapp.suites import views

urlpatterns = [
    path("", views.suite_list, name="suite_list"),
    path("<slug:name>/", views.suite_detail, name="suite_detail"),
]
