"""The composition root (store, dispatcher, registry, settings) and the executor's entry points
``run_actor`` and ``drain`` that the Celery driver and ``rivet_workflows.testing`` call.

See ``rivet_workflows.engine`` for the rooms and their order.
"""
