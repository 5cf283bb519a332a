from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "webapp.leaderboard"
    label = "leaderboard"
