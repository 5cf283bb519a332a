"""Websocket authentication: the browser's session cookie, or `Authorization: Bearer <token>` for
API clients (the same tokens as the REST API)."""

from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async

from webapp.accounts.tokens import user_for_token


class BearerTokenMiddleware:
    """Sets scope["user"] from a bearer token when the handshake carries one."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        token = _bearer(dict(scope.get("headers", [])).get(b"authorization", b""))
        if token:
            user = await database_sync_to_async(user_for_token)(token)
            if user is not None:
                scope = {**scope, "user": user}
        return await self.inner(scope, receive, send)


def _bearer(header: bytes) -> str:
    scheme, _, token = header.decode("latin-1").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def websocket_auth(inner):
    """Session first; a valid bearer token overrides it."""
    return AuthMiddlewareStack(BearerTokenMiddleware(inner))
