"""What an operator does to runs: inspector reads, replay, recover, cancel, retry, bulk actions, the audit,
dry runs (``rivet check``).

See ``rivet_workflows.engine`` for the rooms and their order.
"""
