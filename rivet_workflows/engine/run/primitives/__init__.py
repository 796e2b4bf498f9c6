"""Workflow primitives: steps, loops, sleeps and queue waits, join and race."""
