from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    name = "webapp.leaderboard"
    label = "leaderboard"

    def ready(self) -> None:
        # Runs that end with a verified candidate are re-graded on their GPU type's queue.
        from webapp.celery import send_regrade
        from webapp.leaderboard.grading import REGRADE_HOOKS

        if send_regrade not in REGRADE_HOOKS:
            REGRADE_HOOKS.append(send_regrade)
