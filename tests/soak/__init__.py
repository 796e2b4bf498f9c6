"""The chaos soak (``make soak``, ``make soak-short``): ``python -m tests.soak --help``."""
