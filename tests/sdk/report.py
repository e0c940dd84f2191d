#!/usr/bin/python3
"""A training loop that reports through anxin_sdk with values tests can check.

    report.py STEPS

Each step (anxin_sdk.step): one run of kernel "gemm_bf16" of 1 ms (the very
last one takes 3 ms) and one all_reduce of 64 MiB in 4 ms with algorithm
"ring" over a group of 4; the step itself sleeps 2 ms. Then a heartbeat, a
checkpoint of the last step at /ckpt/iter_<STEPS>, and allocator statistics
for device 0 (2 GiB reserved, 1.5 GiB allocated, fragmentation 0.25, 1 OOM,
3 remaps). Identity and socket come from the environment (ANXIN_AGENT_SOCKET,
ANXIN_JOB_ID, RANK, WORLD_SIZE). Prints anxin_sdk.stats() as one line of JSON
and exits 0 when everything reached the agent's socket, 1 otherwise.
"""
import json
import sys
import time

import anxin_sdk as anxin

steps = int(sys.argv[1])
for i in range(steps):
    with anxin.step(i):
        anxin.kernel("gemm_bf16", 0.003 if i == steps - 1 else 0.001)
        anxin.collective("all_reduce", 64 << 20, 0.004, algorithm="ring", group_size=4)
        time.sleep(0.002)
anxin.heartbeat()
anxin.checkpoint_saved(steps, "/ckpt/iter_%d" % steps)
anxin.alloc_stats(0, reserved_bytes=2 << 30, allocated_bytes=3 << 29, peak_reserved_bytes=2 << 30,
                  fragmentation=0.25, ooms=1, remaps=3)
flushed = anxin.flush(10)
s = anxin.stats()
print(json.dumps(s))
sys.exit(0 if flushed and s["dropped"] == 0 and s["ignored"] == 0 else 1)
