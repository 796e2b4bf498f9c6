"""``GET /actors/{id}/streams/{name}`` (DESIGN.md section 17): Server-Sent Events with ``Last-Event-ID``
resume and the JSON page mode, on the Django stores (SQLite, or PostgreSQL with LISTEN/NOTIFY)."""

from __future__ import annotations

import json
import threading
import time
from decimal import Decimal

import pytest
from django.test import Client

from rivet_workflows.engine.model import definitions as d

API = "/api/rivet"


def _think(step):
    step.stream("answer").write("lo")
    step.stream("answer").write(Decimal("1.50"))
    return "thought"


async def _chat(ctx):
    await ctx.stream("answer").write("Hel")
    await ctx.step("think", _think)
    message = await ctx.queue.next("wait", "more")
    await ctx.stream("answer").write(message.body)
    await ctx.stream("answer").close()
    return "done"


registry = d.setup(use={"chat": d.actor(queues={"more": d.queue()}, run=d.workflow(_chat))})


@pytest.fixture
def chat(rivet):
    rivet.configure(REGISTRY=f"{__name__}.registry", API_AUTH="rivet_workflows.api.auth.dev_mode_api_auth")
    handle = rivet.client.chat.get_or_create("c1")
    rivet.drain()  # three items, then the workflow waits on "more"
    return handle


def _events(body: str) -> list[dict]:
    """Parse an SSE body into events ``{id?, event?, data?}`` (comment lines skipped)."""
    events = []
    for block in body.split("\n\n"):
        event: dict = {}
        for line in block.splitlines():
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(": ")
            event[field] = value
        if event:
            events.append(event)
    return events


def _finish(rivet, handle, body="!"):
    handle.send("more", body)
    rivet.drain()
    assert handle.workflow_state() == "completed"


def test_the_json_page_lists_items_without_waiting(rivet, chat):
    response = Client().get(f"{API}/actors/{chat.actor_id}/streams/answer", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    page = response.json()
    assert [(i["offset"], i["value"], i["attempt"], i["discarded"]) for i in page["items"]] == [
        (0, "Hel", None, False),
        (1, "lo", 1, False),
        (2, "1.50", 1, False),
    ]
    assert (page["closed"], page["next_offset"]) == (False, 3)
    later = Client().get(
        f"{API}/actors/{chat.actor_id}/streams/answer?offset=2&limit=5", HTTP_ACCEPT="application/json"
    )
    assert [i["offset"] for i in later.json()["items"]] == [2]
    _finish(rivet, chat)
    end = Client().get(
        f"{API}/actors/{chat.actor_id}/streams/answer?offset=3", HTTP_ACCEPT="application/json"
    )
    assert end.json() == {"items": [end.json()["items"][0]], "closed": True, "next_offset": 4}
    assert end.json()["items"][0]["value"] == "!"


def test_the_page_of_a_fork_of_a_finished_run_has_the_items_its_copied_history_wrote(rivet, chat):
    _finish(rivet, chat)
    forked = chat.fork()
    rivet.drain()
    assert forked.workflow_state() == "completed"
    page = Client().get(f"{API}/actors/{forked.actor_id}/streams/answer", HTTP_ACCEPT="application/json")
    assert page.status_code == 200
    assert [(i["offset"], i["value"]) for i in page.json()["items"]] == [
        (0, "Hel"),
        (1, "lo"),
        (2, "1.50"),
        (3, "!"),
    ]
    assert (page.json()["closed"], page.json()["next_offset"]) == (True, 4)


def test_sse_sends_each_item_with_its_offset_and_ends_with_close(rivet, chat):
    _finish(rivet, chat)
    response = Client().get(f"{API}/actors/{chat.actor_id}/streams/answer")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    events = _events(b"".join(response.streaming_content).decode())
    assert events[:-1] == [
        {"id": "0", "data": '"Hel"'},
        {"id": "1", "data": '"lo"'},
        {"id": "2", "data": '"1.50"'},
        {"id": "3", "data": '"!"'},
    ]
    assert events[-1]["event"] == "close"


def test_sse_with_last_event_id_gets_only_newer_items_and_the_header_wins_over_offset(rivet, chat):
    _finish(rivet, chat)
    response = Client().get(f"{API}/actors/{chat.actor_id}/streams/answer?offset=0", HTTP_LAST_EVENT_ID="1")
    events = _events(b"".join(response.streaming_content).decode())
    assert [e.get("id") for e in events] == ["2", "3", None]
    bad = Client().get(f"{API}/actors/{chat.actor_id}/streams/answer", HTTP_LAST_EVENT_ID="abc")
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_last_event_id"


def test_a_live_sse_client_receives_items_as_they_are_written_and_the_close(rivet, chat):
    got: list[str] = []
    done = threading.Event()

    def listen():
        response = Client().get(f"{API}/actors/{chat.actor_id}/streams/answer", HTTP_LAST_EVENT_ID="2")
        for chunk in response.streaming_content:
            got.append(chunk.decode() if isinstance(chunk, bytes) else chunk)
        response.close()
        done.set()

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    time.sleep(0.5)
    assert got == []  # nothing after offset 2 yet: the response waits
    started = time.monotonic()
    _finish(rivet, chat, body={"last": True})
    assert done.wait(10), "the SSE response did not end when the stream closed"
    assert time.monotonic() - started < 5
    events = _events("".join(got))
    assert events[0] == {"id": "3", "data": json.dumps({"last": True}, separators=(",", ":"))}
    assert events[-1]["event"] == "close"


def test_unknown_actors_and_bad_names_are_refused(rivet, chat):
    missing = Client().get(f"{API}/actors/{'0' * 32}/streams/answer", HTTP_ACCEPT="application/json")
    assert missing.status_code == 404
    bad = Client().get(f"{API}/actors/{chat.actor_id}/streams/~x", HTTP_ACCEPT="application/json")
    assert bad.status_code == 422
    empty = Client().get(f"{API}/actors/{chat.actor_id}/streams/other", HTTP_ACCEPT="application/json")
    assert empty.json() == {"items": [], "closed": False, "next_offset": 0}


def test_reading_a_stream_needs_the_read_operation(rivet, chat):
    rivet.configure(REGISTRY=f"{__name__}.registry", DEV_MODE=False, API_TOKEN="t0k")
    url = f"{API}/actors/{chat.actor_id}/streams/answer"
    assert Client().get(url, HTTP_ACCEPT="application/json").status_code == 401
    ok = Client().get(url, HTTP_ACCEPT="application/json", HTTP_AUTHORIZATION="Bearer t0k")
    assert ok.status_code == 200 and len(ok.json()["items"]) == 3


def test_items_are_pruned_with_their_actor(rivet, chat):
    from rivet_workflows import models, ops

    _finish(rivet, chat)
    assert models.StreamItem.objects.filter(actor_id=chat.actor_id).count() == 5  # four items and the close
    assert ops.prune(rivet.runtime, 0) == 1
    assert not models.StreamItem.objects.filter(actor_id=chat.actor_id).exists()


def test_under_asgi_the_sse_response_is_an_async_stream_with_the_same_events(rivet, chat):
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    _finish(rivet, chat)

    async def read() -> tuple[bool, str]:
        url = f"{API}/actors/{chat.actor_id}/streams/answer"
        response = await AsyncClient().get(url, headers={"Last-Event-ID": "1"})
        chunks = [c async for c in response.streaming_content]
        return response.is_async, b"".join(c if isinstance(c, bytes) else c.encode() for c in chunks).decode()

    is_async, body = async_to_sync(read)()
    assert is_async
    assert [e.get("id") for e in _events(body)] == ["2", "3", None]
