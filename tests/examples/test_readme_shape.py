"""README.md is the front page, not the manual: short, the two commands and the service line a CI and a new
reader need, a first workflow near the top, and links into docs/ that all resolve (docs/howto/develop.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def test_the_readme_is_short_and_shows_a_workflow_within_its_first_100_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 300, f"README.md has {len(lines)} lines: move the detail into docs/"
    first_python = next(i for i, line in enumerate(lines, 1) if line.startswith("```python"))
    assert first_python <= 100
    text = "\n".join(lines)
    for command in (
        "make demo",
        "make test",
        "DATABASE_URL=postgres://postgres@127.0.0.1:5432/rivet REDIS_URL=redis://127.0.0.1:6379/0 make test",
    ):
        assert command in text, command


def test_every_link_of_the_readme_into_the_manual_names_a_page_that_exists():
    links = re.findall(r"\]\((docs/[^)#]*)", README.read_text(encoding="utf-8"))
    assert len(links) >= 20
    missing = sorted({link for link in links if not (ROOT / link).exists()})
    assert not missing, missing
