"""The pure plans of the repairs (ENGINE-SEMANTICS.md section 9): which history entries a replay deletes
and reopens, which a recover resets, and which were compensated by a rollback. No store, no clock: the
repairs (``repairs``) and the checks of the commands apply them."""

from __future__ import annotations

from ..model import errors, ports
from ..run.history import parent_key

__all__ = [
    "compensated",
    "history_after_recover",
    "plan_fork",
    "plan_recover",
    "plan_replay",
    "plan_replay_resets",
]


def plan_replay(entries: list[ports.EntryRecord], entry_id: str | None) -> list[str]:
    """Keys to delete for a replay from ``entry_id`` (None: every key, a replay of the whole workflow).

    The target must be a step entry (``errors.InvalidReplayTargetError``; ``errors.EntryNotFoundError`` if absent). The
    boundary is the target itself, or, when the target is inside loops, the innermost enclosing loop
    entry; every entry created at or after the boundary (``seq >= boundary.seq``) is deleted, earlier
    entries are kept untouched (ENGINE-SEMANTICS.md section 9).
    """
    ordered = sorted(entries, key=lambda e: e.seq)
    if entry_id is None:
        return [e.key for e in ordered]
    by_key = {e.key: e for e in ordered}
    target = by_key.get(entry_id)
    if target is None:
        raise errors.EntryNotFoundError(f"the workflow history has no entry {entry_id!r}", entry_id=entry_id)
    if target.kind != "step":
        raise errors.InvalidReplayTargetError(
            f"entry {entry_id!r} is a {target.kind}, not a step; replay from a step", entry_id=entry_id
        )
    boundary = target
    key = target.key
    while key:
        key = parent_key(key)
        ancestor = by_key.get(key)
        if ancestor is not None and ancestor.kind == "loop":
            boundary = ancestor
            break
    return [e.key for e in ordered if e.seq >= boundary.seq]


def plan_replay_resets(entries: list[ports.EntryRecord], deletes: list[str]) -> list[ports.EntryRecord]:
    """Upserts that reopen every kept join or race holding a deleted entry (a replay from a step inside a
    branch): the join marks that branch running again, the race forgets its outcome; both go back to
    running with no ``completed_at``. A finished join or race replays its recorded outcome without running
    its branches (case C49), so without this the replayed branch would never run again.
    """
    by_key = {e.key: e for e in entries}
    gone = set(deletes)
    reopened: dict[str, ports.EntryRecord] = {}
    for key in deletes:
        child = key
        parent = parent_key(key)
        while parent:
            holder = by_key.get(parent)
            if holder is not None and holder.kind in ("join", "race") and parent not in gone:
                reset = reopened.get(parent) or holder.copy()
                branch = child[len(parent) + 1 :].split("/", 1)[0]
                branches = {b: dict(v) for b, v in (reset.data.get("branches") or {}).items()}
                if reset.kind == "join":
                    branches[branch] = {"status": "running"}
                    reset.data = {**reset.data, "branches": branches}
                else:
                    reset.data = {"winner": None, "branches": {b: {"status": "pending"} for b in branches}}
                reset.status = ports.ENTRY_RUNNING
                reset.completed_at = None
                reopened[parent] = reset
            child, parent = parent, parent_key(parent)
    return list(reopened.values())


def plan_recover(entries: list[ports.EntryRecord]) -> list[ports.EntryRecord]:
    """Upserts that reset every failed or exhausted step to pending with 0 attempts and no error.

    The stored failure (``data["failure"]``/``data["error"]``) and ``last_attempt_at`` are cleared so the
    step runs again at once (ENGINE-SEMANTICS.md section 3, "Recover").
    """
    fixed: list[ports.EntryRecord] = []
    for entry in entries:
        if entry.status in (ports.ENTRY_FAILED, ports.ENTRY_EXHAUSTED):
            reset = entry.copy()
            reset.status = ports.ENTRY_PENDING
            reset.attempts = 0
            reset.error = None
            reset.last_attempt_at = None
            reset.data.pop("failure", None)
            reset.data.pop("error", None)
            fixed.append(reset)
    return fixed


def history_after_recover(entries: list[ports.EntryRecord]) -> list[ports.EntryRecord]:
    """``entries`` as ``recover`` would leave them: the ``plan_recover`` resets in place of the originals."""
    reset = {e.key: e for e in plan_recover(entries)}
    return [reset.get(e.key, e) for e in entries]


def compensated(entries: list[ports.EntryRecord]) -> list[ports.EntryRecord]:
    """Entries whose rollback handler ran (``rollback_completed_at``) or failed (``rollback_error``), in
    creation order: the work they did was undone, or partly undone, by the workflow's rollback."""
    hit = [e for e in entries if e.rollback_completed_at is not None or e.rollback_error is not None]
    return sorted(hit, key=lambda e: e.seq)


def plan_fork(entries: list[ports.EntryRecord], entry_id: str | None) -> list[ports.EntryRecord]:
    """The history a fork from ``entry_id`` starts with (DESIGN.md section 19): copies of the entries a
    replay from that step would keep (``plan_replay``: everything before the step, or before its innermost
    enclosing loop; every entry when ``entry_id`` is None), in creation order, with

    * the joins and races holding a step left out reopened (``plan_replay_resets``), so the branch runs;
    * failed and exhausted steps reset to pending with no attempts (``plan_recover``): they run afresh;
    * a completable message received but not completed marked completed in the copy: its sender waits on
      the source actor, and a completion by the fork would answer a message of another actor.

    Raises ``EntryNotFoundError`` and ``InvalidReplayTargetError`` as ``plan_replay`` does. The copies keep
    keys, kinds, data (a received message's body is in its entry: the fork does not need the message),
    attempts, times and seq order; the caller refuses compensated entries (``compensated``).
    """
    gone = set(plan_replay(entries, entry_id)) if entry_id is not None else set()
    reopened = {e.key: e for e in plan_replay_resets(entries, sorted(gone))}
    kept = [reopened.get(e.key, e).copy() for e in sorted(entries, key=lambda e: e.seq) if e.key not in gone]
    recovered = {e.key: e for e in plan_recover(kept)}
    out: list[ports.EntryRecord] = []
    for entry in kept:
        entry = recovered.get(entry.key, entry)
        data = entry.data
        if entry.kind == "message" and data.get("completable") and not data.get("completed"):
            entry.data = {**data, "completed": True}
        out.append(entry)
    return out
