"""What an operator does to runs: inspector reads, replay, recover, fork, retry, bulk actions, dry runs
(``rivet check``).

See ``rivet_workflows.engine`` for the rooms and their order.
"""
