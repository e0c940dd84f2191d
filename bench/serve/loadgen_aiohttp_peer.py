#!/usr/bin/python3
"""The request loop of vLLM's benchmark_serving.py, written for this benchmark: Python asyncio
and aiohttp, one task per request under a semaphore (its --max-concurrency), each task POSTing
a streaming /v1/completions request and reading the SSE stream line by line, timing the first
token and every later one with time.perf_counter(), json-decoding every event, and taking the
output token count from the usage chunk.

Usage: loadgen_aiohttp_peer.py URL --requests N --concurrency C --output-tokens T
                               [--session per-request|shared]
Prints one JSON object: completed, failed, output_tokens, duration_s, cpu_s (user + system time
of this process spent in the request loop), peak_open and the mean TTFT.

--session per-request opens an aiohttp.ClientSession for every request, as benchmark_serving.py's
request functions do (no connection reuse); --session shared keeps one session with an
unlimited connector and kept-alive connections, which is the faster way for Python.
"""
import argparse
import asyncio
import json
import resource
import sys
import time

import aiohttp


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def one_request(session_or_none, url, payload, stats):
    st = time.perf_counter()
    ttft, itl, last, tokens, text = 0.0, [], st, 0, ""
    own = session_or_none is None
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=6 * 3600)) if own \
        else session_or_none
    stats["open"] += 1
    stats["peak_open"] = max(stats["peak_open"], stats["open"])
    try:
        async with session.post(url, json=payload) as response:
            if response.status != 200:
                stats["failed"] += 1
                return
            async for raw in response.content:
                line = raw.strip()
                if not line:
                    continue
                data = line.decode("utf-8").removeprefix("data: ")
                if data == "[DONE]":
                    continue
                event = json.loads(data)
                now = time.perf_counter()
                if event.get("choices"):
                    piece = event["choices"][0].get("text")
                    if piece:
                        if ttft == 0.0:
                            ttft = now - st
                        else:
                            itl.append(now - last)
                        last = now
                        text += piece
                usage = event.get("usage")
                if usage:
                    tokens = usage.get("completion_tokens", 0)
        stats["completed"] += 1
        stats["output_tokens"] += tokens
        stats["ttft_sum"] += ttft
        stats["latency_sum"] += time.perf_counter() - st
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        stats["failed"] += 1
    finally:
        stats["open"] -= 1
        if own:
            await session.close()


async def run(args):
    stats = {"completed": 0, "failed": 0, "output_tokens": 0, "ttft_sum": 0.0,
             "latency_sum": 0.0, "open": 0, "peak_open": 0}
    url = args.url.rstrip("/") + "/v1/completions"
    semaphore = asyncio.Semaphore(args.concurrency)
    shared = None
    if args.session == "shared":
        shared = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=6 * 3600),
            connector=aiohttp.TCPConnector(limit=0, force_close=False))

    async def limited(i):
        payload = {"model": "zero", "prompt": f"request {i}", "max_tokens": args.output_tokens,
                   "stream": True, "stream_options": {"include_usage": True}}
        async with semaphore:
            await one_request(shared, url, payload, stats)

    cpu0, t0 = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(limited(i) for i in range(args.requests)))
    duration, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    if shared is not None:
        await shared.close()
    return {"completed": stats["completed"], "failed": stats["failed"],
            "output_tokens": stats["output_tokens"], "duration_s": duration, "cpu_s": cpu,
            "peak_open": stats["peak_open"],
            "mean_ttft_ms": 1e3 * stats["ttft_sum"] / max(1, stats["completed"])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--output-tokens", type=int, required=True)
    ap.add_argument("--session", choices=("per-request", "shared"), default="shared")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(json.dumps(asyncio.run(run(args))))


if __name__ == "__main__":
    sys.exit(main())
