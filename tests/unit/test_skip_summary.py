"""``make test`` ends by saying which groups of tests were skipped and why (case C64; tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]


def test_the_run_ends_with_the_skipped_groups_and_their_reasons(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest("from tests.conftest import pytest_terminal_summary  # noqa: F401\n")
    pytester.makeini("[pytest]\nmarkers =\n    browser: b\n    postgres: p\n")
    pytester.makepyfile(
        test_sample="""
        import pytest

        @pytest.mark.browser
        @pytest.mark.skipif(True, reason="chromium is not installed")
        @pytest.mark.parametrize("n", range(4))
        def test_page(n):
            pass

        @pytest.mark.skipif(True, reason="needs PostgreSQL (set DATABASE_URL)")
        @pytest.mark.postgres
        def test_plan():
            pass

        def test_inline():
            pytest.skip("no manual clock")

        def test_runs():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-q", "-ra", "-p", "no:django", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=6)
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "6 tests skipped, by group" in line)
    assert lines[start + 1 : start + 4] == [
        "browser: 4 skipped (chromium is not installed)",
        "postgres: 1 skipped (needs PostgreSQL (set DATABASE_URL))",
        "test_sample.py: 1 skipped (no manual clock)",
    ]
    # at the very end, after pytest's short summary ("SKIPPED [4] ..." with -ra): only the count follows
    assert any(line.startswith("SKIPPED [4]") for line in lines[:start])
    assert lines[start + 4 :] == [line for line in lines[start + 4 :] if "passed" in line]


def test_a_run_without_skips_prints_no_skip_summary(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest("from tests.conftest import pytest_terminal_summary  # noqa: F401\n")
    pytester.makepyfile(test_sample="def test_runs():\n    pass\n")
    result = pytester.runpytest_subprocess("-q", "-p", "no:django", "-p", "no:cacheprovider")
    assert not any("skipped, by group" in line for line in result.outlines)
