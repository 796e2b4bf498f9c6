"""DurableAgent (DESIGN.md section 17, docs/howto/agents.md): model requests and tool calls are steps, so a
crash or a replay repeats no completed model request and no completed tool call. No network: the models are
pydantic-ai's FunctionModel and TestModel, run on the in-memory store."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, ModelRetry, RunContext  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402

from rivet_workflows import queue, setup, workflow  # noqa: E402
from rivet_workflows.contrib.pydantic_ai import DurableAgent, workflow_context  # noqa: E402
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.runtime import executor
from rivet_workflows.testing import drain, make_runtime  # noqa: E402


class Script:
    """A scripted model: answer ``i`` for the ``i``-th request of a run (a ToolCallPart or text); records
    the messages of every call, and raises ``fail[i]`` (an exception) the first time request ``i`` is made."""

    def __init__(self, *answers: Any, fail: dict[int, BaseException] | None = None) -> None:
        self.answers = answers
        self.fail = dict(fail or {})
        self.calls: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls.append(messages)
        index = sum(1 for m in messages if isinstance(m, ModelResponse))
        if index in self.fail:
            raise self.fail.pop(index)
        answer = self.answers[index]
        if isinstance(answer, ModelResponse):
            return answer
        part = answer if isinstance(answer, ToolCallPart) else TextPart(answer)
        return ModelResponse(parts=[part], model_name="scripted")


def lookup_agent(script: Script, tool_calls: list) -> Agent:
    agent = Agent(FunctionModel(script), name="support")

    @agent.tool_plain
    def lookup(order: str) -> dict:
        """Look an order up."""
        tool_calls.append(order)
        return {"order": order, "status": "shipped"}

    return agent


def runtime_for(run: Any, **options: Any) -> Any:
    return make_runtime(setup(use={"wf": workflow(run=run, **options)}))


def start(runtime: Any) -> str:
    return runtime.client()["wf"].get_or_create("k").actor_id


def step_keys(runtime: Any, actor_id: str) -> list[str]:
    return [e.key for e in runtime.store.load_history(actor_id) if e.kind == "step"]


def restart(runtime: Any, actor_id: str) -> None:
    """A new worker after a crash takes over the dead run's lease and runs the workflow again."""
    record = runtime.store.get_actor(actor_id)
    assert record.lease_owner is not None, "no crashed run holds the lease"
    token = runtime.store.handoff(actor_id, record.lease_token, "restarted-worker", 30.0)
    executor.run_actor(runtime, actor_id, token=token)


def two_turns() -> Script:
    return Script(ToolCallPart("lookup", {"order": "A1"}, tool_call_id="call-1"), "A1 has shipped.")


def test_each_model_request_and_tool_call_is_a_recorded_step():
    script, tools = two_turns(), []
    durable = DurableAgent(lookup_agent(script, tools))

    async def run(ctx):
        return (await durable.run(ctx, "Where is A1?")).output

    runtime = runtime_for(run)
    aid = start(runtime)
    drain(runtime)

    assert runtime.store.get_actor(aid).output == "A1 has shipped."
    assert step_keys(runtime, aid) == ["support.model-1", "support.tool.lookup-1", "support.model-2"]
    assert len(script.calls) == 2 and tools == ["A1"]


def test_worker_crash_mid_run_repeats_no_completed_model_request_or_tool_call():
    # the worker dies in the second model request, after the first request and the tool call completed
    script, tools = two_turns(), []
    script.fail[1] = KeyboardInterrupt()
    durable = DurableAgent(lookup_agent(script, tools))

    async def run(ctx):
        return (await durable.run(ctx, "Where is A1?")).output

    runtime = runtime_for(run)
    aid = start(runtime)
    with pytest.raises(KeyboardInterrupt):
        drain(runtime)
    restart(runtime, aid)
    drain(runtime)

    assert runtime.store.get_actor(aid).output == "A1 has shipped."
    # request 1 once; request 2 twice (the crashed attempt and the one that completed)
    first_requests = [c for c in script.calls if len(c) == 1]
    assert len(first_requests) == 1 and len(script.calls) == 3
    assert tools == ["A1"]
    # the recorded response came back faithfully: the retried request saw the same conversation
    crashed, completed = script.calls[1], script.calls[2]
    assert [type(m) for m in completed] == [type(m) for m in crashed]
    # the recorded response equals the live one: parts (tool call id, arguments), model name, timestamp
    # (the new agent run stamps its own run id on the conversation)
    assert dataclasses.replace(completed[1], run_id=None, conversation_id=None) == dataclasses.replace(
        crashed[1], run_id=None, conversation_id=None
    )


