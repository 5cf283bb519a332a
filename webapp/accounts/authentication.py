"""How API requests authenticate: `Authorization: Bearer <token>`, or the browser's session."""

from __future__ import annotations

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_credentials
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest
from ninja.security import HttpBearer, django_auth

from webapp.accounts.lockout import bad_tokens_message
from webapp.accounts.tokens import user_for_token
from webapp.errors import TooManyRequests

# Bad tokens count as failed log-ins of this name, so per address (settings.py, "Failed log-ins");
# no username can take it (Django's allow only letters, digits and @.+-_).
BAD_TOKEN_NAME = "(API token)"


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        credentials = get_credentials(BAD_TOKEN_NAME)
        if not AxesProxyHandler.is_allowed(request, credentials):
            # A try while locked out counts, as on the log-in page: the cool-off starts again.
            self.failed(request, credentials)
            raise TooManyRequests(bad_tokens_message(request))
        user = user_for_token(token)
        if user is None:
            self.failed(request, credentials)  # the one reaching the limit: lockout.locked_out
            return None
        request.user = user
        return user

    def failed(self, request: HttpRequest, credentials: dict) -> None:
        user_login_failed.send(sender=type(self), credentials=credentials, request=request)


# Tried in order; the first that returns a user wins. Session auth checks CSRF on unsafe methods.
API_AUTH = [BearerToken(), django_auth]
