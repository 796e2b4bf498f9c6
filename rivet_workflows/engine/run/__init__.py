"""One run of a workflow under a lease: the executor's loop, replay, the workflow context ``ctx`` and its
primitives (``run.primitives``), steps and their retries, rollback, the run's session.

See ``rivet_workflows.engine`` for the rooms and their order.
"""