def test_replay_after_a_wait_sends_no_request_and_calls_no_tool_again():
    script, tools = two_turns(), []
    durable = DurableAgent(lookup_agent(script, tools))

    async def run(ctx):
        result = await durable.run(ctx, "Where is A1?")
        go = await ctx.queue.next("wait-go")  # the run unwinds here; the next one replays the agent
        return {"answer": result.output, "messages": len(result.all_messages()), "go": go.body}

    runtime = runtime_for(run, queues={"go": queue()})
    aid = start(runtime)
    drain(runtime)
    assert runtime.store.get_actor(aid).output is None
    runtime.client()["wf"].get("k").send("go", "now")
    drain(runtime)

    assert runtime.store.get_actor(aid).output == {"answer": "A1 has shipped.", "messages": 4, "go": "now"}
    assert len(script.calls) == 2 and tools == ["A1"]


def test_failed_model_request_is_retried_by_the_step_policy():
    script, tools = two_turns(), []
    script.fail[0] = ConnectionError("provider unavailable")
    durable = DurableAgent(lookup_agent(script, tools), model_step_options={"retry_backoff_base": 0.001})

    async def run(ctx):
        return (await durable.run(ctx, "Where is A1?")).output

    runtime = runtime_for(run)
    aid = start(runtime)
    drain(runtime)

    assert runtime.store.get_actor(aid).output == "A1 has shipped."
    history = {e.key: e for e in runtime.store.load_history(aid)}
    assert history["support.model-1"].attempts == 2
    assert len(script.calls) == 3 and tools == ["A1"]


def test_model_request_failing_past_its_retries_fails_the_workflow():
    calls = []

    def always_down(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(messages)
        raise ConnectionError("down")

    durable = DurableAgent(
        Agent(FunctionModel(always_down)), model_step_options={"max_retries": 2, "retry_backoff_base": 0.001}
    )

    async def run(ctx):
        return (await durable.run(ctx, "hi")).output

    runtime = runtime_for(run)
    aid = start(runtime)
    drain(runtime)

    record = runtime.store.get_actor(aid)
    assert record.workflow_state == ports.FAILED
    assert "agent.model-1" in record.error["message"]
    assert len(calls) == 3  # the first attempt and max_retries=2 retries


def test_a_tool_asking_the_model_to_retry_is_recorded_as_an_answer_not_retried_as_a_failure():
    attempts = []
    script = Script(
        ToolCallPart("lookup", {"order": "a1"}, tool_call_id="c1"),
        ToolCallPart("lookup", {"order": "A1"}, tool_call_id="c2"),
        "A1 has shipped.",
    )
    agent = Agent(FunctionModel(script), name="support")

    @agent.tool_plain
    def lookup(order: str) -> str:
        attempts.append(order)
        if order != order.upper():
            raise ModelRetry("order ids are upper case")
        return "shipped"

    durable = DurableAgent(agent)

    async def run(ctx):
        return (await durable.run(ctx, "Where is A1?")).output

    runtime = runtime_for(run)
    aid = start(runtime)
    drain(runtime)

    assert runtime.store.get_actor(aid).output == "A1 has shipped."
    assert attempts == ["a1", "A1"]
    assert step_keys(runtime, aid) == [
        "support.model-1",
        "support.tool.lookup-1",
        "support.model-2",
        "support.tool.lookup-2",
        "support.model-3",
    ]
    retry_prompt = script.calls[1][-1].parts[0]
    assert "order ids are upper case" in str(retry_prompt.content)


def test_tool_waiting_on_a_queue_for_a_persons_approval():
    script = Script(ToolCallPart("refund", {"amount": 30}, tool_call_id="r1"), "Refunded 30.")
    agent = Agent(FunctionModel(script), name="billing")
    refunds = []

    @agent.tool
    async def refund(run_context: RunContext[None], amount: int) -> str:
        """Refund ``amount`` once a person approved it."""
        ctx = workflow_context()
        decision = await ctx.queue.next(f"approval-{run_context.tool_call_id}", names=["approval"])
        if not decision.body["approved"]:
            return "refused by a person"

        def pay(step):
            refunds.append(amount)
            return "refunded"

        return await ctx.step(f"pay-{run_context.tool_call_id}", pay)

    durable = DurableAgent(agent, workflow_tools=["refund"])

    async def run(ctx):
        return (await durable.run(ctx, "Refund my 30")).output

    runtime = runtime_for(run, queues={"approval": queue()})
    aid = start(runtime)
    drain(runtime)
    assert runtime.store.get_actor(aid).workflow_state != ports.COMPLETED  # waiting for the person
    runtime.client()["wf"].get("k").send("approval", {"approved": True})
    drain(runtime)

    assert runtime.store.get_actor(aid).output == "Refunded 30."
    assert refunds == [30] and len(script.calls) == 2
    assert script.calls[1][-1].parts[0].content == "refunded"
    assert step_keys(runtime, aid) == ["billing.model-1", "pay-r1", "billing.model-2"]


def test_test_model_runs_every_tool_once_with_structured_output():
    calls = []
    agent = Agent(TestModel(), name="weather", output_type=dict)

    @agent.tool_plain
    def forecast(city: str) -> str:
        calls.append(city)
        return "sunny"

    durable = DurableAgent(agent)

    async def run(ctx):
        result = await durable.run(ctx, "Weather?")
        return result.output

    runtime = runtime_for(run)
    aid = start(runtime)
    drain(runtime)

    assert isinstance(runtime.store.get_actor(aid).output, dict)
    assert len(calls) == 1
    assert step_keys(runtime, aid) == ["weather.model-1", "weather.tool.forecast-1", "weather.model-2"]


def test_two_runs_in_one_workflow_get_distinct_step_names():
    script = Script("first")
    second = Script("unused", "second")  # its history holds the first run's answer
    durable = DurableAgent(Agent(FunctionModel(script)), name="a")
    other = DurableAgent(Agent(FunctionModel(second)), name="a")

    async def run(ctx):
        one = await durable.run(ctx, "1")
        two = await other.run(ctx, "2", message_history=one.all_messages())
        return [one.output, two.output]

    runtime = runtime_for(run)
    aid = start(runtime)
    drain(runtime)

    assert runtime.store.get_actor(aid).output == ["first", "second"]
    assert step_keys(runtime, aid) == ["a.model-1", "a.model-2"]


def test_bad_arguments_raise_typed_errors():
    with pytest.raises(TypeError):
        DurableAgent(object())
    with pytest.raises(ValueError):
        DurableAgent(Agent(TestModel()), name="a/b")
    with pytest.raises(RuntimeError):
        workflow_context()


class StreamScript:
    """A streaming model: a tool call first, then the answer in ``chunks``; ``crash_after`` chunks into
    the first answer attempt the worker dies (KeyboardInterrupt)."""

    def __init__(self, chunks: list[str], crash_after: int | None = None) -> None:
        self.chunks = chunks
        self.crash_after = crash_after
        self.requests: list[int] = []

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo):
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        self.requests.append(turn)
        if turn == 0:
            yield {0: DeltaToolCall("lookup", '{"order": "A1"}', tool_call_id="call-1")}
            return
        for i, chunk in enumerate(self.chunks):
            if self.crash_after is not None and i == self.crash_after:
                self.crash_after = None
                raise KeyboardInterrupt  # the worker dies mid-answer
            yield chunk


