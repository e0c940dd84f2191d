#!/usr/bin/python3
"""A small data-parallel trainer for trying `anxin run` (docs/recovery.md).

Each rank trains a two-layer network on its own shard of a synthetic
regression task; gradients are averaged with torch.distributed all_reduce on
the gloo backend (CPU), so the ranks really depend on each other. Local rank 0
of each node (LOCAL_RANK; rank 0 on one node) prints `step N loss X`, saves
a Megatron-layout checkpoint of the (replicated) model every
--ckpt-every steps (iter_NNNNNNN/mp_rank_00/model_optim_rng.pt, an
anxin-manifest.json with sizes and SHA-256, then
latest_checkpointed_iteration.txt), and --resume DIR continues from one.

Faults for testing recovery; each fires once, on the launch whose
ANXIN_RUN_ATTEMPT (under torchrun: TORCHELASTIC_RESTART_COUNT) matches (K or
K:ATTEMPT, attempt 0 by default):
  --crash-at K        rank 0 exits with status 1 at step K
  --hang-at K         the last rank stops calling the collective at step K,
                      so the others block inside all_reduce
  --hccl-error-at K   the last rank prints an HCCL error line and stops
  --fault-rank R      the rank these faults strike instead (a rank of another
                      node in a multi-node job)
  --corrupt-newest    before a fault fires, rank 0 flips bytes in the newest
                      checkpoint of its node
  --ignore-abort      with --hang-at: the hanging rank blocks the abort of an
                      in-process restart (it is killed and relaunched)
  --fault-file PATH   at every step, a rank of this node that finds PATH takes
                      it (renames it away) and suffers the fault it names:
                      `crash`, `hang` or `hccl_error`, optionally followed by
                      the local rank meant (`hang 1`; default 0). This is how
                      `anxin lab` injects a fault at a chosen time.

Under anxin run the training loop runs inside anxin_sdk.run(), so ranks that
survive a fault restart in their own processes (in-process restart, warm
spares: docs/recovery.md); a rank resuming a checkpoint it saved itself takes
it from memory.

Each rank reports its steps, its all_reduce calls (timed by the hook on
torch.distributed) and rank 0 its checkpoints through the job telemetry SDK
(python/anxin_sdk, docs/sdk.md) when an agent listens on ANXIN_AGENT_SOCKET;
without one, or without libanxin_sdk.so, those calls do nothing.

Launch: anxin run --nproc-per-node 2 --checkpoint-dir /tmp/ck -- \
          python3 examples/run/train.py --ckpt-dir /tmp/ck --resume '{checkpoint}'
"""
import argparse
import copy
import hashlib
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

# The SDK's Python module from this checkout (python/anxin_sdk), or an
# installed one; the trainer runs the same without it.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
try:
    import anxin_sdk
except ImportError:
    anxin_sdk = None


def parse_fault(text):
    if text is None:
        return None
    step, _, attempt = text.partition(":")
    return int(step), int(attempt or 0)


