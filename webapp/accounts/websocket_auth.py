"""Websocket authentication: the browser's session cookie, or `Authorization: Bearer <token>` for
API clients (the same tokens as the REST API).

The origin check guards the cookie: a browser sends a site's session cookie with a handshake that
any page opens, so a handshake that a session authenticates must come from one of this site's
hosts (no cross-site hijacking of a session). A token is no ambient credential (no page can make
a browser add an Authorization header to a websocket handshake), so a handshake that a valid
token authenticates needs no `Origin`: command-line clients send none.
"""

from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.security.websocket import AllowedHostsOriginValidator

from webapp.accounts.tokens import user_for_token

TOKEN_AUTHENTICATED = "kernelarena.token_authenticated"  # scope key set by BearerTokenMiddleware


class BearerTokenMiddleware:
    """Sets scope["user"] from a bearer token when the handshake carries a valid one."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        token = _bearer(dict(scope.get("headers", [])).get(b"authorization", b""))
        if token:
            user = await database_sync_to_async(user_for_token)(token)
            if user is not None:
                scope = {**scope, "user": user, TOKEN_AUTHENTICATED: True}
        return await self.inner(scope, receive, send)


class SessionOriginValidator:
    """The allowed-hosts origin check for every handshake not authenticated by a token."""

    def __init__(self, inner):
        self.inner = inner
        self.origin_checked = AllowedHostsOriginValidator(inner)

    async def __call__(self, scope, receive, send):
        app = self.inner if scope.get(TOKEN_AUTHENTICATED) else self.origin_checked
        return await app(scope, receive, send)


def _bearer(header: bytes) -> str:
    scheme, _, token = header.decode("latin-1").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def websocket_auth(inner):
    """Session first; a valid bearer token overrides it and lifts the origin check."""
    return AuthMiddlewareStack(BearerTokenMiddleware(SessionOriginValidator(inner)))
