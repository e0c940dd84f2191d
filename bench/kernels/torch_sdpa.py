#!/usr/bin/python3
"""PyTorch's scaled_dot_product_attention on the CPU, on the inputs attention_bench wrote.

    torch_sdpa.py NPY_DIR LENGTH THREADS [--causal] [--reps N]

Loads L{LENGTH}_{q,k,v,out}.npy, times SDPA (best of N after one warm-up),
and prints one JSON line with the time and the largest difference from the
fused kernel's output. PyTorch 2 has torch.nn.functional.scaled_dot_product_attention;
Debian bookworm's 1.13 has the same function as _scaled_dot_product_attention
(returning (output, weights)).
"""
import json
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def main():
    d, length, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    causal = "--causal" in sys.argv
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 2
    torch.set_num_threads(threads)
    q, k, v, fused = (torch.from_numpy(np.load(f"{d}/L{length}_{n}.npy")) for n in
                      ("q", "k", "v", "out"))
    if hasattr(F, "scaled_dot_product_attention"):
        def run():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        api = "scaled_dot_product_attention"
    else:
        def run():
            return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, causal)[0]
        api = "_scaled_dot_product_attention"
    with torch.no_grad():
        out = run()
        best = best_cpu = float("inf")
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            out = run()
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
    diff = float((out - fused).abs().max())
    print(json.dumps({"length": length, "torch_s": best, "torch_cpu_s": best_cpu, "torch_api": api,
                      "torch_version": torch.__version__, "max_diff_vs_fused": diff}))


if __name__ == "__main__":
    main()
