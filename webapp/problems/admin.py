from django.contrib import admin

from webapp.problems.models import Problem


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ("title", "owner", "visibility", "status", "created")
    list_filter = ("visibility", "status")
    search_fields = ("title", "owner__username", "sha256")
    readonly_fields = ("sha256", "created", "updated")
