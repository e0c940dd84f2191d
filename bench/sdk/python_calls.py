#!/usr/bin/python3
"""Per-call cost of the anxin_sdk Python module (bench/sdk/run runs it).

    python_calls.py none|off|agent

none: no library (every call is an empty function); off: the library
without a socket; agent: the library sending to ANXIN_AGENT_SOCKET, in bursts
of 1,000 calls, each followed (untimed) by flush(). Next to each figure, the
cost of calling an empty Python function with the same arguments, the floor
for anything a Python program calls. Prints one line of JSON; exits 1 when
a call was not accounted for (not counted as unsent without an agent, or
not sent with one) or the library is not what the mode needs.
"""
import json
import sys
import time

import anxin_sdk as anxin

mode = sys.argv[1]
BURST = 1000
ROUNDS = 100


def empty(*args, **kwargs):
    pass


def measure(fn, args):
    """Best of 3 runs of ROUNDS x BURST calls: ns per call."""
    best = float("inf")
    for _ in range(3):
        total = 0.0
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            for _ in range(BURST):
                fn(*args)
            total += time.perf_counter() - t0
            if mode == "agent" and not anxin.flush(10):
                print("flush failed: %s" % anxin.stats(), file=sys.stderr)
                sys.exit(1)
        best = min(best, total)
    return best * 1e9 / (ROUNDS * BURST)


calls = {
    "collective": (anxin.collective, ("all_reduce", 256 << 20, 0.01, "ring")),
    "kernel": (anxin.kernel, ("flash_attention_fwd_bf16", 0.001)),
    "step_end": (anxin.step_end, (42,)),
    "heartbeat": (anxin.heartbeat, ()),
}
s0 = anxin.stats()
if (mode == "none") == s0["loaded"] or (mode == "agent") != s0["connected"]:
    print("mode %s but stats() says %s (%s)" % (mode, s0, anxin.load_error()), file=sys.stderr)
    sys.exit(1)
out = {"mode": mode}
for name, (fn, args) in calls.items():
    out[name] = round(measure(fn, args), 1)
    out["empty_" + name] = round(measure(empty, args), 1)
with anxin.step(1):
    pass
s = anxin.stats()
made = 3 * ROUNDS * BURST * len(calls) + 2
ok = s["ignored"] == 0
if mode == "off":
    ok = ok and s["unsent"] - s0["unsent"] == made
elif mode == "agent":
    anxin.flush(10)
    s = anxin.stats()
    ok = ok and s["dropped"] == 0 and s["sent"] - s0["sent"] == made
out["stats"] = s
print(json.dumps(out))
sys.exit(0 if ok else 1)
