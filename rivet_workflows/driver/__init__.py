"""The Celery driver: what moves runs between processes (DESIGN.md sections 5 and 15).

``tasks`` (the Celery tasks: ``run_actor``, the sweep, scheduled fires), ``dispatch`` (``CeleryDispatcher``:
a "this actor has work" hint after the commit; ``LocalDispatcher`` for the ``DISPATCHER`` setting) and the
kombu transports ``fs_broker`` (the embedded broker: atomic files) and ``redis_broker`` (Redis that survives
restarts). The engine never imports this package; the app's ``ready()`` imports ``tasks`` so a worker
knows the tasks without autodiscovery.
"""
