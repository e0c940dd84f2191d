#!/usr/bin/python3
"""Accuracy of the fused attention kernel against a NumPy float64 reference.

For every dtype (float32, bfloat16, float16) and mask (none, causal, padding,
causal + padding): NumPy draws inputs, rounds them to the dtype, computes
softmax(QK^T / sqrt(d) + mask) V in float64 and saves everything as .npy;
kernels_attention_accuracy runs the kernel on them and compares with compare's
metrics. With ANXIN (the program), `anxin compare out.npy ref.npy --json` is
run on the same files and must report the same cosine.

    attention_accuracy.py TOOL WORK_DIR [ANXIN]

Prints the table; exit 1 when a case's cosine is not above 0.999.
"""
import json
import os
import subprocess
import sys

import numpy as np


def round_to(x, dtype):
    x = x.astype(np.float32)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float64)
    if dtype == "bfloat16":
        bits = x.view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def reference(q, k, v, causal, kv_valid):
    b, h, lq, d = q.shape
    hk, lk = k.shape[1], k.shape[2]
    k = np.repeat(k, h // hk, axis=1)
    v = np.repeat(v, h // hk, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(d)
    allowed = np.ones((b, 1, lq, lk), dtype=bool)
    if causal:
        allowed &= (np.arange(lk)[None, :] <= np.arange(lq)[:, None] + (lk - lq))[None, None]
    if kv_valid is not None:
        allowed &= (np.arange(lk)[None, :] < np.array(kv_valid)[:, None])[:, None, None, :]
    s = np.where(allowed, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    p = np.where(allowed, np.exp(s - m), 0)
    z = p.sum(axis=-1, keepdims=True)
    p = np.divide(p, z, out=np.zeros_like(p), where=z > 0)
    return np.einsum("bhqk,bhkd->bhqd", p, v)


def main():
    tool, work = sys.argv[1], sys.argv[2]
    anxin = sys.argv[3] if len(sys.argv) > 3 else None
    rng = np.random.default_rng(20261204)
    shape_q, shape_kv = (2, 4, 300, 64), (2, 2, 300, 64)
    rows, failed = [], False
    for dtype in ("float32", "bfloat16", "float16"):
        for name, causal, padded in (("none", False, False), ("causal", True, False),
                                     ("padding", False, True), ("causal+padding", True, True)):
            case = os.path.join(work, f"{dtype}-{name.replace('+', '-')}")
            os.makedirs(case, exist_ok=True)
            q = round_to(rng.standard_normal(shape_q), dtype)
            k = round_to(rng.standard_normal(shape_kv), dtype)
            v = round_to(rng.standard_normal(shape_kv), dtype)
            kv_valid = [137, 300] if padded else None
            for n, x in (("q", q), ("k", k), ("v", v)):
                np.save(os.path.join(case, n + ".npy"), x.astype(np.float32))
            np.save(os.path.join(case, "ref.npy"), reference(q, k, v, causal, kv_valid))
            with open(os.path.join(case, "case.json"), "w") as f:
                json.dump({"dtype": dtype, "causal": causal, "kv_valid": kv_valid or []}, f)
            r = subprocess.run([tool, case], capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                print(f"{dtype} {name}: tool failed: {r.stderr.strip()}")
                failed = True
                continue
            m = json.loads(r.stdout)
            cli = ""
            if anxin and os.path.exists(anxin):
                c = subprocess.run([anxin, "--json", "compare", os.path.join(case, "out.npy"),
                                    os.path.join(case, "ref.npy")],
                                   capture_output=True, text=True, timeout=120)
                if c.returncode > 1:
                    print(f"{dtype} {name}: anxin compare failed: {c.stderr.strip()}")
                    failed = True
                else:
                    cj = json.loads(c.stdout)
                    cos = cj["pairs"][0]["metrics"]["cosine"]
                    cli = f"{cos:.7f}" if isinstance(cos, float) else str(cos)
                    if isinstance(cos, float) and abs(cos - m["cosine"]) > 1e-9:
                        print(f"{dtype} {name}: anxin compare says cosine {cos}, the API {m['cosine']}")
                        failed = True
            ok = m["cosine"] > 0.999
            failed |= not ok
            rows.append((dtype, name, m["cosine"], m["max_abs_err"], m["max_ulp_err"], cli,
                         "ok" if ok else "FAIL"))
    cli_col = any(r[5] for r in rows)
    print(f"{'dtype':<9} {'mask':<15} {'cosine':>10} {'max abs err':>12} {'max ULP':>8}"
          + (f" {'anxin compare':>14}" if cli_col else "") + "  verdict")
    for dtype, name, cos, mae, ulp, cli, verdict in rows:
        print(f"{dtype:<9} {name:<15} {cos:>10.7f} {mae:>12.3e} {ulp:>8.1f}"
              + (f" {cli:>14}" if cli_col else "") + f"  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
