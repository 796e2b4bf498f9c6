"""ASGI entry point: HTTP through Django, WebSockets through Channels (rivet_workflows.realtime routes)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402 - after Django setup

if settings.DEBUG:
    # like runserver: in development `daphne project.asgi:application` serves the static files too (admin
    # CSS, the bundled Swagger UI of /api/rivet/docs); in production serve them with your web server
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

from channels.auth import AuthMiddlewareStack  # noqa: E402 - after Django setup
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from rivet_workflows.realtime.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # rivet's consumer checks the whole Origin (scheme, host, port) itself, as Django's CSRF check
        # does: docs/reference/live-events.md
        "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    }
)
