"""The spec's examples (spec/rivet-workflows.txt, spec/rivet-failure-and-recovery.txt) ported to Python.

One module per example; ``project.registry`` registers every actor; ``scenarios`` drives them with real
messages (used by ``demo`` and by ``tests/examples``); ``fake_service`` stands in for external HTTP APIs.
"""
