"""The failover test: a PostgreSQL primary and synchronous standby of its own, the primary killed mid-load."""
