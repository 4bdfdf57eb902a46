"""Drives the README's Python client snippets through a warmroute gateway, text only.

For each client (the OpenAI SDK with a client per call and with one shared client, LiveKit
Agents, Pipecat) it runs a few calls of several turns,
each call built by that client's README snippet with the call's own id, and prints one JSON line
per call: the client, the call id, where its snippet puts the session key, and per turn how many
streamed pieces the client saw and their text. test/python/run.ts checks those lines against
what the gateway recorded.

  python clients.py --base-url http://127.0.0.1:PORT/v1 --model M [--calls 2] [--turns 4]
"""

import argparse
import asyncio
import json
import sys
import uuid
from pathlib import Path

from readme_snippets import key_sources, load_snippet, readme_snippets

SYSTEM = "You are the voice agent of a weather line. Answer in one short sentence."
UTTERANCES = [
    "Hi, is this the weather line?",
    "What will the weather be like in Lisbon tomorrow?",
    "And should I take an umbrella?",
    "Thanks, that is all. Goodbye.",
    "One more thing: is it windy there?",
    "Great, bye now.",
]
TURN_TIMEOUT_S = 60


async def openai_sdk_call(ns: dict, call_id: str, utterances: list[str]) -> list[dict]:
    client = ns["warmroute_client"](call_id)
    history: list[dict] = [{"role": "system", "content": SYSTEM}]
    turns = []
    try:
        for text in utterances:
            history.append({"role": "user", "content": text})
            pieces = [p async for p in ns["reply"](client, history)]
            history.append({"role": "assistant", "content": "".join(pieces)})
            turns.append({"pieces": len(pieces), "text": "".join(pieces)})
    finally:
        await client.close()
    return turns


async def openai_sdk_shared_call(ns: dict, call_id: str, utterances: list[str]) -> list[dict]:
    history: list[dict] = [{"role": "system", "content": SYSTEM}]
    turns = []
    for text in utterances:
        history.append({"role": "user", "content": text})
        pieces = [p async for p in ns["reply_in_call"](call_id, history)]
        history.append({"role": "assistant", "content": "".join(pieces)})
        turns.append({"pieces": len(pieces), "text": "".join(pieces)})
    return turns


async def livekit_call(ns: dict, call_id: str, utterances: list[str]) -> list[dict]:
    from livekit.agents import Agent, AgentSession

    pieces: list[str] = []

    class WeatherAgent(Agent):
        # The agent's LLM node as LiveKit runs it, counting the chunks that stream out of it.
        async def llm_node(self, chat_ctx, tools, model_settings):
            async for chunk in Agent.default.llm_node(self, chat_ctx, tools, model_settings):
                delta = getattr(chunk, "delta", None)
                if delta is not None and delta.content:
                    pieces.append(delta.content)
                yield chunk

    turns = []
    async with AgentSession(llm=ns["warmroute_llm"](call_id)) as session:
        await session.start(WeatherAgent(instructions=SYSTEM))
        for text in utterances:
            pieces.clear()
            result = await asyncio.wait_for(session.run(user_input=text), TURN_TIMEOUT_S)
            said = " ".join(e.item.text_content or "" for e in result.events if e.type == "message")
            turns.append({"pieces": len(pieces), "text": said})
    return turns


async def pipecat_call(ns: dict, call_id: str, utterances: list[str]) -> list[dict]:
    from pipecat.frames.frames import EndFrame, LLMFullResponseEndFrame, LLMMessagesAppendFrame, LLMTextFrame
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineWorker
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.workers.runner import WorkerRunner

    replies: asyncio.Queue = asyncio.Queue()

    class ReplyCollector(FrameProcessor):
        """Collects each reply's streamed text frames; a reply ends at LLMFullResponseEndFrame."""

        def __init__(self):
            super().__init__()
            self.pieces: list[str] = []

        async def process_frame(self, frame, direction: FrameDirection):
            await super().process_frame(frame, direction)
            if isinstance(frame, LLMTextFrame):
                self.pieces.append(frame.text)
            elif isinstance(frame, LLMFullResponseEndFrame):
                replies.put_nowait(self.pieces)
                self.pieces = []
            await self.push_frame(frame, direction)

    # The user and assistant aggregators keep the conversation, as in a voice pipeline; text turns
    # go in where the speech-to-text transcript would.
    aggregators = LLMContextAggregatorPair(LLMContext())
    llm = ns["warmroute_llm"](call_id, SYSTEM)
    worker = PipelineWorker(Pipeline([aggregators.user(), llm, ReplyCollector(), aggregators.assistant()]), enable_rtvi=False)
    errors: list[str] = []

    @worker.event_handler("on_pipeline_error")
    async def on_pipeline_error(_worker, frame):
        errors.append(str(frame.error))

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    turns = []
    try:
        for text in utterances:
            await worker.queue_frame(LLMMessagesAppendFrame([{"role": "user", "content": text}], run_llm=True))
            got = await asyncio.wait_for(replies.get(), TURN_TIMEOUT_S)
            if errors:
                raise RuntimeError(f"pipecat: {errors}")
            turns.append({"pieces": len(got), "text": "".join(got)})
    finally:
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(running, TURN_TIMEOUT_S)
    return turns


CALLS = {
    "openai-sdk": openai_sdk_call,
    "openai-sdk-shared": openai_sdk_shared_call,
    "livekit": livekit_call,
    "pipecat": pipecat_call,
}


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--clients", default=",".join(CALLS))
    ap.add_argument("--readme", default=str(Path(__file__).resolve().parents[2] / "README.md"))
    args = ap.parse_args()
    snippets = readme_snippets(Path(args.readme))
    utterances = UTTERANCES[: args.turns]
    failed = 0
    for name in args.clients.split(","):
        ns = load_snippet(snippets[name], name=name, base_url=args.base_url, model=args.model)
        call_ids = [f"{name}-call-{uuid.uuid4().hex[:8]}" for _ in range(args.calls)]
        # A client's calls at once, as a voice worker runs them.
        results = await asyncio.gather(*(CALLS[name](ns, c, utterances) for c in call_ids), return_exceptions=True)
        for call_id, r in zip(call_ids, results):
            line = {"client": name, "callId": call_id, "keySources": key_sources(snippets[name])}
            if isinstance(r, BaseException):
                failed += 1
                line["error"] = f"{type(r).__name__}: {r}"
            else:
                line["turns"] = r
            print(json.dumps(line), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
