"""Records the raw multipart frames a vLLM replica publishes on its KV-events sockets.

Subscribes to the PUB endpoint and writes every frame (topic, 8-byte sequence, msgpack
payload) as hex to a JSON-lines file until stopped; with --replay SEQ it asks the ROUTER
replay endpoint for everything from SEQ on and writes those frames instead.
Run with the venv's python (pyzmq and msgspec come with vLLM).
"""

import argparse
import json
import sys
import time

import msgspec
import zmq


def describe(payload: bytes):
    try:
        return msgspec.msgpack.decode(payload)
    except Exception as exc:  # a frame that is not msgpack is recorded, not fatal
        return {"undecodable": str(exc)}


def record(frames, out):
    entry = {"at": time.time(), "frames_hex": [f.hex() for f in frames]}
    if len(frames) == 3 and len(frames[1]) == 8:
        entry["topic"] = frames[0].decode("utf-8", "replace")
        entry["seq"] = int.from_bytes(frames[1], "big", signed=True)
        entry["decoded"] = describe(frames[2]) if frames[2] else None
    out.write(json.dumps(entry, default=repr) + "\n")
    out.flush()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--topic", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--replay", type=int, default=None, help="start sequence to replay from")
    ap.add_argument("--seconds", type=float, default=600)
    args = ap.parse_args()
    ctx = zmq.Context()
    with open(args.out, "a") as out:
        if args.replay is not None:
            sock = ctx.socket(zmq.DEALER)
            sock.connect(args.endpoint)
            sock.send_multipart([b"", args.replay.to_bytes(8, "big")])
            deadline = time.time() + args.seconds
            while time.time() < deadline:
                if not sock.poll(1000):
                    continue
                frames = sock.recv_multipart()
                frames = frames[1:] if frames and frames[0] == b"" else frames
                record(frames, out)
                if len(frames) >= 2 and frames[1] == (-1).to_bytes(8, "big", signed=True):
                    break
            return
        sock = ctx.socket(zmq.SUB)
        sock.connect(args.endpoint)
        sock.setsockopt(zmq.SUBSCRIBE, args.topic.encode())
        deadline = time.time() + args.seconds
        while time.time() < deadline:
            if sock.poll(500):
                record(sock.recv_multipart(), out)
    sys.exit(0)


if __name__ == "__main__":
    main()
