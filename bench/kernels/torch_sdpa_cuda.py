#!/usr/bin/python3
"""PyTorch's scaled_dot_product_attention on an NVIDIA GPU, the peer of
kernels_attention_cuda_check's speed table (bench/kernels/gpu-check).

    torch_sdpa_cuda.py [--reps N] [--lengths 1024,2048,...]

The same shape as the check's table (batch 1, 16 heads x 128, bfloat16, no
mask) and the same FLOP count (4 x batch x heads x q x kv x head_dim), best of
N CUDA-event timings after one warm-up. Prints one JSON line per length with
the backend PyTorch picked. Exit 3 when PyTorch sees no GPU.
"""
import json
import sys

import torch
import torch.nn.functional as F


def main():
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 3
    lengths = [1024, 2048, 4096, 8192, 16384]
    if "--lengths" in sys.argv:
        lengths = [int(x) for x in sys.argv[sys.argv.index("--lengths") + 1].split(",")]
    if not torch.cuda.is_available():
        print("error: PyTorch sees no CUDA device", file=sys.stderr)
        return 3
    heads, dim = 16, 128
    for n in lengths:
        g = torch.Generator(device="cuda").manual_seed(n)
        q, k, v = (torch.randn(1, heads, n, dim, device="cuda", dtype=torch.bfloat16, generator=g)
                   for _ in range(3))
        with torch.no_grad():
            out = F.scaled_dot_product_attention(q, k, v)
            # A float64 reference on a slice of rows: the timed output is a real result.
            rows = slice(0, 64)
            ref = torch.softmax((q[:, :, rows].double() @ k.double().transpose(-1, -2)) / dim**0.5,
                                dim=-1) @ v.double()
            err = float((out[:, :, rows].double() - ref).abs().max())
            best = float("inf")
            for _ in range(reps):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                F.scaled_dot_product_attention(q, k, v)
                b.record()
                torch.cuda.synchronize()
                best = min(best, a.elapsed_time(b))
        flops = 4.0 * heads * n * n * dim
        print(json.dumps({"length": n, "ms": round(best, 4), "gflops": round(flops / (best * 1e-3) / 1e9, 1),
                          "us_per_token": round(best * 1e3 / n, 4), "max_err_vs_fp64": err,
                          "torch": torch.__version__, "device": torch.cuda.get_device_name()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
