"""One streamed chat call through the OpenAI Python SDK inside a span of the caller's own, whose
W3C context goes out as `traceparent` (as an instrumented agent's would). Runs in the vLLM venv,
which has both the openai and the opentelemetry SDKs. Prints the trace id and the client's TTFT.

usage: traced-client.py BASE_URL OTLP_TRACES_URL MODEL PROMPT
"""
import json
import sys
import time

from openai import OpenAI
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagate import inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

base_url, otlp_url, model, prompt = sys.argv[1:5]
provider = TracerProvider(resource=Resource.create({"service.name": "voice-agent"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=otlp_url)))
tracer = provider.get_tracer("voice-agent")
client = OpenAI(base_url=base_url, api_key="unused")

with tracer.start_as_current_span("agent turn", kind=trace.SpanKind.CLIENT) as span:
    headers: dict[str, str] = {}
    inject(headers)
    sent = time.perf_counter()
    first = None
    # vLLM sends its first chunk (the role) on the engine's first output; a first token whose text
    # its detokenizer holds back makes the first content come decode steps later.
    first_chunk = None
    stream = client.chat.completions.create(
        model=model, stream=True, max_tokens=16, temperature=0,
        messages=[{"role": "user", "content": prompt}],
        extra_headers={**headers, "x-session-id": "traced-call"},
    )
    for chunk in stream:
        if first_chunk is None and chunk.choices:
            first_chunk = time.perf_counter()
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter()
    trace_id = format(span.get_span_context().trace_id, "032x")
    span_id = format(span.get_span_context().span_id, "016x")
provider.shutdown()
print(json.dumps({
    "traceId": trace_id, "spanId": span_id, "ttftMs": None if first is None else (first - sent) * 1000,
    "contentAfterFirstChunkMs": None if first is None or first_chunk is None else (first - first_chunk) * 1000,
}))
