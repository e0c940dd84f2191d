#!/usr/bin/python3
"""Calls anxin_sdk every wrong way a training script might, then a few right
ways, and prints one line of JSON: the SDK's stats() plus "expected_ignored"
(how many of the calls below must have been ignored with an agent
connected), "expected_ignored_setup" (how many of them are setup calls,
which check their arguments also without an agent) and "rejected" (calls
the library itself refused with False). Any exception escaping the module
ends the program with a traceback and a non-zero status.
"""
import json

import anxin_sdk as anxin

bad = [
    lambda: anxin.step_begin(-1),
    lambda: anxin.step_begin("3"),
    lambda: anxin.step_begin(1 << 64),
    lambda: anxin.step_begin(1.5),
    lambda: anxin.step_end(None),
    lambda: anxin.step_time(1, -0.5),
    lambda: anxin.step_time(1, float("nan")),
    lambda: anxin.step_time(1, float("inf")),
    lambda: anxin.step_time(1, "slow"),
    lambda: anxin.collective("all_scatter", 10, 0.1),
    lambda: anxin.collective("all_reduce", -10, 0.1),
    lambda: anxin.collective("all_reduce", 10, "fast"),
    lambda: anxin.collective(0, 10, 0.1),
    lambda: anxin.collective("all_reduce", 10, 0.1, algorithm=5),
    lambda: anxin.collective("all_reduce", 10, 0.1, group_size=-2),
    lambda: anxin.collective(None, None, None),
    lambda: anxin.kernel(None, 0.1),
    lambda: anxin.kernel(b"k", None),
    lambda: anxin.kernel(object(), 1),
    lambda: anxin.checkpoint_saved(-5, "/x"),
    lambda: anxin.checkpoint_saved(5, None),
    lambda: anxin.alloc_stats(-1),
    lambda: anxin.alloc_stats(0, reserved_bytes=-1),
    lambda: anxin.alloc_stats(0, fragmentation="x"),
]
bad_setup = [
    lambda: anxin.set_socket(123),
    lambda: anxin.flush("soon"),
    lambda: anxin.set_identity(7, 0, 1),
]
for call in bad + bad_setup:
    call()
expected = len(bad) + len(bad_setup)

# A context manager given a bad step: both its begin and its end are ignored.
with anxin.step(-3):
    pass
expected += 2

# Values the library itself refuses (False, not ignored).
rejected = sum(not ok for ok in (anxin.set_identity('bad"job', 0, 1),
                                 anxin.set_identity(None, 5, 2)))

# Odd but usable: cut or cleaned by the library.
anxin.kernel("k" * 1000, 0.001)
anxin.kernel(b"\xff\xfe name", 0.001)
anxin.kernel("", 0.001)  # no name: nothing to report, not an error
try:
    with anxin.step(7):
        raise KeyError("the step failed")
except KeyError:
    pass
with anxin.step():  # the step after the last one ended: none yet, so 0
    pass
anxin.heartbeat()
anxin.flush(2)
out = anxin.stats()
out["expected_ignored"] = expected
out["expected_ignored_setup"] = len(bad_setup)
out["rejected"] = rejected
print(json.dumps(out))
