"""How the Django stores use a database connection: idle checks, transactions, deadlock retries, file locks.

A mixin of ``DjangoStore``: the host class provides ``using`` (the alias), ``poll_interval``,
``lock_timeout`` and ``idle_check`` (seconds). Every call uses the calling thread's connection (Django
keeps one per thread and alias).

A connection the database server (or PgBouncer, a load balancer, a failover) closed while it sat idle must
not fail a healthy workflow (manual: Failures and what happens): every member of ``ports.Store`` is wrapped
(``guarded``) so that, before it uses a connection it left idle for more than ``idle_check`` seconds (or one
that saw an error), it checks the connection and closes a dead one; the call then opens a new one. The check
is a look at a psycopg connection's socket (no round trip: a server that ends a session sends an error or end
of file first) and, when something waits there, the connection saw an error or it sat idle over
``PING_AFTER_SECONDS``, Django's ``is_usable()`` (one round trip). Nothing was sent on the dead connection, so the call (a commit too) runs as
if nothing happened, under the same lease and token. A call the database refused because it had ended the
session before the call arrived (``_never_ran``: PostgreSQL's idle-session timeout) is retried once on a
new connection. A failure whose outcome is unknown (sent, then the connection broke) is raised as before.
Inside an enclosing transaction nothing is checked or retried (the transaction is the caller's).

A store call that still fails because the database is unreachable (Django's or the driver's
``OperationalError``/``InterfaceError``: a dropped connection, a terminated backend, a server restart) raises
the engine's ``StoreUnavailableError`` (``__cause__``: the original), at every nesting depth, so no caller
blames it on user code (the HTTP API answers 503 ``store_unavailable``). An exception raised by user code
the store runs (the action of ``run_action``, ``user_code``) passes through as it is.
"""

from __future__ import annotations

import contextlib
import functools
import select
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connections, transaction

from ..engine.model import errors, ports
from .locks import ActorLocks

#: the store members that use a connection: every member of the port but the one that closes it
GUARDED = frozenset(n for n in dir(ports.Store) if not n.startswith("_")) - {
    "close_thread_connection",
    "release_connection",
    "same_shard",  # no query: a shard map's answer
    "actor_id_for_key",
    "relay_sources",
}


class _Calls(threading.local):
    """Per thread: ``depth`` of nested store calls; ``last``: alias -> monotonic instant the thread's
    connection was last used (the end of a query, or of a store call)."""

    def __init__(self) -> None:
        self.depth = 0
        self.last: dict[str, float] = {}
        #: the exception user code run by the store raised last (``user_code``): passed through untranslated
        self.user_error: BaseException | None = None
        #: the Django connection of the outermost store call running on this thread (``Connections._db``)
        self.db: Any = None


_calls = _Calls()


#: a connection idle longer than this (seconds) is checked with a round trip even when its socket is quiet:
#: a middlebox that dropped it silently (a NAT or load balancer idle timeout) answers only the next packet
PING_AFTER_SECONDS = 30.0


def _quiet(connection: Any) -> bool:
    """True when ``connection`` (a Django connection wrapper) is a psycopg 3 connection in good standing
    with nothing waiting on its socket: a server that ended the session (``idle_session_timeout``, a
    restart, a failover, PgBouncer closing the client) has sent an error or end of file there, so a quiet
    socket needs no ``SELECT 1`` round trip. False for any other driver, or when in doubt."""
    pgconn = getattr(connection.connection, "pgconn", None)
    if pgconn is None:
        return False
    try:
        if pgconn.status != 0 or pgconn.transaction_status != 0:  # CONNECTION_OK, PQTRANS_IDLE
            return False
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
    except Exception:  # a closed or unusual connection: check it the usual way
        return False
    return not readable


def _note_query(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict) -> Any:
    """A Django execute wrapper on the connections the stores use: every query (the stores', the
    application's) marks the connection as used, so an idle spell is measured from the last query."""
    try:
        return execute(sql, params, many, context)
    finally:
        _calls.last[context["connection"].alias] = time.monotonic()


#: the functions ``guarded`` made (a subclass does not wrap what it inherits wrapped)
_WRAPPED: set[Callable[..., Any]] = set()


