"""A small local HTTP service standing in for the spec's ``https://api.example.com`` and Stripe calls.

The examples call it with the stdlib ``urllib`` (``get``/``post`` below) at ``service_url()``: the
``RIVET_EXAMPLES_SERVICE_URL`` environment variable, else ``http://127.0.0.1:8765``. The demo and the
tests start a ``FakeService`` on an ephemeral port and export its URL before any step runs, so worker
subprocesses started afterwards reach the same server.

The server keeps a journal of every call (method, path, JSON body), so callers can count side effects
across worker crashes, and it can be told to delay or fail the next calls of a path.

Routes (JSON in and out; unknown routes answer 404):

* ``POST /orders/<id>/validate|fulfill|cancel`` -> ``{"ok": true}`` (validate of an id starting with
  ``invalid`` answers 422)
* ``GET /users``, ``/orders``, ``/invoices`` -> ``{"count": 3 | 5 | 7}``
* ``POST /inventory/reserve`` ``{"orderId"}`` -> ``{"reservationId": "res-<orderId>"}``
* ``POST /inventory/<reservationId>/release``, ``POST /inventory/release``, ``POST /billing/refund``,
  ``POST /v1/refunds`` -> ``{"ok": true}``
* ``POST /v1/charges`` ``{"orderId"}`` -> ``{"id": "ch-<orderId>"}``; an order id starting with
  ``declined`` answers 402
* ``POST /counters/<name>`` -> ``{"count": n}`` (n = calls so far, this one included)
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: environment variable holding the base URL the examples call
URL_ENV = "RIVET_EXAMPLES_SERVICE_URL"
DEFAULT_URL = "http://127.0.0.1:8765"
#: seconds a client waits for an answer (step timeouts are shorter where the spec sets one)
CLIENT_TIMEOUT = 30.0

COUNTS = {"/users": 3, "/orders": 5, "/invoices": 7}


class ServiceError(RuntimeError):
    """The fake service answered with an HTTP error status (``status``: int, ``path``: str)."""

    def __init__(self, status: int, path: str, body: Any = None) -> None:
        super().__init__(f"{path} failed: HTTP {status}")
        self.status = status
        self.path = path
        self.body = body


def service_url() -> str:
    """The base URL of the fake service (no trailing slash), from ``RIVET_EXAMPLES_SERVICE_URL``."""
    return os.environ.get(URL_ENV, DEFAULT_URL).rstrip("/")


def request(method: str, path: str, body: Any = None, *, timeout: float = CLIENT_TIMEOUT) -> Any:
    """Call the fake service and return the decoded JSON answer.

    ``path`` starts with ``/``; ``body`` is JSON-serializable or None. Raises ``ServiceError`` for an
    HTTP error status and ``OSError`` (e.g. ``URLError``) when the service cannot be reached.
    """
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        service_url() + path,
        data=data,
        method=method,
        headers={"Content-Type": "application/json", "X-Caller": f"{os.getpid()}:{threading.get_ident()}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            payload = resp.read()
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        raise ServiceError(exc.code, path, json.loads(raw) if raw else None) from None
    return json.loads(payload) if payload else None


def get(path: str) -> Any:
    """``GET path`` on the fake service (see ``request``)."""
    return request("GET", path)


def post(path: str, body: Any = None) -> Any:
    """``POST path`` with a JSON ``body`` on the fake service (see ``request``)."""
    return request("POST", path, body if body is not None else {})


class FakeService:
    """The server: ``start()`` it (a daemon thread on 127.0.0.1, ephemeral port by default), ``stop()`` it.

    ``calls`` is the journal: a list of ``(method, path, body)``; ``count(path)`` counts calls of one
    path. ``delay(path, *seconds)`` makes the next calls of ``path`` wait that long before answering (one
    delay per call); ``fail(path, times, status=503)`` makes the next ``times`` calls answer ``status``.
    Thread-safe.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.calls: list[tuple[str, str, Any]] = []
        #: wall-clock time (``time.time()``) and caller (``pid:thread`` of the client) of each call,
        #: parallel to ``calls``
        self.call_times: list[float] = []
        self.callers: list[str] = []
        self._counts: Counter[tuple[str, str]] = Counter()
        self._delays: dict[str, list[tuple[float, dict | None]]] = {}
        self._failures: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL once started (``http://127.0.0.1:<port>``)."""
        if self._server is None:
            raise RuntimeError("the fake service is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self, *, export: bool = True) -> str:
        """Start serving; with ``export`` set ``RIVET_EXAMPLES_SERVICE_URL`` for this process and its
        children. Returns the base URL."""
        service = self

        class Handler(_Handler):
            owner = service

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-service", daemon=True)
        self._thread.start()
        if export:
            os.environ[URL_ENV] = self.url
        return self.url

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeService:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- journal and behaviour -----------------------------------------------------------------------

    def count(self, path: str, method: str | None = None) -> int:
        """How many calls of ``path`` (of ``method``, if given) the service has answered or is answering."""
        with self._lock:
            if method is not None:
                return self._counts[(method, path)]
            return sum(n for (_, p), n in self._counts.items() if p == path)

    def counts(self) -> dict[str, int]:
        """Calls per path."""
        with self._lock:
            out: Counter[str] = Counter()
            for (_, path), n in self._counts.items():
                out[path] += n
            return dict(out)

    def delay(self, path: str, *seconds: float, when: dict | None = None) -> None:
        """Delay the next calls of ``path``: the first by ``seconds[0]``, the second by ``seconds[1]``...

        With ``when`` (a dict), only calls whose JSON body contains those items are delayed.
        """
        with self._lock:
            self._delays.setdefault(path, []).extend((s, when) for s in seconds)

    def fail(self, path: str, times: int = 1, status: int = 503) -> None:
        """Answer the next ``times`` calls of ``path`` with HTTP ``status``."""
        with self._lock:
            self._failures.setdefault(path, []).extend([status] * times)

    def reset(self) -> None:
        """Forget the journal, delays and failures."""
        with self._lock:
            self.calls.clear()
            self.call_times.clear()
            self.callers.clear()
            self._counts.clear()
            self._delays.clear()
            self._failures.clear()

    def _record(self, method: str, path: str, body: Any, caller: str = "") -> tuple[float, int | None, int]:
        with self._lock:
            self.calls.append((method, path, body))
            self.call_times.append(time.time())
            self.callers.append(caller)
            self._counts[(method, path)] += 1
            delay = 0.0
            delays = self._delays.get(path) or []
            for i, (seconds, when) in enumerate(delays):
                if when is None or (
                    isinstance(body, dict) and all(body.get(k) == v for k, v in when.items())
                ):
                    delay = seconds
                    del delays[i]
                    break
            failures = self._failures.get(path)
            status = failures.pop(0) if failures else None
            return delay, status, self._counts[(method, path)]


class _Handler(BaseHTTPRequestHandler):
    owner: FakeService
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the journal is the log
        return

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = self.path.split("?", 1)[0]
        delay, forced, count = self.owner._record(method, path, body, self.headers.get("X-Caller", ""))
        if delay:
            time.sleep(delay)
        if forced is not None:
            return self._send(forced, {"error": "forced failure"})
        status, answer = _route(method, path, body or {}, count)
        self._send(status, answer)

    def _send(self, status: int, answer: Any) -> None:
        payload = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the caller timed out and went away
            pass


def _route(method: str, path: str, body: dict, count: int) -> tuple[int, Any]:
    parts = [p for p in path.split("/") if p]
    if method == "GET" and path in COUNTS:
        return 200, {"count": COUNTS[path]}
    if method != "POST":
        return 404, {"error": f"no route {method} {path}"}
    if len(parts) == 3 and parts[0] == "orders" and parts[2] in ("validate", "fulfill", "cancel"):
        if parts[2] == "validate" and parts[1].startswith("invalid"):
            return 422, {"error": "invalid order"}
        return 200, {"ok": True, "order": parts[1], "action": parts[2]}
    if parts == ["inventory", "reserve"]:
        return 200, {"reservationId": f"res-{body.get('orderId')}"}
    if parts == ["v1", "charges"]:
        order_id = str(body.get("orderId"))
        if order_id.startswith("declined"):
            return 402, {"error": "card declined"}
        return 200, {"id": f"ch-{order_id}"}
    if (len(parts) == 3 and parts[0] == "inventory" and parts[2] == "release") or parts in (
        ["inventory", "release"],
        ["billing", "refund"],
        ["v1", "refunds"],
    ):
        return 200, {"ok": True}
    if len(parts) == 2 and parts[0] == "counters":
        return 200, {"count": count}
    return 404, {"error": f"no route {method} {path}"}
