"""Prometheus metrics of rivet_workflows (DESIGN.md section 14): ``view`` serves the exposition (mount it at
``/metrics``); the counting observer, the scrape-time gauges and the exposition live in ``.prometheus``
(the composition root, ``django_runtime``, takes the observer from there: no import back from it).

See ``rivet_workflows.metrics.prometheus`` for the metric list and the multiprocess mode of Celery workers.
"""

from __future__ import annotations

from typing import Any

from .prometheus import ActorGauges as ActorGauges
from .prometheus import PrometheusObserver as PrometheusObserver
from .prometheus import available as available
from .prometheus import exposition as exposition
from .prometheus import observer as observer


def view(request: Any) -> Any:
    """The Django view of the Prometheus exposition: ``path("metrics", rivet_workflows.metrics.view)``.

    GET only (405 otherwise); 501 when prometheus-client is not installed. It has no authentication of its
    own: serve it on an internal address or wrap it (``login_required``, a network rule)."""
    from django.http import HttpResponse, HttpResponseNotAllowed

    from .. import django_runtime

    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    if not available():
        return HttpResponse(
            "prometheus-client is not installed: pip install 'rivet-workflows[metrics]'\n",
            status=501,
            content_type="text/plain",
        )
    body, content_type = exposition(django_runtime.get_runtime().store)
    return HttpResponse(body, content_type=content_type)
