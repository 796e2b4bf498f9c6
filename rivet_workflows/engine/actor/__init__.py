"""The actor outside its workflow: the actor context ``c``, actions, queries, ``c.cron`` and
``c.schedule``, message delivery, flow controls of a new actor.

See ``rivet_workflows.engine`` for the rooms and their order.
"""
