"""Turns recorded KV-event frames (kv-capture.py JSON lines) into test fixtures.

Usage: kv-fixtures.py LIVE.jsonl REPLAY.jsonl OUTDIR META.json
Writes block-stored.json, block-removed.json, replay.json and stream.json, each with the raw
frames as hex and base64, the decoded payload (for reading only) and META (vLLM version, flags,
the requests that caused them).
"""

import base64
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def frame_entry(e):
    raw = [bytes.fromhex(h) for h in e["frames_hex"]]
    return {
        "seq": e.get("seq"),
        "topic": e.get("topic"),
        "frames_hex": e["frames_hex"],
        "frames_base64": [base64.b64encode(b).decode() for b in raw],
        "decoded": e.get("decoded"),
    }


def kinds(e):
    d = e.get("decoded")
    return {ev.get("type") for ev in d[1]} if isinstance(d, list) and len(d) > 1 else set()


def main() -> None:
    live, replay, outdir, meta_path = sys.argv[1:5]
    meta = json.load(open(meta_path))
    frames = load(live)
    replayed = load(replay)
    stored = next(e for e in frames if "BlockStored" in kinds(e))
    removed = next(e for e in frames if "BlockRemoved" in kinds(e))
    docs = {
        "block-stored.json": {"what": "first BlockStored batch: the cold ~2.9K-token chat A", "messages": [frame_entry(stored)]},
        "block-removed.json": {"what": "first BlockRemoved batch: eviction while chat D was prefilled", "messages": [frame_entry(removed)]},
        "replay.json": {"what": "ROUTER replay reply to a DEALER request [b'', (3).to_bytes(8,'big')]: frames after the empty delimiter, ending with the end marker (empty topic, seq -1, empty payload)", "messages": [frame_entry(e) for e in replayed]},
        "stream.json": {"what": "every PUB message during the whole request sequence, in order", "messages": [frame_entry(e) for e in frames]},
    }
    for name, doc in docs.items():
        with open(f"{outdir}/{name}", "w") as f:
            json.dump({**doc, "meta": meta}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
