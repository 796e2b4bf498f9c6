"""The operator audit: what an operator action records and how it is read back (DESIGN.md section 12).

Every operator action (replay, replay all, recover, cancel, pause, resume, retry, fork, and each of them as one actor
of a bulk action) writes one ``ports.OperatorActionRecord``: a repair or a cancel hands it to the store as
``Commit.audit``, in the transaction that makes the change, so an action is never done without its row
(nor the row written for an action that was refused); an action with no fenced commit of its own calls
``record``. The history entries an action deletes or resets are archived in the row as they were.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..model import ports, serde

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

#: the actions (``bulk_<action>`` when done as part of a bulk action)
REPLAY = "replay"
REPLAY_ALL = "replay_all"
RECOVER = "recover"
CANCEL = "cancel"
PAUSE = "pause"
RESUME = "resume"
#: a suspended run retried (DESIGN.md section 16)
RETRY = "retry"
#: a fork (DESIGN.md section 19): written on the source and on the new actor, each reason naming the other
FORK = "fork"
ACTIONS = frozenset({REPLAY, REPLAY_ALL, RECOVER, CANCEL, PAUSE, RESUME, RETRY, FORK})

#: ``who`` of an action done through the Python API (``handle.replay``...) and by ``manage.py rivet``
PYTHON = "python"
COMMAND = "command"
#: ``who`` of the automatic retry of a suspended run by the first process of another code version
DEPLOY = "deploy"
#: ``who`` of an HTTP request authenticated by the inspector token (a user is named by their user name)
TOKEN = "token"
#: ``who`` of the cancel of a child whose type declares ``parent_close="cancel"`` when its parent's
#: workflow failed (DESIGN.md section 20)
PARENT_CLOSE = "parent_close"

#: longest reason kept (longer ones are cut, with an ellipsis)
MAX_REASON = 2000


def bulk(action: str) -> str:
    """The name of ``action`` done as one actor of a bulk action (``"bulk_recover"``)."""
    return f"bulk_{action}"


def named(action: str, bulk_action: bool) -> str:
    """``action``, or its ``bulk`` form when it was done as one actor of a bulk action."""
    return bulk(action) if bulk_action else action


def archive(entries: Iterable[ports.EntryRecord]) -> list:
    """The entries as they are, each the tagged JSON (``serde.to_json``) of its ``EntryRecord`` fields,
    in creation order: what an audit row keeps of the entries an action deleted or reset."""
    ordered = sorted(entries, key=lambda e: e.seq)
    return [serde.to_json(dataclasses.asdict(e), where="archived history entry") for e in ordered]


def archived_records(action: ports.OperatorActionRecord) -> list[ports.EntryRecord]:
    """The ``EntryRecord``s an audit row archived (decoded from ``archive``'s JSON)."""
    return [ports.EntryRecord(**serde.from_json(item)) for item in action.archived_entries]


def action_record(
    actor_id: str,
    action: str,
    who: str,
    reason: str | None = None,
    archived: Iterable[ports.EntryRecord] = (),
) -> ports.OperatorActionRecord:
    """An audit row to write (``Commit.audit`` or ``record``). ``action`` one of ``ACTIONS`` or its
    ``bulk`` form (``ValueError`` otherwise); ``who`` a non-empty str; ``reason`` stripped, empty -> None,
    cut to ``MAX_REASON`` characters; ``archived`` the entries the action deletes or resets."""
    if action not in ACTIONS and not (action.startswith("bulk_") and action[5:] in ACTIONS):
        raise ValueError(f"unknown operator action {action!r}; one of {sorted(ACTIONS)} (or bulk_<action>)")
    if not isinstance(who, str) or not who:
        raise ValueError("who must be a non-empty str (a user name, 'token', 'python' or 'command')")
    text = reason.strip() if isinstance(reason, str) else None
    if text and len(text) > MAX_REASON:
        text = text[: MAX_REASON - 1] + "…"
    return ports.OperatorActionRecord(
        actor_id=actor_id, action=action, who=who, reason=text or None, archived_entries=archive(archived)
    )


def record(
    runtime: RuntimeRole,
    actor_id: str,
    action: str,
    *,
    who: str,
    reason: str | None = None,
    archived: Iterable[ports.EntryRecord] = (),
) -> ports.OperatorActionRecord:
    """Write an audit row on its own, for an action that has no fenced commit to carry it (arguments as
    ``action_record``); returns it with ``at`` and ``id``. ``ActorNotFoundError``. Sync."""
    return runtime.store.record_operator_action(action_record(actor_id, action, who, reason, archived))


def _plain_entry(item: Any) -> dict:
    plain, types = serde.to_plain(serde.from_json(item), where="archived history entry")
    return {**plain, "types": types} if types else plain


def view(row: ports.OperatorActionRecord) -> dict[str, Any]:
    """One audit row for people and HTTP: ``{action, who, reason, at, archived_entries}`` (``at`` an aware
    datetime). Each archived entry is plain JSON (``serde.to_plain``: instants as ISO 8601 strings...)
    with the ``EntryRecord`` field names, and ``types`` where a value is not plain JSON."""
    return {
        "action": row.action,
        "who": row.who,
        "reason": row.reason,
        "at": row.at,
        "archived_entries": [_plain_entry(item) for item in row.archived_entries],
    }


def history_of(runtime: RuntimeRole, actor_id: str, *, limit: int | None = None) -> dict[str, list]:
    """``{"items": [view(row), ...]}`` of ``actor_id``'s audit rows, newest first (at most ``limit``).
    ``ActorNotFoundError`` for an unknown actor."""
    runtime.store.get_actor(actor_id)
    return {"items": [view(row) for row in runtime.store.operator_actions(actor_id, limit=limit)]}
