"""ASGI entry point: Django's HTTP app, and the run trace websocket at /ws/runs/<id>/.

Websocket handshakes authenticate by session cookie or bearer token; one that a session
authenticates must come from an allowed host's page (no cross-site hijacking of a session), one
that a token authenticates needs no Origin (webapp.accounts.websocket_auth).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
http_app = get_asgi_application()  # sets Django up before the imports below touch models

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from webapp.accounts.websocket_auth import websocket_auth  # noqa: E402
from webapp.runs.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": websocket_auth(URLRouter(websocket_urlpatterns)),
    }
)
