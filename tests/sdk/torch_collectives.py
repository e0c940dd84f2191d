#!/usr/bin/python3
"""One rank of a gloo job whose torch.distributed calls anxin_sdk's hook
times (RANK and WORLD_SIZE from the environment).

    torch_collectives.py STORE_FILE ITERATIONS

ITERATIONS steps of one all_reduce of 4 MiB (1M float32 ones), then one
all_gather of 1 MiB per rank, one broadcast of 4 MiB, one all_reduce with
async_op=True and one barrier. Checks that the results are what torch alone
gives, prints anxin_sdk.stats() as JSON and exits 0 when every event reached
the agent's socket.
"""
import json
import os
import sys

import anxin_sdk as anxin
import torch
import torch.distributed as dist

store, iterations = sys.argv[1], int(sys.argv[2])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
assert anxin.hook_torch_distributed(), anxin.load_error()
assert anxin.hook_torch_distributed()  # a second call changes nothing
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)

t = torch.ones(1 << 20)
for i in range(iterations):
    with anxin.step(i):
        dist.all_reduce(t)
outs = [torch.empty(1 << 18) for _ in range(world)]
dist.all_gather(outs, torch.full((1 << 18,), float(rank)))
dist.broadcast(t, 0)
work = dist.all_reduce(t, async_op=True)
work.wait()
dist.barrier()

expected = float(world) ** (iterations + 1)
assert bool((t == expected).all()), (t[0].item(), expected)
assert [o[0].item() for o in outs] == [float(r) for r in range(world)]
flushed = anxin.flush(10)
dist.destroy_process_group()
s = anxin.stats()
print(json.dumps(s))
sys.exit(0 if flushed and s["dropped"] == 0 else 1)
