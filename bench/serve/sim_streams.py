#!/usr/bin/env python3
"""Holds N streaming requests open at once against `anxin serve sim` and checks
that every one gets all its tokens, the usage chunk and [DONE]. Prints the
server's CPU time per streamed token (from /proc/PID/stat) so the figure is
the simulator's own cost. Standard library only (selectors, raw sockets).

  sim_streams.py --port 8000 --pid PID --streams 3000 --tokens 64
"""
import argparse
import json
import os
import selectors
import socket
import sys
import time


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--streams", type=int, default=2000)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    body = json.dumps({"prompt": "tell me a story about a long road", "max_tokens": a.tokens,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    req = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    sel = selectors.DefaultSelector()
    bufs = {}
    cpu0, t0 = cpu_seconds(a.pid), time.monotonic()
    for i in range(a.streams):
        s = socket.create_connection(("127.0.0.1", a.port))
        s.sendall(req)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
        bufs[i] = bytearray()
    t_open = time.monotonic() - t0
    open_now, peak, done = a.streams, 0, 0
    deadline = t0 + a.timeout
    while open_now and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            try:
                data = key.fileobj.recv(65536)
            except BlockingIOError:
                continue
            if data:
                bufs[key.data] += data
                continue
            sel.unregister(key.fileobj)
            key.fileobj.close()
            open_now -= 1
    wall = time.monotonic() - t0
    cpu = cpu_seconds(a.pid) - cpu0
    ok = 0
    for i, b in bufs.items():
        text = b.decode(errors="replace")
        events = [l[6:] for l in text.split("\n") if l.startswith("data: ")]
        tokens = sum(1 for e in events if e != "[DONE]" and json.loads(e).get("choices"))
        usage = [json.loads(e)["usage"] for e in events if e != "[DONE]" and json.loads(e).get("usage")]
        if (text.startswith("HTTP/1.1 200") and events and events[-1] == "[DONE]"
                and tokens == a.tokens and usage and usage[0]["completion_tokens"] == a.tokens):
            ok += 1
    print(f"{a.streams} streams opened in {t_open:.2f} s; {ok} complete with {a.tokens} tokens, "
          f"usage and [DONE]; {a.streams - ok} lost or short")
    print(f"wall {wall:.2f} s; server CPU {cpu:.2f} s = {cpu / (a.streams * a.tokens) * 1e6:.2f} us "
          f"per streamed token")
    sys.exit(0 if ok == a.streams else 1)


if __name__ == "__main__":
    main()
