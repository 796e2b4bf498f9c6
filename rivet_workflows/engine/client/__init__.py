"""Actor handles, actions, sends and waiting sends, queries, operator calls on a handle.

See ``rivet_workflows.engine`` for the rooms and their order.
"""
