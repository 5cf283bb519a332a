from django.contrib import admin

from webapp.runs.models import Candidate, Run, TraceEvent


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "problem", "owner", "agent", "gpu_type", "status", "created")
    list_filter = ("status", "gpu_type", "agent", "protocol")
    search_fields = ("owner__username", "problem__title", "worker")
    raw_id_fields = ("problem", "best_candidate")


@admin.register(TraceEvent)
class TraceEventAdmin(admin.ModelAdmin):
    list_display = ("run", "seq", "kind", "at")
    list_filter = ("kind",)
    raw_id_fields = ("run",)


@admin.register(Candidate)
class CandidateAdmin(admin.ModelAdmin):
    list_display = ("run", "seq", "verified", "speedup_vs_compile", "created")
    list_filter = ("verified",)
    raw_id_fields = ("run",)
