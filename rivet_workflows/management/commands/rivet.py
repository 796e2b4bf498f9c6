"""``manage.py rivet <subcommand>``: drain due work, export a history, run the demo (DESIGN.md sections 8, 11)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ... import tracing
from ...engine.model import errors
from .. import console, inspect_commands, ops_commands, relay_commands, schedule_commands


class _SubParser(argparse.ArgumentParser):
    """Parser of a subcommand. With ``pass_through="dest"`` it parses nothing itself: every argument after
    the subcommand name is stored untouched as a list in ``dest`` (the demo has its own argparse, so
    ``rivet demo --keep --only crash`` reaches it as written, ``--help`` included)."""

    def __init__(self, *args: Any, pass_through: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pass_through = pass_through

    def parse_known_args(
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Pass-through: ``(namespace with dest = list(args), [])``; otherwise argparse's parsing."""
        if self.pass_through is None:
            return super().parse_known_args(args, namespace)
        namespace = namespace if namespace is not None else argparse.Namespace()
        setattr(namespace, self.pass_through, list(args or []))
        return namespace, []


class Command(BaseCommand):
    """Thin front end over the engine: parse, call, turn engine errors into CommandError."""

    help = "rivet_workflows operations: list, show, start, send, fork, drain, check, gates, recover, pause, resume, cancel, retry, prune, schedule, relay, export, demo."

    def add_arguments(self, parser: CommandParser) -> None:
        """Subcommands: ``drain [--timeout S]``, ``demo [demo options...]`` (passed through to the demo) and
        the ops subcommands of ``ops_commands``."""
        subs = parser.add_subparsers(dest="subcommand", required=True, parser_class=_SubParser)
        drain = subs.add_parser(
            "drain", help="Run due work in this process until quiescent or the timeout (seconds) passes."
        )
        drain.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
        export = subs.add_parser(
            "export",
            help="Print an actor's workflow history as JSON (rivet_workflows.testing.export_history), e.g. "
            "to keep as a golden history that tests replay with replay_history.",
        )
        export.add_argument("actor_id", metavar="ACTOR_ID", help="the actor's id")
        export.add_argument("-o", "--output", metavar="FILE", help="write the JSON to FILE (default: stdout)")
        subs.add_parser(
            "demo",
            help="Run the example workflows end to end (project.examples.demo; `rivet demo --help` lists "
            "its options: --keep, --only a,b, --timeout S, --no-crash, --lease-seconds S).",
            pass_through="demo_args",
        )
        ops_commands.add_parsers(subs)  # check, gates, recover, pause, resume, cancel, retry, prune
        inspect_commands.add_parsers(subs)  # list, show, start, send, fork
        schedule_commands.add_parsers(subs)  # schedule list|create|pause|resume|trigger|backfill|delete
        relay_commands.add_parsers(subs)  # relay [--failed]: the outbox rows across shards

    def run_from_argv(self, argv: list[str]) -> None:
        """The command run as a process (``manage.py rivet ...``): at its end it waits at most
        ``tracing.COMMAND_FLUSH_SECONDS`` for its spans to reach the collector (docs/howto/monitoring.md),
        never for an unreachable collector's retries."""
        try:
            super().run_from_argv(argv)
        finally:
            tracing.end_of_command()

    def execute(self, *args: Any, **options: Any) -> Any:
        """Run the command; when the reader of its output goes away (``rivet show ID | head``) it stops
        quietly, as ``cat`` does, instead of printing a ``BrokenPipeError`` traceback: the rest of the
        output is dropped and the exit status is 141 (128 + SIGPIPE)."""
        try:
            result = super().execute(*args, **options)
            sys.stdout.flush()  # a pipe closed early fails here, not in the interpreter's flush at exit
            return result
        except BrokenPipeError:
            _drop_stdout()
            raise SystemExit(141) from None

    def handle(self, *args: Any, **options: Any) -> None:
        """Dispatch to the chosen subcommand."""
        sub = options["subcommand"]
        try:
            if sub == "drain":
                self._drain(options["timeout"])
            elif sub == "export":
                self._export(options["actor_id"], options.get("output"))
            elif sub == "demo":
                self._demo(options.get("demo_args") or [])
            elif sub in ops_commands.HANDLED:
                ops_commands.handle(self, sub, options)
            elif sub in inspect_commands.HANDLED:
                inspect_commands.handle(self, sub, options)
            elif sub in schedule_commands.HANDLED:
                schedule_commands.handle(self, sub, options)
            elif sub in relay_commands.HANDLED:
                relay_commands.handle(self, sub, options)
        except errors.RivetWorkflowsError as exc:
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc

    def _drain(self, timeout: float) -> None:
        from ... import django_runtime

        if timeout < 0:
            raise CommandError("--timeout must be >= 0 seconds")
        summary = django_runtime.drain(timeout=timeout)
        waiting = list(summary.still_waiting)
        self.stdout.write(
            f"actors run: {summary.actors_run}, steps executed: {summary.steps_executed}, "
            f"still waiting: {len(waiting)}" + (f" ({', '.join(waiting)})" if waiting else "")
        )

    def _export(self, actor_id: str, output: str | None) -> None:
        from ... import django_runtime
        from ...testing import golden

        with console.status(self.stderr, f"exporting the history of {actor_id}"):
            exported = golden.export_history(actor_id, runtime=django_runtime.get_runtime())
        text = json.dumps(exported, indent=2, ensure_ascii=False) + "\n"
        if output is None:
            self.stdout.write(text, ending="")
            return
        try:
            with open(output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from exc
        self.stdout.write(f"wrote the history of actor {actor_id} to {output}")

    def _demo(self, argv: list[str]) -> None:
        try:
            from project.examples import demo
        except ImportError as exc:
            raise CommandError(f"the demo is not available: {exc}") from exc
        code = demo.main(list(argv))
        if code:
            raise CommandError(f"demo exited with status {code}")


def _drop_stdout() -> None:
    """Point the process's stdout at /dev/null, so the flush at exit cannot raise ``BrokenPipeError`` again
    (the Python manual's recipe for SIGPIPE, "Note on SIGPIPE" in the ``signal`` module)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # not a real file: nothing is flushed at exit
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
