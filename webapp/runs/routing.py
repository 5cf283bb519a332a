from django.urls import path

from webapp.runs.consumers import RunTraceConsumer

websocket_urlpatterns = [path("ws/runs/<int:run_id>/", RunTraceConsumer.as_asgi())]
