"""The engine: durable workflows on actors, free of Django, Celery, ninja and Channels (DESIGN.md section 15).

Its rooms, each importing only the rooms below it (the import-linter contracts in pyproject.toml):

- ``runtime``: the composition root (store, dispatcher, registry, settings) and the executor's entry
  points ``run_actor`` and ``drain`` that the Celery driver and ``rivet_workflows.testing`` call.
- ``client``: actor handles, actions, sends and waiting sends, queries, operator calls on a handle.
- ``operate``: what an operator does to runs: inspector reads, replay, recover, fork, retry, bulk
  actions, dry runs (``rivet check``).
- ``run``: one run of a workflow under a lease: the executor's loop, replay, the workflow context ``ctx``
  and its primitives (``run.primitives``), steps and their retries, rollback, the run's session.
- ``actor``: the actor outside its workflow: the actor context ``c``, actions, queries, ``c.cron`` and
  ``c.schedule``, message delivery, flow controls of a new actor, cancel (an operator's or a parent's
  close) and the audit of who changed an actor.
- ``model``: the vocabulary every room shares: definitions and the registry, the storage port and its
  records, the roles the rooms play for each other (Protocols), errors, typed failures, the one
  serializer, settings, keys, observer hooks.
"""