def streaming_agent(script: StreamScript, tools: list) -> Agent:
    agent = Agent(FunctionModel(stream_function=script), name="support")

    @agent.tool_plain
    def lookup(order: str) -> str:
        tools.append(order)
        return "shipped"

    return agent


def read(runtime: Any, name: str = "answer", **options: Any) -> list:
    handle = runtime.client()["wf"].get("k")
    return list(handle.read_stream(name, **{"timeout": 1.0, **options}))


def test_stream_receives_the_models_text_deltas_in_order():
    chunks = ["A1 ", "has ", "shipped."]
    script, tools = StreamScript(chunks), []
    durable = DurableAgent(streaming_agent(script, tools))

    async def run(ctx):
        return (await durable.run(ctx, "Where is A1?", stream="answer")).output

    runtime = runtime_for(run)
    aid = start(runtime)
    drain(runtime)

    assert runtime.store.get_actor(aid).output == "A1 has shipped."
    items = read(runtime)
    assert [i.value for i in items] == chunks  # the tool call wrote nothing
    assert [i.offset for i in items] == [0, 1, 2]
    assert script.requests == [0, 1] and tools == ["A1"]


def test_worker_killed_mid_stream_resends_only_the_interrupted_request():
    chunks = ["A1 ", "has ", "shipped."]
    script, tools = StreamScript(chunks, crash_after=2), []
    durable = DurableAgent(streaming_agent(script, tools))

    async def run(ctx):
        return (await durable.run(ctx, "Where is A1?", stream="answer")).output

    runtime = runtime_for(run)
    aid = start(runtime)
    with pytest.raises(KeyboardInterrupt):
        drain(runtime)
    assert [i.value for i in read(runtime, timeout=0.05)] == ["A1 ", "has "]  # readers saw them live
    restart(runtime, aid)
    drain(runtime)

    assert runtime.store.get_actor(aid).output == "A1 has shipped."
    assert script.requests == [0, 1, 1] and tools == ["A1"]  # request 1 and the tool call once
    # readers see the final attempt's answer once; the lost attempt's items stay, marked discarded
    assert "".join(i.value for i in read(runtime)) == "A1 has shipped."
    everything = read(runtime, include_discarded=True)
    assert [(i.value, i.discarded) for i in everything[:2]] == [("A1 ", True), ("has ", True)]
    assert [i.attempt for i in everything] == [1, 1, 2, 2, 2]


