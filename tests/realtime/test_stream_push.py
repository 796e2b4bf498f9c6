"""Stream items reach the actor's WebSocket subscribers as ``{"type": "stream", ...}`` (DESIGN.md 17)."""

from __future__ import annotations

import asyncio

import pytest
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from rivet_workflows.realtime.routing import websocket_urlpatterns
from tests.realtime.test_consumer import receive_until

pytestmark = pytest.mark.asyncio

app = AuthMiddlewareStack(URLRouter(websocket_urlpatterns))


async def test_stream_items_written_by_a_step_and_by_workflow_code_are_pushed(rivet):
    from rivet_workflows.django_runtime import build_runtime
    from rivet_workflows.engine.model import definitions as d
    from rivet_workflows.engine.runtime import executor

    def speak(step):
        step.stream("tokens").write({"t": "hi"})

    async def run(ctx):
        await ctx.step("speak", speak)
        await ctx.stream("tokens").write("bye")

    registry = d.setup(use={"talker": d.actor(run=d.workflow(run))})
    runtime = await database_sync_to_async(build_runtime)(registry=registry)
    handle = await database_sync_to_async(runtime.client().talker.get_or_create)("t")
    communicator = WebsocketCommunicator(app, f"/ws/rivet/actors/{handle.actor_id}/")
    assert (await communicator.connect())[0]
    drained = asyncio.get_running_loop().run_in_executor(None, lambda: executor.drain(runtime, timeout=5))
    seen = await receive_until(communicator, lambda m: m.get("type") == "stream" and m["offset"] == 1)
    streamed = [m for m in seen if m.get("type") == "stream"]
    assert streamed == [
        {"type": "stream", "name": "tokens", "offset": 0, "value": {"t": "hi"}},
        {"type": "stream", "name": "tokens", "offset": 1, "value": "bye"},
    ]
    await drained
    await communicator.disconnect()
