"""The vocabulary every room shares: definitions and the registry, the storage port and its records, the
roles the rooms play for each other (Protocols), errors, typed failures, the one serializer, settings,
keys, observer hooks.

See ``rivet_workflows.engine`` for the rooms and their order.
"""