def fires(fault, step):
    if fault is None:
        return False
    # The launch number: anxin run's, else torchrun's restart count.
    attempt = os.environ.get("ANXIN_RUN_ATTEMPT", os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    return step == fault[0] and int(attempt) == fault[1]


def take_fault(path, local_rank):
    """The fault named in path when it is meant for this rank, taking the file."""
    try:
        with open(path) as f:
            words = f.read().split()
    except OSError:
        return None
    if not words or int(words[1] if len(words) > 1 else 0) != local_rank:
        return None
    try:
        os.rename(path, path + ".taken")  # one rank takes it, once
    except OSError:
        return None
    return words[0]


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_checkpoint(ckpt_dir, step, model, opt):
    iter_dir = os.path.join(ckpt_dir, "iter_%07d" % step)
    shard = os.path.join(iter_dir, "mp_rank_00")
    os.makedirs(shard, exist_ok=True)
    path = os.path.join(shard, "model_optim_rng.pt")
    torch.save({"iteration": step, "model": model.state_dict(), "optimizer": opt.state_dict(),
                "rng": torch.get_rng_state()}, path)
    with open(path, "rb") as f:
        data = f.read()
    manifest = {"format": "anxin-manifest", "version": 1,
                "files": [{"path": "mp_rank_00/model_optim_rng.pt", "size": len(data),
                           "sha256": hashlib.sha256(data).hexdigest()}]}
    write_atomic(os.path.join(iter_dir, "anxin-manifest.json"),
                 (json.dumps(manifest, indent=1) + "\n").encode())
    write_atomic(os.path.join(ckpt_dir, "latest_checkpointed_iteration.txt"), b"%d\n" % step)
    return iter_dir


def corrupt_newest(ckpt_dir):
    names = sorted(n for n in os.listdir(ckpt_dir) if n.startswith("iter_"))
    if not names:
        return
    path = os.path.join(ckpt_dir, names[-1], "mp_rank_00", "model_optim_rng.pt")
    with open(path, "r+b") as f:
        f.seek(-16, os.SEEK_END)
        tail = f.read(16)
        f.seek(-16, os.SEEK_END)
        f.write(bytes(b ^ 0xFF for b in tail))
    print("corrupted %s" % path, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--ckpt-dir", default="")
    p.add_argument("--ckpt-every", type=int, default=5)
    p.add_argument("--resume", default="",
                   help="a checkpoint directory (iter_NNNNNNN); '' = fresh; auto = the newest "
                        "that latest_checkpointed_iteration.txt names (for launchers without "
                        "anxin run's {checkpoint})")
    p.add_argument("--step-time", type=float, default=0.05, help="extra seconds per step")
    p.add_argument("--crash-at", type=parse_fault)
    p.add_argument("--hang-at", type=parse_fault)
    p.add_argument("--hccl-error-at", type=parse_fault)
    p.add_argument("--fault-rank", type=int)
    p.add_argument("--corrupt-newest", action="store_true")
    p.add_argument("--ignore-abort", action="store_true",
                   help="with --hang-at: the hanging rank blocks the SDK's abort signal, so the "
                        "supervisor has to kill it")
    p.add_argument("--fault-file", default="")
    a = p.parse_args()

    if anxin_sdk is not None:
        # In-process restart under anxin run (docs/sdk.md): the SDK sets up
        # the process group and calls train again after a recovery this
        # process survived; elsewhere it just sets up the group and calls it.
        return anxin_sdk.run(lambda ctx: train(a, ctx), backend="gloo")
    dist.init_process_group("gloo")
    try:
        return train(a, None)
    finally:
        dist.destroy_process_group()


# Checkpoints this process saved, by step: a rank that restarts in its own
# process resumes from memory when the agreed step is one of them.
_saved_in_memory = {}


def train(a, ctx):
    rank = dist.get_rank()
    world = dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if anxin_sdk is not None:
        anxin_sdk.hook_torch_distributed()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    # The task: y = sin(x . w) for a fixed w; every rank draws its own shard,
    # the batch of each step from a seed of its own, so that a run resumed
    # at any step sees the same data as one that never stopped.
    w_true = torch.randn(16, generator=torch.Generator().manual_seed(1)) / 4

    start = 1
    # Under anxin run the SDK's context names the agreed checkpoint (a warm
    # spare's command line was expanded before there was one).
    resume = ctx.checkpoint if ctx is not None and os.environ.get("ANXIN_CONTROL_SOCKET") \
        else a.resume
    if resume == "auto":  # without anxin run: the newest the pointer file names
        pointer = os.path.join(a.ckpt_dir, "latest_checkpointed_iteration.txt")
        resume = ""
        if a.ckpt_dir and os.path.exists(pointer):
            with open(pointer) as f:
                resume = os.path.join(a.ckpt_dir, "iter_%07d" % int(f.read().strip()))
    if resume:
        step = int(os.path.basename(resume.rstrip("/")).split("_")[-1])
        state = _saved_in_memory.get(step)
        where = "memory" if state is not None else resume
        if state is None:
            state = torch.load(os.path.join(resume, "mp_rank_00", "model_optim_rng.pt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = state["iteration"] + 1
        if local_rank == 0:
            print("resumed from %s at step %d" % (where, state["iteration"]), flush=True)

    for step in range(start, a.steps + 1):
        last = rank == (world - 1 if a.fault_rank is None else a.fault_rank)
        first = rank == (0 if a.fault_rank is None else a.fault_rank)
        if a.corrupt_newest and rank == 0 and a.ckpt_dir and any(
                fires(f, step) for f in (a.crash_at, a.hang_at, a.hccl_error_at)):
            corrupt_newest(a.ckpt_dir)
        if fires(a.crash_at, step) and first:
            print("crashing at step %d (--crash-at) t=%.3f" % (step, time.time()), flush=True)
            os._exit(1)
        if fires(a.hang_at, step) and last:
            print("rank %d stops calling the collective at step %d (--hang-at) t=%.3f"
                  % (rank, step, time.time()), flush=True)
            if a.ignore_abort:
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
                print("rank %d ignores the abort (--ignore-abort)" % rank, flush=True)
            time.sleep(3600)
        if fires(a.hccl_error_at, step) and last:
            print("rank %d injects an HCCL error at step %d (--hccl-error-at) t=%.3f"
                  % (rank, step, time.time()), flush=True)
            print("RuntimeError: [ERROR] HCCL error in: ProcessGroupHCCL.cpp. "
                  "EI0006: Getting socket times out. Reason: 1. The remote does not initiate "
                  "a connect request.", flush=True)
            time.sleep(3600)
        if a.fault_file:
            injected = take_fault(a.fault_file, local_rank)
            if injected == "crash":
                print("rank %d crashes at step %d (--fault-file) t=%.3f"
                      % (rank, step, time.time()), flush=True)
                os._exit(1)
            if injected == "hang":
                print("rank %d stops calling the collective at step %d (--fault-file) t=%.3f"
                      % (rank, step, time.time()), flush=True)
                time.sleep(3600)
            if injected == "hccl_error":
                print("rank %d injects an HCCL error at step %d (--fault-file) t=%.3f"
                      % (rank, step, time.time()), flush=True)
                print("RuntimeError: [ERROR] HCCL error in: ProcessGroupHCCL.cpp. "
                      "EI0006: Getting socket times out. Reason: 1. The remote does not "
                      "initiate a connect request.", flush=True)
                time.sleep(3600)
        if anxin_sdk is not None:
            anxin_sdk.step_begin(step)
        gen = torch.Generator().manual_seed(1000003 * (rank + 1) + step)
        x = torch.randn(64, 16, generator=gen)
        y = torch.sin(x @ w_true).unsqueeze(1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for prm in model.parameters():
            dist.all_reduce(prm.grad, op=dist.ReduceOp.SUM)
            prm.grad /= world
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.SUM)
        if anxin_sdk is not None:
            anxin_sdk.step_end(step)
        if a.ckpt_dir and step % a.ckpt_every == 0:
            _saved_in_memory.clear()
            _saved_in_memory[step] = copy.deepcopy(
                {"iteration": step, "model": model.state_dict(), "optimizer": opt.state_dict()})
        if local_rank == 0:
            print("step %d loss %.5f" % (step, mean.item() / world), flush=True)
            if a.ckpt_dir and step % a.ckpt_every == 0:
                path = save_checkpoint(a.ckpt_dir, step, model, opt)
                if anxin_sdk is not None:
                    anxin_sdk.checkpoint_saved(step, path)
        if a.step_time > 0:
            time.sleep(a.step_time)
    dist.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
