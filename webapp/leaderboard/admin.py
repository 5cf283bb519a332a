"""Grades are written by the re-grade worker; the admin shows them and lets a reviewer settle one
held under review (its status and reasons), nothing else."""

from django.contrib import admin

from webapp.leaderboard.models import MEASURED_FIELDS, Grade


@admin.register(Grade)
class GradeAdmin(admin.ModelAdmin):
    list_display = (
        "run",
        "status",
        "candidate_ms",
        "speedup_vs_compile",
        "speedup_vs_eager",
        "sol_fraction",
        "graded",
        "worker",
    )
    list_filter = ("status",)
    search_fields = ("run__id", "run__agent", "run__owner__username", "worker")
    raw_id_fields = ("run", "candidate")
    readonly_fields = (
        "run",
        "candidate",
        "verdict",
        *MEASURED_FIELDS,
        "max_rel_err",
        "secret_seeds",
        "worker",
        "created",
        "graded",
    )

    def has_add_permission(self, request) -> bool:
        return False  # a grade comes from re-grading a run (leaderboard.grading)
