#!/usr/bin/python3
"""The peer side of the compare benchmark: msprobe's way of comparing two tensor dumps,
in NumPy and pandas-free Python, one tensor after another.

For every tensor in OUT/dump.json with a match in REF/dump.json it loads both .npy files,
casts them to float64 (as msprobe's compare does) and computes Cosine, MaxAbsErr,
MaxRelativeErr (zero bench values get eps after the cast), One/Five Thousandth Err Ratio,
RMSE, EucDist, mean absolute and relative error, and NaN/Inf position mismatches.

Usage: numpy_compare.py OUT_DIR REF_DIR
  -> prints {"pairs": N, "bytes": B, "not_pass": F, "seconds": S, "metrics": {name: {...}}}
"metrics" holds every pair's numbers, so that bench/compare/run can check that anxin computed
the same before it compares their speed; "seconds" covers the comparison, not that output.
"""
import json
import os
import sys
import time

import numpy as np


def leaves(node, name, out):
    if node is None:
        return
    if isinstance(node, dict) and node.get("type", "").endswith("Tensor"):
        out[name] = node
    elif isinstance(node, list):
        for i, v in enumerate(node):
            leaves(v, f"{name}.{i}", out)
    elif isinstance(node, dict) and "type" not in node:
        for k, v in node.items():
            leaves(v, f"{name}.{k}", out)


def tensors(root):
    with open(os.path.join(root, "dump.json")) as f:
        data = json.load(f)["data"]
    out = {}
    for op, entry in data.items():
        for key, value in entry.items():
            k = "input" if key in ("input_args", "input_kwargs") else key
            leaves(value, f"{op}.{k}", out)
    return out


def load(root, leaf):
    """The tensor and its size in the file."""
    a = np.load(os.path.join(root, "dump_tensor_data", leaf["data_name"]))
    stored = a.nbytes
    if a.dtype.kind == "V":  # bfloat16 saved as raw <V2: dump.json says what it is
        a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return a, stored


def metrics(n, b):
    n = n.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    res = {}
    res["nan_mismatch"] = int(np.sum(np.isnan(n) != np.isnan(b)))
    res["inf_mismatch"] = int(np.sum(np.isinf(n) != np.isinf(b)))
    fin = np.isfinite(n) & np.isfinite(b)
    n, b = n[fin], b[fin]
    num = np.dot(n, b)
    den = np.sqrt(np.dot(n, n)) * np.sqrt(np.dot(b, b))
    res["cosine"] = float(num / den) if den else float("nan")
    abs_err = np.abs(n - b)
    res["max_abs_err"] = float(abs_err.max()) if abs_err.size else 0.0
    zero = b == 0
    bb, nn = b.copy(), n.copy()
    bb[zero] += np.finfo(np.float64).eps
    nn[zero] += np.finfo(np.float64).eps
    rel = np.abs((nn - bb) / bb)
    res["max_rel_err"] = float(rel.max()) if rel.size else 0.0
    res["one_thousandth"] = float(np.sum(rel < 0.001) / rel.size) if rel.size else 0.0
    res["five_thousandth"] = float(np.sum(rel < 0.005) / rel.size) if rel.size else 0.0
    res["rmse"] = float(np.sqrt(np.mean(np.square(n - b)))) if n.size else 0.0
    res["euc_dist"] = float(np.linalg.norm(n - b))
    res["mean_abs_err"] = float(np.mean(abs_err)) if n.size else 0.0
    res["mean_rel_err"] = float(np.mean(rel)) if n.size else 0.0
    return res


def main():
    np.seterr(all="ignore")
    out_dir, ref_dir = sys.argv[1], sys.argv[2]
    t0 = time.time()
    out, ref = tensors(out_dir), tensors(ref_dir)
    pairs, nbytes, fails, every = 0, 0, 0, {}
    for name, leaf in out.items():
        if name not in ref:
            continue
        (a, na), (b, nb) = load(out_dir, leaf), load(ref_dir, ref[name])
        nbytes += na + nb
        m = metrics(a, b)
        fails += not (m["cosine"] > 0.99 and m["max_abs_err"] < 0.001)
        every[name] = m
        pairs += 1
    seconds = time.time() - t0
    print(json.dumps({"pairs": pairs, "bytes": nbytes, "not_pass": fails, "seconds": seconds,
                      "metrics": every}))


if __name__ == "__main__":
    main()
