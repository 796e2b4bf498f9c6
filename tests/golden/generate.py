"""Record the golden histories of tests/golden from today's engine: ``python -m tests.golden.generate``
(``make golden``).

Every case of ``engine_cases.CASES`` (the ENGINE-SCENARIOS groups) and ``example_cases.CASES`` (the spec's
examples) is driven on a MemoryStore with a manual clock (``driver.Driver``) and each of its actors is
written with ``rivet_workflows.testing.export_history`` to ``engine/<case>.json`` or
``examples/<case>.<label>.json``. The files are what ``export_history`` returns, except that error stack
traces are dropped (they name this machine's paths and line numbers). Regenerating gives the same files up
to ids and timestamps; ``test_golden.py`` checks that, and replays every file on every store.

Options: ``--only NAME[,NAME...]`` (case names), ``--list``. Run it only when a behaviour change is
intended, and say why in the commit: the point of the files is that a refactor leaves them unchanged.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from rivet_workflows.engine.client.client import ActorHandle

from . import engine_cases, example_cases
from .driver import Case, Driver

GOLDEN_DIR = Path(__file__).resolve().parent
#: every case, by name
CASES: dict[str, Case] = {c.name: c for c in [*engine_cases.CASES, *example_cases.CASES]}


def directory(case: Case) -> Path:
    """Where the files of ``case`` live: ``examples/`` for the spec's examples, ``engine/`` for the rest."""
    return GOLDEN_DIR / ("examples" if case.group == "examples" else "engine")


def path_of(case: Case, stem: str) -> Path:
    """The JSON file of one of ``case``'s actors (``stem`` from ``case.file_stems()``)."""
    return directory(case) / f"{stem}.json"


def strip_stacks(value: Any) -> Any:
    """``value`` with the ``stack`` of every stored error (a dict with ``name``, ``message`` and ``stack``)
    set to None; everything else unchanged."""
    if isinstance(value, dict):
        out = {k: strip_stacks(v) for k, v in value.items()}
        if {"name", "message", "stack"} <= out.keys():
            out["stack"] = None
        return out
    if isinstance(value, list):
        return [strip_stacks(v) for v in value]
    return value


def record(case: Case) -> dict[str, dict]:
    """Drive ``case`` on a fresh driver and return ``{file stem: exported history}`` (stacks stripped)."""
    driver = Driver(case.definitions(), **dict(case.settings))
    got = case.record(driver)
    if not isinstance(got, dict):
        got = {"": got}
    if sorted(got) != sorted(case.labels or ("",)):
        raise RuntimeError(f"case {case.name!r} recorded actors {sorted(got)}, declared {list(case.labels)}")
    out = {}
    for label, value in got.items():
        exported = driver.export(value) if isinstance(value, ActorHandle | str) else value
        out[f"{case.name}.{label}" if label else case.name] = strip_stacks(exported)
    return out


def load(path: Path) -> dict:
    """A golden file as the dict ``replay_history`` takes."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def dump(exported: dict) -> str:
    """The text of a golden file: pretty JSON, keys in export order, a final newline."""
    return json.dumps(exported, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the golden files (all cases, or ``--only``); files of removed cases are deleted."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.golden.generate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--only", help="comma-separated case names (default: every case)")
    parser.add_argument("--list", action="store_true", help="list the cases and what each covers")
    args = parser.parse_args(argv)
    # the cases fail steps and workflows on purpose: their engine log lines are noise here
    logging.getLogger("rivet_workflows").setLevel(logging.CRITICAL)
    if args.list:
        for case in CASES.values():
            print(f"{case.name:34} {case.group:10} {case.covers}")
        return 0
    names = args.only.split(",") if args.only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)} (see --list)")
    for name in names:
        case = CASES[name]
        directory(case).mkdir(exist_ok=True)
        for stem, exported in record(case).items():
            path = path_of(case, stem)
            path.write_text(dump(exported), encoding="utf-8")
            print(f"wrote {path.relative_to(GOLDEN_DIR.parent.parent)}")
    if not args.only:
        expected = {path_of(c, s) for c in CASES.values() for s in c.file_stems()}
        for folder in ("engine", "examples"):
            for stale in sorted((GOLDEN_DIR / folder).glob("*.json")):
                if stale not in expected:
                    stale.unlink()
                    print(f"removed {stale.relative_to(GOLDEN_DIR.parent.parent)} (no such case)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
