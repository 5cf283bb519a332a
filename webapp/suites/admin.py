"""Suites are imported by `manage.py import_suite`; the admin is where papers' numbers are entered
(ReportedResult) and where suites, baselines and evaluations are inspected."""

from django.contrib import admin
from django.db import models
from django.db.models import Count

from webapp.suites.models import Baseline, Evaluation, ReportedResult, Suite, SuiteProblem


class SuiteProblemInline(admin.TabularInline):
    model = SuiteProblem
    raw_id_fields = ("problem",)
    fields = ("position", "name", "problem")
    ordering = ("position",)
    extra = 0


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ("name", "level", "protocol", "problem_count", "created")
    list_filter = ("protocol", "level")
    search_fields = ("name", "description")
    readonly_fields = ("created",)
    inlines = (SuiteProblemInline,)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(problem_count=Count("entries"))

    @admin.display(description="problems", ordering="problem_count")
    def problem_count(self, suite: Suite) -> int:
        return suite.problem_count


@admin.register(Baseline)
class BaselineAdmin(admin.ModelAdmin):
    list_display = (
        "problem",
        "gpu_type",
        "protocol",
        "eager_ms",
        "compile_ms",
        "compile_max_autotune_ms",
        "sol_ms",
        "measured",
        "failed",
    )
    list_filter = ("gpu_type", "protocol")
    search_fields = ("problem__title", "error")
    raw_id_fields = ("problem",)
    # Written by the worker that measured them: editing them by hand would fake a measurement.
    readonly_fields = ("measurements", "environment", "requested", "measured")

    @admin.display(boolean=True, description="failed")
    def failed(self, baseline: Baseline) -> bool:
        return bool(baseline.error)


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = ("id", "suite", "agent", "gpu_type", "protocol", "max_turns", "owner", "created")
    list_filter = ("suite", "gpu_type", "protocol", "agent")
    search_fields = ("agent", "owner__username")
    raw_id_fields = ("owner",)
    readonly_fields = ("created",)


@admin.register(ReportedResult)
class ReportedResultAdmin(admin.ModelAdmin):
    list_display = (
        "entrant",
        "suite",
        "gpu",
        "correct_rate",
        "fast_1_0_vs_compile",
        "geomean_speedup_vs_compile",
        "citation",
    )
    list_filter = ("suite",)
    search_fields = ("entrant", "citation", "note")
    # A link typed without a scheme is https, as papers are served.
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    fieldsets = (
        (
            "Who, where, how",
            {
                "fields": ("suite", "entrant", "gpu", "protocol"),
                "description": "A row from a paper: shown on the suite page under “Reported by "
                "papers”, marked as reported, never ranked. GPU and protocol as the paper "
                "states them (e.g. “H100 SXM”, “atol = rtol = 1e-2”).",
            },
        ),
        ("Source", {"fields": ("citation", "url", "note")}),
        (
            "Numbers as the paper reports them",
            {
                "fields": (
                    "correct_rate",
                    "fast_1_0_vs_compile",
                    "fast_1_0_vs_eager",
                    "geomean_speedup_vs_compile",
                    "geomean_speedup_vs_eager",
                ),
                "description": "Shares as fractions from 0 to 1 (0.87 for 87%), speedups as "
                "ratios (1.9 for 1.9×), as on the board. Leave blank what the paper does not "
                "report.",
            },
        ),
    )
