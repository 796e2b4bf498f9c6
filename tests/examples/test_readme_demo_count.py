"""The manual's account of ``make demo`` (docs/tutorial/demo.md, and the count in README.md) matches what it runs: the number of scenarios ported from the spec
plus the demo's own (``crash``, ``shop``, ``agent``) is the count the demo prints (``N/N scenarios ok``)."""

from __future__ import annotations

import re
from pathlib import Path

from project.examples import scenarios

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial" / "demo.md"
README = ROOT / "README.md"
WORDS = {"one": 1, "two": 2, "three": 3}


def test_the_readme_counts_the_scenarios_the_demo_runs():
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    found = re.search(
        r"runs (\d+) scenarios ported from the spec \((.*?)\) and (\w+) of its own \((.*?)\)", text
    )
    assert found, "the demo page's paragraph moved: update this test"
    ported, ported_list, own, own_list = int(found[1]), found[2], WORDS[found[3]], found[4]
    own_names = re.findall(r"`(\w+)`", own_list)[:own]
    enabled = [s.name for s in scenarios.enabled()]
    assert set(own_names) <= set(enabled) and own_names == ["crash", "shop", "agent"]
    assert ported + own == len(enabled)  # what "N/N scenarios ok" prints
    assert f"{len(enabled)}/{len(enabled)} scenarios ok" in text
    assert len(ported_list.split(", ")) >= 10  # the list names the ported scenarios
    readme = " ".join(README.read_text(encoding="utf-8").split())
    assert f"The demo runs {len(enabled)} scenarios" in readme
