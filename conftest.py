"""Runs the manual's code: every ``python`` block of README.md and docs/**/*.md is a test (Sybil).

Blocks of one page run in order in one namespace. ``<!-- skip: next "why" -->`` before a block skips it
(a block that needs a worker or changes process-wide state); ``<!-- invisible-code-block: python -->``
comments hold set-up a reader does not need. See docs/howto/develop.md, "The manual's code is tested".
"""

from sybil import Sybil
from sybil.parsers.myst import PythonCodeBlockParser, SkipParser

pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(), SkipParser()],
    patterns=["README.md", "docs/**/*.md"],
    excludes=["docs/spec/*", "docs/_build/*"],
).pytest()
