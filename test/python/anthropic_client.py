"""Drives the Anthropic Python SDK through a warmroute gateway, as an agent built on it does (its base
URL at the gateway), and prints one JSON line of what it saw: a keyed conversation streamed over
several turns, a whole (unstreamed) message, a tool call over two turns, a keyless conversation, the
gateway's refusal of an unknown model raised as the SDK's own error, count_tokens. Every answer's
x-warmroute-replica and x-warmroute-route headers are kept; test/python/run.ts checks them against
what the gateway recorded.

  python anthropic_client.py --base-url http://127.0.0.1:PORT --model M [--turns 3] [--no-tools]

--no-tools leaves the tool call out ("tools" is null): for replicas that cannot make one.
"""

import argparse
import json
import uuid

import anthropic

SYSTEM = "You are the voice agent of a weather line. Answer in one short sentence. " * 6
UTTERANCES = ["Hi, is this the weather line?", "What about Lisbon tomorrow?", "Should I take an umbrella?", "Thanks, goodbye."]
TOOLS = [{
    "name": "get_weather",
    "description": "Current weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}]


def where(headers) -> dict:
    return {"replica": headers.get("x-warmroute-replica"), "route": headers.get("x-warmroute-route")}


def streamed_conversation(client: anthropic.Anthropic, model: str, turns: int) -> list[dict]:
    messages, out = [], []
    for text in UTTERANCES[:turns]:
        messages.append({"role": "user", "content": text})
        with client.messages.stream(model=model, max_tokens=64, system=SYSTEM, messages=messages) as stream:
            pieces = [t for t in stream.text_stream]
            final = stream.get_final_message()
            seen = where(stream.response.headers)
        reply = "".join(pieces)
        messages.append({"role": "assistant", "content": reply})
        out.append({"pieces": len(pieces), "text": reply, "stop": final.stop_reason, "output_tokens": final.usage.output_tokens, **seen})
    return out


def tool_call(a, call: str) -> dict:
    """A tool call the SDK assembles from the stream, then the answer after its result."""
    tool_call_id = f"{call}-tools"
    tools = anthropic.Anthropic(base_url=a.base_url, api_key="unused", max_retries=0, default_headers={"x-session-id": tool_call_id})
    messages = [{"role": "user", "content": "Call the weather tool for Paris"}]
    with tools.messages.stream(model=a.model, max_tokens=512, system=SYSTEM, tools=TOOLS, messages=messages) as stream:
        first = stream.get_final_message()
        first_where = where(stream.response.headers)
    use = next((b for b in first.content if b.type == "tool_use"), None)
    tool = {"stop": first.stop_reason, "name": use.name if use else None, "input": use.input if use else None, **first_where}
    if use is not None:
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18 degrees, clear"}]})
        raw = tools.messages.with_raw_response.create(model=a.model, max_tokens=64, system=SYSTEM, tools=TOOLS, messages=messages)
        tool["answer"] = {"stop": raw.parse().stop_reason, **where(raw.headers)}
    return tool


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--no-tools", action="store_true")
    a = ap.parse_args()
    call = f"py-anthropic-{uuid.uuid4().hex[:8]}"
    keyed = anthropic.Anthropic(base_url=a.base_url, api_key="unused", max_retries=0, default_headers={"x-session-id": call})
    keyless = anthropic.Anthropic(base_url=a.base_url, api_key="unused", max_retries=0)
    result: dict = {"call": call}

    result["streamed"] = streamed_conversation(keyed, a.model, a.turns)

    raw = keyed.messages.with_raw_response.create(model=a.model, max_tokens=64, system=SYSTEM, messages=[{"role": "user", "content": UTTERANCES[0]}])
    whole = raw.parse()
    result["whole"] = {"text": "".join(b.text for b in whole.content if b.type == "text"), "stop": whole.stop_reason, **where(raw.headers)}

    result["tools"] = None if a.no_tools else tool_call(a, call)

    result["keyless"] = streamed_conversation(keyless, a.model, a.turns)

    try:
        keyed.messages.create(model="no-such-model", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
        result["unknown_model"] = {"raised": None}
    except anthropic.APIStatusError as e:
        result["unknown_model"] = {"raised": type(e).__name__, "status": e.status_code, "type": (e.body or {}).get("error", {}).get("type") if isinstance(e.body, dict) else None}

    count = keyed.messages.count_tokens(model=a.model, system=SYSTEM, messages=[{"role": "user", "content": UTTERANCES[1]}])
    result["count_tokens"] = count.input_tokens
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
