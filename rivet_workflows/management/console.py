"""Terminal output of ``manage.py rivet``: rich tables and progress bars on a terminal, plain text when piped."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

T = TypeVar("T")

#: ``track(items, total, description)``: yields ``items`` unchanged, showing how far it got (``ops``)
Track = Callable[[Iterable[T], int, str], Iterable[T]]


def raw(stream: Any) -> Any:
    """The file under a Django ``OutputWrapper`` (its ``write`` appends a newline to every call)."""
    return getattr(stream, "_out", stream)


def is_terminal(stream: Any) -> bool:
    """True when ``stream`` (a command's stdout or stderr) is an interactive terminal."""
    isatty = getattr(raw(stream), "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed file
        return False


def plain_track(items: Iterable[T], total: int, description: str) -> Iterable[T]:
    """The ``Track`` of piped output: no progress shown."""
    return items


@contextlib.contextmanager
def progress(stderr: Any) -> Iterator[Track]:
    """A ``Track`` that draws a rich progress bar on ``stderr`` when it is a terminal (removed when done,
    so the command's own output follows it cleanly) and shows nothing when it is piped or a file."""
    if not is_terminal(stderr):
        yield plain_track
        return
    console = Console(file=raw(stderr), force_terminal=True, force_interactive=True)
    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:

        def track(items: Iterable[T], total: int, description: str) -> Iterable[T]:
            task = bar.add_task(description, total=total)
            bar.refresh()  # drawn at once, not only at the next tick
            for item in items:
                yield item
                bar.advance(task)

        yield track


@contextlib.contextmanager
def status(stderr: Any, text: str) -> Iterator[None]:
    """A spinner with ``text`` on ``stderr`` while the block runs, on a terminal only."""
    if not is_terminal(stderr):
        yield
        return
    with Console(file=raw(stderr), force_terminal=True, force_interactive=True).status(text):
        yield


def table(
    stdout: Any, headers: Sequence[str], rows: Iterable[Sequence[str]], title: str | None = None
) -> None:
    """Write ``rows`` under ``headers``: a rich table on a terminal; piped, one line per row with the
    columns separated by two spaces and padded to their widths (``title`` then its own first line), so
    ``grep``/``awk`` read it. Cells are plain strings."""
    rows = [list(row) for row in rows]
    if is_terminal(stdout):
        shown = Table(title=title, title_justify="left", header_style="bold")
        for header in headers:
            shown.add_column(header, no_wrap=header != headers[-1])
        for row in rows:
            shown.add_row(*row)
        Console(file=raw(stdout), force_terminal=True, soft_wrap=False).print(shown)
        return
    out = raw(stdout)
    if title:
        out.write(title + "\n")
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]
    for row in [list(headers), *rows]:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n")
