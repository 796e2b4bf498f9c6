"""The actor outside its workflow: the actor context ``c``, actions, queries, ``c.cron`` and
``c.schedule``, message delivery, flow controls of a new actor, cancel (an operator's, or a parent's
close) and the audit of who changed an actor.

See ``rivet_workflows.engine`` for the rooms and their order.
"""
