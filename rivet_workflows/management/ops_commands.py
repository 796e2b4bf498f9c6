"""The ``check``, ``gates``, ``recover`` and ``prune`` subcommands of ``manage.py rivet`` (thin: parse, call
``rivet_workflows.ops``, print). Registered by ``commands/rivet.py``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from .. import display
from . import console


def _count(n: int, singular: str, plural: str) -> str:
    """``"1 problem"`` / ``"2 problems"``: ``n`` with the noun in its number (English output)."""
    return f"{n} {singular if n == 1 else plural}"


def _where(r: Any) -> str:
    """`` at <location> (the code reached new entry <key>) (replay from <step> instead)``, the parts known."""
    text = f" at {r.location}" if r.location else ""
    if r.reached:
        text += f" (the code reached new entry {r.reached})"
    if r.replay_from:
        text += f" (replay from {r.replay_from!r} instead)"
    if r.other_version:
        text += f" on entries of code version {r.other_version!r}"
    if r.awaiting_code_version:
        text += f" waiting for code version {r.awaiting_code_version!r}"
    return text


def _suspension(error: dict) -> str:
    """The line under a suspended run in ``rivet check``: the code error that suspended it and where."""
    where = f" at {error['location']}" if error.get("location") else ""
    return f"suspended by {error.get('name', 'error')}: {error.get('message', '')}{where}"


#: run ids listed per problem group of ``rivet check`` (the per-run lines above list them all)
GROUP_IDS = 5


def _summarise(command: Any, bad: list) -> None:
    """The problems of ``rivet check`` grouped by what went wrong (outcome, actor type, location, the entry
    reached, refusal code): one line with the count of runs, a few of their ids and the hint, once."""
    groups: dict[tuple, list] = {}
    for r in bad:
        kind = (r.outcome, r.name, r.location, r.reached, r.code, r.replay_from, r.other_version)
        groups.setdefault(kind, []).append(r)
    if not groups:
        return
    out = command.stdout
    out.write(f"problems by kind ({_count(len(groups), 'kind', 'kinds')}):")
    for (outcome, name, *_), runs in sorted(groups.items(), key=lambda g: (-len(g[1]), str(g[0]))):
        ids = ", ".join(r.actor_id for r in runs[:GROUP_IDS])
        if len(runs) > GROUP_IDS:
            ids += f" and {len(runs) - GROUP_IDS} more"
        head = f"  {outcome} {name}{_where(runs[0])}: {_count(len(runs), 'run', 'runs')} ({ids})"
        out.write(command.style.ERROR(head) + f"\n    {runs[0].message}")


def add_parsers(subs: Any) -> None:
    """Add the subcommand parsers to ``subs`` (an argparse subparsers action)."""
    check = subs.add_parser(
        "check",
        help="Replay every in-flight and suspended history against the current code (no step runs); exit 1 "
        "only for runs this code would break (the deploy gate).",
    )
    check.add_argument("--name", action="append", help="only this actor type (repeatable)")
    check.add_argument(
        "--include-failed",
        action="store_true",
        help="also check failed workflows, as recover would restart them (failed steps reset)",
    )
    check.add_argument(
        "--verbose", action="store_true", help="print each problem's full explanation under its run's line"
    )
    gates = subs.add_parser(
        "gates", help="Version gates and removed entries with the in-flight instances pinned to each."
    )
    gates.add_argument("--name", action="append", help="only this actor type (repeatable)")
    recover = subs.add_parser(
        "recover",
        help="Wake actors with an expired lease (always safe). Failed workflows are only listed unless "
        "--all, --name or --actor says which to restart (a permanent failure would just fail again).",
    )
    recover.add_argument(
        "--name", action="append", help="only this actor type (repeatable); restarts its failed workflows"
    )
    recover.add_argument(
        "--actor", action="append", help="only this actor id (repeatable); restarts it if failed"
    )
    recover.add_argument("--all", action="store_true", help="restart every failed workflow (no filter)")
    recover.add_argument("--leases-only", action="store_true", help="do not restart or list failed workflows")
    recover.add_argument("--failed-only", action="store_true", help="do not touch expired leases")
    recover.add_argument("--dry-run", action="store_true", help="list what would be done")
    recover.add_argument("--reason", help="why (kept in each restarted workflow's operator actions)")
    for verb, text in (
        ("pause", "Pause actors: never claimed while paused; a running step finishes, no new step starts."),
        ("resume", "Resume paused actors: what came due while paused runs once."),
        ("cancel", "Cancel workflows (paused ones too): cancelled, never run again; no rollback runs."),
    ):
        sub = subs.add_parser(verb, help=text)
        sub.add_argument("--actor", action="append", help="this actor id (repeatable)")
        sub.add_argument("--name", action="append", help="every unfinished actor of this type (repeatable)")
        sub.add_argument("--reason", help=f"why (kept with the {verb} in each actor's operator actions)")
        if verb == "cancel":
            sub.add_argument(
                "--children",
                action="store_true",
                help="also cancel every unfinished actor their runs created (and theirs), each audited",
            )
    retry = subs.add_parser(
        "retry", help="Retry runs a code error suspended (after the fix): they go on where they stopped."
    )
    retry.add_argument("--actor", action="append", help="this actor id (repeatable)")
    retry.add_argument("--name", action="append", help="every suspended actor of this type (repeatable)")
    retry.add_argument("--reason", help="why (kept with the retry in each actor's operator actions)")
    replay = subs.add_parser(
        "replay",
        help="Replay whole workflows chosen by a filter (--state, --name, --attr, --since, --until).",
    )
    replay.add_argument("--name", action="append", help="only actors of this type")
    replay.add_argument("--reason", help="why (kept with the replay in each actor's operator actions)")
    for sub in (recover, replay, *(subs.choices[v] for v in ("pause", "resume", "cancel", "retry"))):
        add_filter_arguments(sub)
    prune = subs.add_parser("prune", help="Delete finished actors not updated for N days.")
    prune.add_argument("--older-than", type=float, required=True, metavar="DAYS", help="age in days")
    prune.add_argument("--dry-run", action="store_true", help="count without deleting")


HANDLED = frozenset({"check", "gates", "recover", "prune", "pause", "resume", "cancel", "retry", "replay"})
#: the past tense of the actions ``rivet pause|resume|cancel|retry`` report
_DONE = {"pause": "paused", "resume": "resumed", "cancel": "cancelled", "retry": "retried"}
#: the past tense of every action by filter (DESIGN.md section 19)
_DONE_BY_FILTER = {**_DONE, "recover": "recovered", "replay": "replayed"}


def add_filter_arguments(parser: Any) -> None:
    """The filter of a bulk action (docs/howto/operating-many-runs.md): any of these makes the command act
    on every actor the filter selects (with ``--name``: of that one type), in batches, with a progress bar."""
    parser.add_argument(
        "--state", metavar="S", help="only actors in this workflow state (e.g. failed, paused)"
    )
    parser.add_argument(
        "--attr",
        action="append",
        metavar="KEY=VALUE",
        help="only actors with this search attribute (repeatable)",
    )
    parser.add_argument("--since", metavar="ISO", help="only actors created after this instant (ISO 8601)")
    parser.add_argument("--until", metavar="ISO", help="only actors created before this instant (ISO 8601)")
    if not any(a.dest == "dry_run" for a in parser._actions):
        parser.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")


def _instant(text: str | None, option: str) -> Any:
    """An ISO 8601 instant of ``--since``/``--until`` (one without an offset is UTC)."""
    if text is None:
        return None
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise CommandError(f"{option}: not an ISO 8601 instant: {text!r}") from exc
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def filter_of(options: dict) -> Any:
    """The ``ActorFilter`` of the filter options, or None when none is given (CommandError for a bad one)."""
    from ..engine.model import errors
    from ..engine.model.attributes import parse_pairs
    from ..engine.operate import search

    chosen = [options.get(k) for k in ("state", "attr", "since", "until")]
    if not any(chosen):
        return None
    names = options.get("name") or []
    if len(names) > 1:
        raise CommandError("with a filter, --name takes one actor type")
    try:
        return search.make_filter(
            names[0] if names else None,
            options.get("state"),
            parse_pairs(options.get("attr") or []) or None,
            _instant(options.get("since"), "--since"),
            _instant(options.get("until"), "--until"),
        )
    except errors.RivetWorkflowsError as exc:
        raise CommandError(str(exc)) from exc


def _act_by_filter(command: Any, sub: str, query: Any, options: dict) -> None:
    """``rivet <action> --state/--name/--attr/--since/--until``: the action on every actor the filter
    selects (``engine.search.bulk_by_filter``: batches, an audit row ``bulk_<action>`` per changed actor, by
    ``command``), a progress bar on a terminal, then one line per outcome; exit 1 when any was refused."""
    from .. import django_runtime
    from ..engine.actor import audit
    from ..engine.operate import search

    out = command.stdout
    runtime = django_runtime.get_runtime()
    dry = bool(options.get("dry_run"))
    total = search.count(runtime, query)
    with console.progress(command.stderr) as track:
        ticks = iter(track(range(total), total, f"{sub} (dry run)" if dry else sub))
        result = search.bulk_by_filter(
            runtime,
            sub,
            query,
            who=audit.COMMAND,
            reason=options.get("reason"),
            dry_run=dry,
            progress=lambda _done: next(ticks, None),
        )
        for _rest in ticks:  # the bar ends full even when fewer matched than were counted
            pass
    verb = f"would be {_DONE_BY_FILTER[sub]}" if dry else _DONE_BY_FILTER[sub]
    out.write(f"matched: {result.matched}")
    out.write(f"{verb}: {result.changed} {' '.join(result.actor_ids)}".rstrip())
    out.write(f"unchanged: {result.unchanged}")
    for actor_id, why in result.refused.items():
        out.write(f"  {actor_id} {why}")
    if result.refused and not dry:
        raise CommandError(
            _count(len(result.refused), "actor was", "actors were") + f" not {_DONE_BY_FILTER[sub]}"
        )


def handle(command: Any, sub: str, options: dict) -> None:
    """Run subcommand ``sub`` for the management ``command`` (its stdout/style are used)."""
    from .. import django_runtime, ops

    out = command.stdout
    if sub in _DONE_BY_FILTER:
        query = filter_of(options)
        if query is not None:
            _act_by_filter(command, sub, query, options)
            return
        if sub == "replay":
            raise CommandError(
                "say which workflows to replay: --state, --name with --attr, --since or --until"
            )
        if sub in _DONE and options.get("dry_run"):
            raise CommandError("--dry-run goes with a filter (--state, --attr, --since or --until)")
    if sub == "check":
        include_failed = bool(options.get("include_failed"))
        with console.progress(command.stderr) as track:
            results = ops.check(
                django_runtime.get_runtime(), options.get("name"), include_failed=include_failed, track=track
            )
        blocking = [r for r in results if ops.blocks_deploy(r)]
        listed = [r for r in results if r.outcome != "ok" and not ops.blocks_deploy(r)]
        verbose = bool(options.get("verbose"))
        for r in results:
            # the key as JSON, cut short: a 1 KB key must not make a 1 KB line (the actor id names it whole)
            line = f"{r.outcome:8} {r.name} {display.short_key(r.key)} {r.actor_id} [{r.workflow_state}]"
            line += _where(r)
            if r.outcome != "ok":
                style = command.style.ERROR if ops.blocks_deploy(r) else command.style.WARNING
                out.write(style(line) + (f"\n    {r.message}" if verbose else ""))
            else:
                out.write(line)
            if r.suspension:
                out.write(f"    {_suspension(r.suspension)}")
        _summarise(command, blocking)
        what = "in-flight or failed workflow" if include_failed else "in-flight workflow"
        checked = _count(len(results), what, what + "s")
        out.write(f"checked {checked}: {_count(len(blocking), 'problem', 'problems')}")
        if listed:  # failed, rolled-back or still suspended runs this deploy does not change: not a problem
            out.write(
                _count(len(listed), "run is listed", "runs are listed")
                + " above that this deploy does not break (not recoverable as they are, or still suspended "
                "by their code error): "
                + ("it does" if len(listed) == 1 else "they do")
                + " not change the exit code"
            )
        awaiting = [r for r in results if r.awaiting_code_version]
        if awaiting:  # left during a rolling deploy by a worker of another version (DESIGN.md section 12)
            out.write(
                _count(len(awaiting), "workflow waits", "workflows wait")
                + " for a worker of another code version: "
                + ", ".join(sorted({str(r.awaiting_code_version) for r in awaiting}))
            )
        other = [r for r in blocking if r.other_version]
        if other:
            out.write(
                _count(len(other), "workflow diverges", "workflows diverge")
                + " only on entries another code version wrote (a worker of that version runs them; "
                "retiring it leaves them waiting): "
                + ", ".join(sorted({str(r.other_version) for r in other}))
            )
        if blocking:
            failing = _count(len(blocking), f"{what} does", f"{what}s do")
            raise CommandError(f"{failing} not replay on the current code")
    elif sub == "gates":
        report = ops.gates(django_runtime.get_runtime(), options.get("name"))
        for name, count in sorted(report.in_flight.items()):
            out.write(f"{name}: {count} in flight")
        if not report.rows:
            out.write("no version gates or removed entries recorded by in-flight actors")
        for row in report.rows:
            what = f"version {row.version}" if row.kind == "version_check" else "removed marker"
            out.write(f"  {row.actor} {row.location} ({row.kind}): {what}, {row.in_flight} in flight")
    elif sub == "recover":
        _recover(command, options)
    elif sub in _DONE:
        _act(command, sub, options)
    elif sub == "prune":
        try:
            with console.progress(command.stderr) as track:
                count = ops.prune(
                    django_runtime.get_runtime(),
                    options["older_than"],
                    dry=options.get("dry_run", False),
                    track=track,
                )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        verb = "would delete" if options.get("dry_run") else "deleted"
        days = options["older_than"]
        age = f"{days:g} day" if days == 1 else f"{days:g} days"
        out.write(f"{verb} {_count(count, 'finished actor', 'finished actors')} older than {age}")


def _act(command: Any, sub: str, options: dict) -> None:
    """``rivet pause|resume|cancel|retry``: one line with what was changed, then each actor left unchanged and
    each refused with why; CommandError (exit 1) when any was refused, after acting on every other one."""
    from .. import django_runtime, ops
    from ..engine.operate import bulk

    out = command.stdout
    try:
        report = ops.act(
            django_runtime.get_runtime(),
            sub,
            actor_ids=options.get("actor"),
            names=options.get("name"),
            reason=options.get("reason"),
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    out.write(f"{_DONE[sub]}: {len(report.changed)} {' '.join(report.changed)}".rstrip())
    if sub == "cancel" and options.get("children"):  # DESIGN.md section 20: the descendants of each one
        from ..engine.actor import audit, cancel

        runtime = django_runtime.get_runtime()
        descendants: list[str] = []
        for actor_id in report.changed + report.ids(bulk.UNCHANGED):
            descendants += cancel.cancel_tree(
                runtime, actor_id, who=audit.COMMAND, reason=options.get("reason")
            )
        out.write(f"cancelled children: {len(descendants)} {' '.join(descendants)}".rstrip())
    for kind in (bulk.UNCHANGED, bulk.REFUSED):
        outcomes = report.of(kind)
        if outcomes:
            out.write(f"{kind}: {len(outcomes)}")
            for o in outcomes:
                out.write(f"  {o.actor_id} {o.reason}")
    refused = report.of(bulk.REFUSED)
    if refused:
        raise CommandError(
            _count(len(refused), "actor was", "actors were")
            + f" not {_DONE[sub]}: "
            + "; ".join(f"{o.actor_id} {o.reason}" for o in refused)
        )


def _recover(command: Any, options: dict) -> None:
    """``rivet recover``: expired leases are always woken (unless --failed-only); failed workflows are
    restarted only when chosen (--all, --name or --actor), otherwise listed with how to restart them."""
    from .. import django_runtime, ops

    out = command.stdout
    runtime = django_runtime.get_runtime()
    names, actor_ids = options.get("name"), options.get("actor")
    dry = bool(options.get("dry_run"))
    chosen = bool(options.get("all") or names or actor_ids)
    if options.get("failed_only") and not chosen:
        raise CommandError("--failed-only restarts failed workflows: say which with --all, --name or --actor")
    restart = chosen and not options.get("leases_only")
    with console.progress(command.stderr) as track:
        report = ops.recover(
            runtime,
            reason=options.get("reason"),
            names=names,
            actor_ids=actor_ids,
            leases=not options.get("failed_only"),
            failed=restart,
            dry=dry,
            track=track,
        )
    leases, failed = ("to wake", "to recover") if dry else ("woken", "recovered")
    if not options.get("failed_only"):
        out.write(f"expired leases {leases}: {len(report.expired_leases)} {' '.join(report.expired_leases)}")
    if restart:
        out.write(f"failed workflows {failed}: {len(report.recovered)} {' '.join(report.recovered)}".rstrip())
        _write_refused(out, report.refused)
        if report.refused and not dry:
            raise CommandError(
                _count(len(report.refused), "failed workflow was", "failed workflows were")
                + " not recovered: "
                + "; ".join(f"{r.actor_id} {r.reason}" for r in report.refused)
            )
    elif not options.get("leases_only"):
        # a summary: the refusal predicate only (the dry replay is --dry-run's)
        with console.progress(command.stderr) as track:
            listed = ops.recover(
                runtime, leases=False, failed=True, dry=True, replay_check=False, track=track
            )
        ids = [*listed.recovered, *(r.actor_id for r in listed.refused)]
        out.write(f"failed workflows not restarted: {len(ids)} {' '.join(ids)}".rstrip())
        _write_refused(out, listed.refused)
        if listed.recovered:
            out.write(
                "  restart them with --all, or choose with --name TYPE / --actor ID (fix the cause first: "
                "a permanent failure fails again); --dry-run shows what would happen"
            )


def _write_refused(out: Any, refused: list) -> None:
    """One line per failed workflow recover refuses: ``  <actor id> refused: rolled back (...); replay
    from 'reserve' or replay all`` (``ops.Refused``; the reason names the step to replay from)."""
    for r in refused:
        out.write(f"  {r.actor_id} {r.reason}")
