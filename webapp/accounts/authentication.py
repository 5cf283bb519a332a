"""How API requests authenticate: `Authorization: Bearer <token>`, or the browser's session."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer, django_auth

from webapp.accounts.tokens import user_for_token


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        user = user_for_token(token)
        if user is not None:
            request.user = user
        return user


# Tried in order; the first that returns a user wins. Session auth checks CSRF on unsafe methods.
API_AUTH = [BearerToken(), django_auth]