def test_replay_writes_no_stream_item_again():
    script, tools = StreamScript(["done"]), []
    durable = DurableAgent(streaming_agent(script, tools))

    async def run(ctx):
        result = await durable.run(ctx, "Where is A1?", stream="answer")
        await ctx.queue.next("wait-go")  # the run unwinds; the next one replays the agent
        return result.output

    runtime = runtime_for(run, queues={"go": queue()})
    aid = start(runtime)
    drain(runtime)
    runtime.client()["wf"].get("k").send("go", None)
    drain(runtime)

    assert runtime.store.get_actor(aid).output == "done"
    assert [i.value for i in read(runtime, include_discarded=True)] == ["done"]
    assert script.requests == [0, 1]


def test_tool_calls_of_one_response_run_one_after_the_other_as_separate_steps():
    script = Script(
        ModelResponse(
            parts=[
                ToolCallPart("lookup", {"order": "A1"}, tool_call_id="c1"),
                ToolCallPart("lookup", {"order": "B2"}, tool_call_id="c2"),
            ]
        ),
        "Both shipped.",
    )
    tools = []
    durable = DurableAgent(lookup_agent(script, tools))

    async def run(ctx):
        return (await durable.run(ctx, "Where are A1 and B2?")).output

    runtime = runtime_for(run)
    aid = start(runtime)
    drain(runtime)

    assert runtime.store.get_actor(aid).output == "Both shipped."
    assert tools == ["A1", "B2"]
    assert step_keys(runtime, aid) == [
        "support.model-1",
        "support.tool.lookup-1",
        "support.tool.lookup-2",
        "support.model-2",
    ]


def test_a_deferred_tool_call_is_recorded_and_resumed_with_the_result_from_a_queue():
    # pydantic-ai's own human-in-the-loop: the tool defers, the run ends with DeferredToolRequests, the
    # workflow waits for the result on a queue and runs the agent again with it
    from pydantic_ai import CallDeferred, DeferredToolRequests, DeferredToolResults

    script = Script(ToolCallPart("ship", {"order": "A1"}, tool_call_id="s1"), "Shipped with DHL.")
    agent = Agent(FunctionModel(script), name="ops", output_type=[str, DeferredToolRequests])
    deferrals = []

    @agent.tool_plain
    def ship(order: str) -> str:
        deferrals.append(order)
        raise CallDeferred({"order": order})

    durable = DurableAgent(agent)

    async def run(ctx):
        first = await durable.run(ctx, "Ship A1")
        assert isinstance(first.output, DeferredToolRequests)
        (call,) = first.output.calls
        message = await ctx.queue.next("wait-shipping", names=["shipping"])
        results = DeferredToolResults(calls={call.tool_call_id: message.body})
        second = await durable.run(ctx, message_history=first.all_messages(), deferred_tool_results=results)
        return {"metadata": first.output.metadata, "output": second.output}

    runtime = runtime_for(run, queues={"shipping": queue()})
    aid = start(runtime)
    drain(runtime)
    runtime.client()["wf"].get("k").send("shipping", "label DHL-1")
    drain(runtime)

    assert runtime.store.get_actor(aid).output == {
        "metadata": {"s1": {"order": "A1"}},
        "output": "Shipped with DHL.",
    }
    assert deferrals == ["A1"] and len(script.calls) == 2  # the replay raised the recorded deferral
    assert step_keys(runtime, aid) == ["ops.model-1", "ops.tool.ship-1", "ops.model-2"]


def test_a_tool_name_with_reserved_characters_gets_a_valid_step_name():
    from pydantic_ai import Tool

    def lookup(order: str) -> str:
        return "shipped"

    script = Script(ToolCallPart("crm:lookup", {"order": "A1"}, tool_call_id="c1"), "Shipped.")
    durable = DurableAgent(
        Agent(FunctionModel(script), name="support", tools=[Tool(lookup, name="crm:lookup")])
    )

    async def run(ctx):
        return (await durable.run(ctx, "Where is A1?")).output

    runtime = runtime_for(run)
    aid = start(runtime)
    drain(runtime)

    assert runtime.store.get_actor(aid).output == "Shipped."
    assert step_keys(runtime, aid) == ["support.model-1", "support.tool.crm_lookup-1", "support.model-2"]