def user_code(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (user code a store member runs, e.g. an action) marked so that what it raises, a database
    error too, leaves the store as it is instead of as ``StoreUnavailableError`` (it is the user's)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BaseException as exc:
            _calls.user_error = exc
            raise

    return run


def is_unavailable(self: Connections, exc: BaseException) -> bool:
    """True when ``exc`` says the database cannot be reached (not a refusal of the statement): Django's or the
    driver's ``OperationalError``/``InterfaceError`` that user code run by the store did not raise. A
    deadlock or lock timeout is an ``OperationalError`` too, but ``_retry_on_deadlock`` handles those."""
    if exc is _calls.user_error:
        return False
    driver = getattr(connections[self.using], "Database", None)
    kinds: tuple[type[BaseException], ...] = (OperationalError, InterfaceError)
    if driver is not None:
        kinds += (driver.OperationalError, driver.InterfaceError)
    return isinstance(exc, kinds)


def _unavailable(exc: BaseException) -> errors.StoreUnavailableError:
    return errors.StoreUnavailableError(
        f"the database is unavailable: {type(exc).__name__}: {str(exc).strip()}; try again shortly"
    )


def guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a store member: the outermost store call of a thread checks an idle connection first and
    retries once a call the database never ran (see the module docstring); nested calls run as they are.
    At every depth a failure of the database itself (``is_unavailable``) leaves as ``StoreUnavailableError``."""

    @functools.wraps(method)
    def call(self: Connections, *args: Any, **kwargs: Any) -> Any:
        if _calls.depth:
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:
                if is_unavailable(self, exc):
                    raise _unavailable(exc) from exc
                raise
        _calls.depth = 1
        _calls.user_error = None
        _calls.db = connections[self.using]
        try:
            self._check_idle_connection()
            try:
                return method(self, *args, **kwargs)
            except DatabaseError as exc:
                connection = connections[self.using]
                if connection.in_atomic_block or not self._never_ran(exc):
                    raise
                connection.close()
                return method(self, *args, **kwargs)
        except Exception as exc:
            if is_unavailable(self, exc):
                raise _unavailable(exc) from exc
            raise
        finally:
            self._note_connection_use()
            _calls.depth = 0
            _calls.user_error = None
            _calls.db = None

    _WRAPPED.add(call)
    return call


#: the first keyword of a statement that writes (what an atomic step may send only through the store's alias)
_WRITES = frozenset(
    {
        "INSERT",
        "UPDATE",
        "DELETE",
        "REPLACE",
        "MERGE",
        "UPSERT",
        "CREATE",
        "ALTER",
        "DROP",
        "TRUNCATE",
        "COPY",
    }
)


def _is_write(sql: Any) -> bool:
    words = str(sql).lstrip(" \t\n(").split(None, 1)
    return bool(words) and words[0].upper() in _WRITES


@contextlib.contextmanager
def writes_only_through(alias: str) -> Iterator[None]:
    """For the ``with`` body on this thread, a write through any database alias but ``alias`` raises
    ``AtomicStepError`` before it is sent (an execute wrapper on the thread's other connections; reads
    pass). An atomic step's body runs so: only ``alias`` is in the transaction that records the step."""

    def refuse(other: str) -> Callable[..., Any]:
        def wrapper(execute: Callable[..., Any], sql: Any, params: Any, many: bool, context: dict) -> Any:
            if _is_write(sql):
                raise errors.AtomicStepError(
                    f"an atomic step wrote through the database alias {other!r}; only the store's alias "
                    f"{alias!r} commits with the step (use .using({alias!r}), or a plain step for writes "
                    "elsewhere)",
                    alias=other,
                    store_alias=alias,
                )
            return execute(sql, params, many, context)

        return wrapper

    with contextlib.ExitStack() as stack:
        for other in connections:
            if other != alias:
                stack.enter_context(connections[other].execute_wrapper(refuse(other)))
        yield


class Connections:
    """Connection handling of ``DjangoStore`` (see the module docstring). Subclasses get their members of
    ``ports.Store`` wrapped by ``guarded`` when the class is created."""

    using: str
    poll_interval: float
    lock_timeout: float
    #: seconds a connection may sit idle before the next store call checks it (0: check every call)
    idle_check: float
    #: the per-actor file locks (``_actor_locks``); False until decided on first use
    _locks: ActorLocks | None | bool

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in GUARDED:
            method = next((klass.__dict__[name] for klass in cls.__mro__ if name in klass.__dict__), None)
            if callable(method) and method not in _WRAPPED:
                setattr(cls, name, guarded(method))

    def _db(self) -> Any:
        """This thread's Django connection of the store's alias: the one the outermost store call running
        looked up (one lookup per call: ``connections[alias]`` goes through asgiref's ``Local``), else
        ``connections[self.using]``."""
        db = _calls.db
        if db is not None and db.alias == self.using:
            return db
        return connections[self.using]

    def _check_idle_connection(self) -> None:
        """Close this thread's connection if it sat idle over ``idle_check`` seconds since its last query
        (or saw an error) and the database no longer answers on it (Django's ``is_usable()``, one round
        trip; skipped for a psycopg connection idle under ``PING_AFTER_SECONDS`` whose socket is quiet,
        ``_quiet``); the next query opens a new one. From its first store call on, a thread's connection has its
        queries timed (``_note_query``); before that, its idle time is unknown and it is not checked."""
        connection = self._db()
        if connection.connection is None or connection.in_atomic_block:
            return
        if _note_query not in connection.execute_wrappers:
            connection.execute_wrappers.append(_note_query)
        last = _calls.last.get(self.using)
        idle = last is not None and time.monotonic() - last > self.idle_check
        if not (idle or connection.errors_occurred):
            return
        if (
            not connection.errors_occurred
            and time.monotonic() - last < PING_AFTER_SECONDS
            and _quiet(connection)
        ):
            return
        if connection.is_usable():
            connection.errors_occurred = False
        else:
            connection.close()

    def _note_connection_use(self) -> None:
        """The end of a store call counts as a use of the connection (a warm wait uses it without a query)."""
        if self._db().connection is not None:
            _calls.last[self.using] = time.monotonic()

    def _never_ran(self, error: DatabaseError) -> bool:
        """True when ``error`` proves the database never ran the failed call (safe to run it again on a new
        connection). A portable store cannot tell: False; the PostgreSQL store knows some SQLSTATEs."""
        return False

    def _atomic(self) -> Any:
        return transaction.atomic(using=self.using)

    def _actor_locks(self) -> ActorLocks | None:
        """Per-actor file locks when the database is a file without row locks (SQLite), else None."""
        if self._locks is False:
            connection = connections[self.using]
            name = str(connection.settings_dict.get("NAME") or "")
            file_backed = bool(name) and ":memory:" not in name and "mode=memory" not in name
            if not connection.features.has_select_for_update and file_backed:
                self._locks = ActorLocks(f"{name}.locks")
            else:
                self._locks = None
        return self._locks

    @contextlib.contextmanager
    def _serialised(self, actor_id: str, timeout: float | None = None) -> Iterator[None]:
        """Hold the actor's file lock where the database has no row locks (see ``locks``); else nothing."""
        locks = self._actor_locks()
        if locks is None or not actor_id.isalnum():  # no such actor can exist: the query says so
            yield
            return
        with locks.hold(actor_id, self.lock_timeout if timeout is None else timeout):
            yield

    def _retry_on_deadlock(self, fn: Callable[[], Any], attempts: int = 3) -> Any:
        """Call ``fn`` (one whole transaction); retry when the database aborted it for a deadlock/lock timeout.

        Only outside an enclosing atomic block: inside one, the outer transaction is broken and the
        error must propagate.
        """
        for attempt in range(attempts):
            if self._db().in_atomic_block:
                return fn()
            try:
                return fn()
            except OperationalError as exc:
                text = str(exc).lower()
                if attempt == attempts - 1 or not ("deadlock" in text or "database is locked" in text):
                    raise
                time.sleep(self.poll_interval * (attempt + 1))
        raise AssertionError("unreachable")

    def release_connection(self) -> None:
        """Close this thread's connection of the store's alias (``Store.release_connection``: a waiting
        send's pause holds none; with a pool it goes back to the pool), unless a transaction is open on it."""
        connection = connections[self.using]
        if not connection.in_atomic_block:
            connection.close()

    def close_thread_connection(self) -> None:
        """Close this thread's database connections (called by the lease-keeper thread when the last run it renewed for stops)."""
        for conn in connections.all(initialized_only=True):
            conn.close()
