from django.contrib import admin

from webapp.accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "created", "last_used")
    search_fields = ("user__username", "name", "prefix")
    # The hash is useless to an admin and the plaintext does not exist: tokens are issued by
    # webapp.accounts.tokens.issue_token, never typed in here.
    readonly_fields = ("key_hash", "prefix", "created", "last_used")

    def has_add_permission(self, request) -> bool:
        return False
