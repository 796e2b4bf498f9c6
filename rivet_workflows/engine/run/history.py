"""A run's in-memory view of one actor's history: locations, the scope index, visits and divergence checks."""

from __future__ import annotations

from collections.abc import Iterable

from ..model import errors, ports

ROOT = ""


def segment(part: str | int) -> str:
    """The string form of one location segment: a name stays as is, a loop iteration ``i`` is ``~i``."""
    return f"~{part}" if isinstance(part, int) else part


def key_of(location: Iterable[str | int]) -> str:
    """The entry key of a location list (ENGINE-SEMANTICS.md section 1): ``["outer", 3, "inner"]`` ->
    ``"outer/~3/inner"``."""
    return "/".join(segment(p) for p in location)


def child_key(parent: str, part: str | int) -> str:
    """The key of ``part`` under the scope or entry key ``parent`` (root is ``""``)."""
    seg = segment(part)
    return f"{parent}/{seg}" if parent else seg


def parent_key(key: str) -> str:
    """The key of the scope or entry directly above ``key`` (``""`` for a root entry)."""
    idx = key.rfind("/")
    return key[:idx] if idx >= 0 else ROOT


def check_name(name: object, what: str = "entry") -> str:
    """Validate a user-given entry name: a non-empty str without "/" or ":" that does not start with "~"
    and holds only characters every store can keep (no lone surrogate, no NUL).

    "/" joins location segments, "~" marks loop iterations and ":" the entries of a queue wait
    (``name:count``, ``name:0``, ``name:deadline``), so a name using them could collide with another entry.
    Returns the name; raises ``ValueError`` otherwise (ENGINE-SEMANTICS.md section 1, location keys).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} name must be a non-empty string, got {name!r}")
    if "/" in name or ":" in name or name.startswith("~"):
        raise ValueError(
            f"{what} name {name!r} may not contain '/' or ':' or start with '~' (they are reserved for "
            "location keys)"
        )
    if not name.isascii() or "\x00" in name:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{what} name {name!r} is not valid UTF-8 text (a lone surrogate?)") from None
        if "\x00" in name:
            raise ValueError(f"{what} name {name!r} may not contain a NUL character")
    return name


def removed_args(key: str, entry: ports.EntryRecord | None) -> tuple[str, str]:
    """``(name, original_type)`` to pass to ``ctx.removed`` for the recorded entry at ``key``.

    A queue wait's entries (``wait:count``, ``wait:0``, ``wait:deadline``) are all retired by
    ``ctx.removed("wait", "message")``; a key without an entry is a try block (``"try"``).
    """
    last = key.rsplit("/", 1)[-1]
    if ":" in last:
        return last.split(":", 1)[0], "message"
    if entry is None:
        return last, "try"
    if entry.kind == "removed":  # a placeholder ``ctx.removed`` wrote: retire it as what it stood for
        return last, str(entry.data.get("original_type") or "step")
    return last, entry.kind


def describe(key: str, kind: str | None) -> str:
    """``step 'charge'`` (or ``entry 'charge'`` when the kind is unknown) for a divergence message."""
    name = key.rsplit("/", 1)[-1]
    shown = f"{name!r}" if name == key else f"{name!r} (at {key!r})"
    return f"{kind or 'entry'} {shown}"


class History:
    """Entries of one actor by key, plus a parent -> children index and the set of keys visited this run.

    Scopes (the root ``""``, a loop iteration ``loop/~i``, a join or race branch ``join/branch``) hold
    entries as direct children; entries (a loop, a join, a race) hold scopes. The index maps every key to its
    children so the divergence check of a scope costs O(children) and a subtree delete O(subtree).
    Invariant: every write made through ``put``/``delete`` is remembered until ``take_changes`` hands it to
    a ``Commit``.

    ``code_version`` is the code version of the process replaying (None: unversioned). With one set, a
    divergence on entries another code version wrote raises ``OtherCodeVersionSignal`` instead of
    ``HistoryDivergedError`` (``diverged``; DESIGN.md section 12, rolling deploys).
    """

    def __init__(self, entries: Iterable[ports.EntryRecord] = (), *, code_version: str | None = None) -> None:
        self.code_version = code_version
        self.entries: dict[str, ports.EntryRecord] = {}
        self.children: dict[str, dict[str, None]] = {}
        self.visited: set[str] = set()
        #: keys a ``ctx.removed`` call visited this run (a divergence right after one is a run past the change)
        self.retired: set[str] = set()
        #: key -> number of its loaded children (entries, or try-block scopes) not visited yet; makes
        #: check_scope O(1) for a clean scope
        self._unvisited: dict[str, int] = {}
        #: every key (entry or scope) present when the history was loaded
        self._loaded: set[str] = set()
        self._dirty: dict[str, ports.EntryRecord] = {}
        self._deleted: dict[str, None] = {}
        self._next_seq = 0
        for entry in sorted(entries, key=lambda e: e.seq):
            self._index(entry)
            self._next_seq = max(self._next_seq, entry.seq + 1)
        for parent, kids in self.children.items():
            self._loaded.update(kids)
            self._unvisited[parent] = len(kids)

    # --- index -------------------------------------------------------------------------------------

    def _index(self, entry: ports.EntryRecord) -> None:
        self.entries[entry.key] = entry
        key = entry.key
        while True:
            parent = parent_key(key)
            siblings = self.children.setdefault(parent, {})
            if key in siblings:
                break
            siblings[key] = None
            if parent == ROOT:
                break
            key = parent

    def get(self, key: str) -> ports.EntryRecord | None:
        """The entry at ``key`` or None."""
        return self.entries.get(key)

    def child_keys(self, key: str) -> list[str]:
        """Keys directly under ``key`` (entries of a scope, or scopes of an entry), in creation order."""
        return list(self.children.get(key, ()))

    def subtree(self, key: str) -> list[str]:
        """Every entry key strictly below ``key``."""
        out: list[str] = []
        stack = list(self.children.get(key, ()))
        while stack:
            k = stack.pop()
            if k in self.entries:
                out.append(k)
            stack.extend(self.children.get(k, ()))
        return out

    # --- visits and divergence -----------------------------------------------------------------------

    def written_at(self, key: str | None) -> list[ports.EntryRecord]:
        """The recorded entries a divergence at ``key`` is about: the entry at ``key``, the entries below it
        and, for a queue wait, its ``key:*`` entries; in creation order."""
        if not key:
            return []
        found = {k: self.entries[k] for k in [key, *self.subtree(key)] if k in self.entries}
        for sibling in self.children.get(parent_key(key), ()):
            if sibling.startswith(f"{key}:") and sibling in self.entries:
                found[sibling] = self.entries[sibling]
        return sorted(found.values(), key=lambda e: e.seq)

    def other_version(self, key: str | None, ours: str | None) -> tuple[bool, str | None]:
        """``(True, version)`` when entries at ``key`` (``written_at``) were written by a code version other
        than ``ours`` (the newest such entry's version), else ``(False, None)``. Entries written by an
        unversioned process belong to no version, and an unversioned process (``ours`` None) owns every
        entry: a divergence there fails the workflow as it always did."""
        if ours is None:
            return False, None
        others = [e for e in self.written_at(key) if e.code_version is not None and e.code_version != ours]
        if not others:
            return False, None
        return True, others[-1].code_version

    def diverged(self, exc: errors.HistoryDivergedError) -> BaseException:
        """What to raise for the divergence ``exc``: ``OtherCodeVersionSignal`` when the entries at its
        ``location`` were written by another code version than this history's ``code_version``, else
        ``exc`` itself."""
        other, version = self.other_version(exc.location, self.code_version)
        if other:
            return errors.OtherCodeVersionSignal(version, exc)
        return exc

    def visit(self, key: str, kind: str, name: str) -> ports.EntryRecord | None:
        """Mark ``key`` visited and return its entry (None when there is none yet).

        Raises ``HistoryDivergedError`` when the recorded entry has another kind (ENGINE-SEMANTICS.md 2).
        """
        entry = self.entries.get(key)
        self._mark(key, entry)
        if entry is not None and entry.kind != kind:
            raise self.diverged(
                errors.HistoryDivergedError(
                    f"history diverged at {key!r}: expected {kind} {name!r}, found {entry.kind}",
                    location=key,
                    expected=kind,
                    found=entry.kind,
                )
            )
        return entry

    def _mark(self, key: str, entry: ports.EntryRecord | None = None) -> None:
        if key in self.visited:
            return
        self.visited.add(key)
        if key in self._loaded:
            self._unvisited[parent_key(key)] -= 1

    def _optional(self, key: str) -> bool:
        """True for an entry whose call the code may drop without diverging: a ``ctx.set_attributes``
        record (it only merged search attributes, which stay as they are)."""
        entry = self.entries.get(key)
        return entry is not None and entry.kind == "attributes"

    def enter_scope(self, key: str) -> None:
        """Mark the block scope ``key`` (a ``try_`` block, which has no entry of its own) visited."""
        self._mark(key)

    def has_unvisited(self, scope: str) -> bool:
        """True when ``scope`` holds recorded children not visited yet in this run (``get_version``)."""
        return bool(self._unvisited.get(scope))

    def visit_prefixed(self, scope: str, prefix: str) -> list[str]:
        """Mark visited every direct child of ``scope`` whose key starts with ``prefix``; returns the keys."""
        keys = [k for k in self.children.get(scope, ()) if k.startswith(prefix)]
        for key in keys:
            self._mark(key)
        return keys

    def check_scope(self, scope: str, before: str | None = None, before_kind: str | None = None) -> None:
        """Raise ``HistoryDivergedError`` if a recorded direct child of ``scope`` was not visited this run.

        Called when a scope finishes and, with ``before`` (the key about to be created, of kind
        ``before_kind``), before a new entry is created in it, so a renamed step fails before it runs
        (ENGINE-SEMANTICS.md section 2). The message says what to do: ``ctx.removed(name, kind)`` for a
        recorded entry the code skipped or dropped, and, when the code reached a new entry while the run has
        recorded entries after the point the code replayed to (the run is already past the change), a
        version gate (``ctx.get_version``), which ``ctx.removed`` cannot replace. The error's metadata:
        ``location`` (the first recorded entry not reached), ``kind`` and, with ``before``, ``reached``.
        """
        if not self._unvisited.get(scope):
            return
        kids = list(self.children.get(scope, ()))
        unvisited = [k for k in kids if k not in self.visited and k in self._loaded and not self._optional(k)]
        if not unvisited:  # pragma: no cover - the counter says there is one
            return
        position = {k: i for i, k in enumerate(kids)}
        last_seen = max((position[k] for k in kids if k in self.visited and k in self._loaded), default=-1)
        skipped = [k for k in unvisited if position[k] < last_seen]
        if before is None or skipped:
            key = (skipped or unvisited)[0]
            name, kind = removed_args(key, self.entries.get(key))
            what = "block" if kind == "try" else kind
            if skipped:
                how = "was skipped by the workflow code (the code replayed entries recorded after it)"
            else:
                how = "was not reached by the workflow code"
            hint = ""
            if before is not None:
                hint = f" (raised before creating the new {describe(before, before_kind)})"
            raise self.diverged(
                errors.HistoryDivergedError(
                    f"history diverged: recorded {what} {key!r} {how}; if it was removed on purpose, call "
                    f"ctx.removed({name!r}, {kind!r}) where it used to be{hint}",
                    location=key,
                    kind=kind,
                    **({"reached": before} if before is not None else {}),
                )
            )
        # The code reached a new entry, and every recorded entry it has not replayed was recorded after the
        # last one it did replay: the run went on past this point under the old code.
        # (first key, name, kind) of each recorded entry, the entries of one queue wait merged
        ahead: list[tuple[str, str, str]] = []
        for key in unvisited:
            name, kind = removed_args(key, self.entries.get(key))
            if not any(a[1] == name and a[2] == kind for a in ahead):
                ahead.append((key, name, kind))
        first_key, first_name, first_kind = ahead[0]
        listed = ", ".join(f"{kind} {name!r}" for _, name, kind in ahead[:3])
        if len(ahead) > 3:
            listed += f" and {len(ahead) - 3} more"
        new = describe(before, before_kind)
        gate = (
            "version gate, e.g. `if await ctx.get_version('<gate-name>', 2) == 2: <new code> else: <old "
            "code>` (a run recorded before the gate resolves 1 and replays the old entries)"
        )
        previous = kids[last_seen] if last_seen >= 0 else None
        if len(ahead) == 1 and previous not in self.retired:
            # The one recorded entry the code did not replay is the last of this scope: nothing was recorded
            # after it, so retiring it with ctx.removed lets this run go on with the new code.
            message = (
                f"history diverged: the code reached the new {new} where this run recorded {first_kind} "
                f"{first_name!r} (the last entry it recorded here). If {first_kind} {first_name!r} was "
                f"removed, renamed or replaced by {new}, call ctx.removed({first_name!r}, {first_kind!r}) "
                f"before it: this run then goes on with the new code. To keep the old {first_kind} for runs "
                f"that recorded it instead, keep both paths behind a {gate}"
            )
        else:
            # Entries recorded after the changed point (or right after a ctx.removed): retiring the first
            # would still leave the later ones, which the new code does not replay.
            message = (
                f"history diverged: the code reached the new {new}, but this run had already recorded "
                f"{listed} after the point the code replayed to, so the run is past this change and "
                "ctx.removed() cannot fit it (the entries recorded after it would still not replay): keep "
                f"the old path for runs like this one behind a {gate}"
            )
        raise self.diverged(
            errors.HistoryDivergedError(message, location=first_key, kind=first_kind, reached=before)
        )

    # --- writes ------------------------------------------------------------------------------------

    def new(self, key: str, kind: str, data: dict | None = None, *, now=None) -> ports.EntryRecord:
        """Create (and remember as a pending write) an entry at ``key``; it counts as visited."""
        location: list = []
        for seg in key.split("/") if key else []:
            if seg.startswith("~") and seg[1:].isdigit():
                location.append(int(seg[1:]))
            else:
                location.append(seg)
        entry = ports.EntryRecord(
            key=key, location=location, kind=kind, data=dict(data or {}), seq=self._next_seq, created_at=now
        )
        self._next_seq += 1
        self._deleted.pop(key, None)
        self._mark(key, self.entries.get(key))
        self._index(entry)
        self._dirty[key] = entry
        return entry

    def put(self, entry: ports.EntryRecord) -> None:
        """Remember ``entry`` (already in the history) as changed; the next commit upserts it."""
        self._dirty[entry.key] = entry

    def delete(self, keys: Iterable[str]) -> None:
        """Drop ``keys`` from the history and the index; the next commit deletes them."""
        for key in keys:
            if self.entries.pop(key, None) is None and key not in self._dirty:
                continue
            self._dirty.pop(key, None)
            self._deleted[key] = None
            if key in self._loaded and key not in self.visited:
                self._unvisited[parent_key(key)] -= 1
            self._loaded.discard(key)
            self.visited.discard(key)
            siblings = self.children.get(parent_key(key))
            if siblings is not None:
                siblings.pop(key, None)
            self.children.pop(key, None)

    def delete_scope(self, scope: str) -> list[str]:
        """Delete every entry under ``scope`` (a loop iteration or a branch) and forget the scope itself."""
        keys = self.subtree(scope)
        self.delete(keys)
        self.children.pop(scope, None)
        siblings = self.children.get(parent_key(scope))
        if siblings is not None:
            siblings.pop(scope, None)
        if scope in self._loaded and scope not in self.visited:
            self._unvisited[parent_key(scope)] -= 1
        self._loaded.discard(scope)
        return keys

    @property
    def has_changes(self) -> bool:
        """True when writes are waiting for the next commit."""
        return bool(self._dirty or self._deleted)

    def take_changes(self) -> tuple[list[ports.EntryRecord], list[str]]:
        """Hand the pending upserts (copies) and deletes to a commit and forget them."""
        upserts = [e.copy() for e in self._dirty.values()]
        deletes = list(self._deleted)
        self._dirty.clear()
        self._deleted.clear()
        return upserts, deletes

    def restore_changes(self, upserts: list[ports.EntryRecord], deletes: list[str]) -> None:
        """Put back changes whose commit did not happen (e.g. a failed write), so the next flush retries."""
        for entry in upserts:
            if entry.key in self.entries and entry.key not in self._dirty:
                self._dirty[entry.key] = self.entries[entry.key]
        for key in deletes:
            if key not in self.entries:
                self._deleted[key] = None
