"""A run's write buffer: every write of one run waits here until the run's next commit takes it."""

from __future__ import annotations

from typing import Any

from ..model import ports
from .history import History


class WriteBuffer:
    """The pending writes of one run: history entries (``history``'s upserts and deletes), messages the run
    received and completed, and messages its steps and hooks sent (the outbox).

    Invariants: a write recorded here reaches the store in the run's next commit or not at all (``take``
    hands everything to one ``Commit``; ``restore`` puts it back when that commit did not happen, so the
    next one carries it). A message id once received in this run stays ``taken`` for the rest of the run,
    so two queue waits (two branches of a join) never receive the same message.
    """

    def __init__(self, history: History) -> None:
        self.history = history
        self._receive: list[str] = []
        self._complete: list[tuple[str, Any]] = []
        self._outbox: list[tuple[str, str, Any, bool]] = []
        self._taken: set[str] = set()
        #: search attributes to merge into the actor's with the next commit (DESIGN.md section 19)
        self._attributes: dict[str, Any] = {}

    # --- recording -----------------------------------------------------------------------------------

    def record(self, entry: ports.EntryRecord) -> None:
        """Remember ``entry`` (already in the history) as changed: the next commit upserts it."""
        self.history.put(entry)

    def receive(self, message_id: str) -> None:
        """Mark the pending message ``message_id`` received (``MESSAGE_RECEIVED``) with the next commit."""
        self._receive.append(message_id)
        self._taken.add(message_id)

    def complete(self, message_id: str, response: Any) -> None:
        """Record ``response`` (already round-tripped) for the completable message ``message_id``."""
        self._complete.append((message_id, response))

    def send(self, actor_id: str, name: str, body: Any, completable: bool = False) -> None:
        """Deliver ``body`` (already round-tripped) to queue ``name`` of ``actor_id`` in the next commit,
        exactly once with it; the store wakes the target like ``Store.send``."""
        self._outbox.append((actor_id, name, body, completable))

    def create_on_other_shard(self, entry: ports.RelayCreate) -> None:
        """Commit ``entry`` (a step body's create of an actor on another shard) with the next commit, in the
        outbox's order (a sharded store moves it to ``Commit.relay``; DESIGN.md section 21)."""
        self._outbox.append(entry)  # type: ignore[arg-type]

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        """Merge ``attributes`` (checked already) into the actor's search attributes with the next commit."""
        self._attributes.update(attributes)

    def add_attributes(self, commit: ports.Commit) -> None:
        """Move the pending attributes onto ``commit`` (merged over any it carries already)."""
        if self._attributes:
            current = commit.attributes if isinstance(commit.attributes, dict) else {}
            commit.attributes = {**current, **self._attributes}
            self._attributes = {}

    # --- reading -------------------------------------------------------------------------------------

    def is_taken(self, message_id: str) -> bool:
        """True when a queue wait of this run received ``message_id`` already."""
        return message_id in self._taken

    @property
    def taken_count(self) -> int:
        """How many messages this run received so far."""
        return len(self._taken)

    @property
    def pending(self) -> bool:
        """True when a write waits for the next commit."""
        return bool(
            self.history.has_changes or self._receive or self._complete or self._outbox or self._attributes
        )

    # --- committing ----------------------------------------------------------------------------------

    def take(self) -> ports.Commit:
        """Hand every pending write to a new ``Commit`` (its other fields UNSET) and forget them."""
        upserts, deletes = self.history.take_changes()
        commit = ports.Commit(
            upserts=upserts,
            deletes=deletes,
            receive_messages=self._receive,
            complete_messages=self._complete,
            outbox=self._outbox,
        )
        self._receive, self._complete, self._outbox = [], [], []
        self.add_attributes(commit)
        return commit

    def restore(self, commit: ports.Commit) -> None:
        """Put back the writes of ``commit``, which did not happen, ahead of any recorded since."""
        self.history.restore_changes(commit.upserts, commit.deletes)
        self._receive[:0] = commit.receive_messages
        self._complete[:0] = commit.complete_messages
        # a store that moved outbox entries to ``relay`` (another shard's targets) gets them back as sends
        self._outbox[:0] = [*commit.outbox, *commit.relay]
        if isinstance(commit.attributes, dict):
            self._attributes = {**commit.attributes, **self._attributes}
