from django.urls import path

from webapp.leaderboard import views

urlpatterns = [
    path("", views.leaderboard, name="leaderboard"),
]
