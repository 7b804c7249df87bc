#!/usr/bin/env python3
"""Compares rlforge outputs with reference files, without numpy or safetensors (plain Python).

  compare_outputs.py logprobs OUT.json EXPECTED_LOGPROBS.json ATOL
      every logprobs[i][t] and entropy[i][t], and the losses, within ATOL of the reference
  compare_outputs.py grads OURS.safetensors EXPECTED.safetensors RTOL
      the same tensor names and shapes; |g - e| <= RTOL * |e| + 0.1 * RTOL * max|e| per tensor
      (the floor covers elements that are ~0 by cancellation, far below f32 resolution of the tensor)
  compare_outputs.py same-tensors A_DIR_OR_FILE B_DIR_OR_FILE
      two safetensors files or model folders hold the same tensor names, dtypes, shapes and bytes
Prints the worst error and exits 1 on a mismatch.
"""
import array
import glob
import json
import os
import struct
import sys


def read_safetensors(path):
    """{name: (dtype, shape, raw bytes)} of one .safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    return {name: (e["dtype"], e["shape"], data[base + e["data_offsets"][0]:base + e["data_offsets"][1]])
            for name, e in header.items()}


def read_weights(path):
    """A file, or every *.safetensors file of a folder, as one dict."""
    if os.path.isfile(path):
        return read_safetensors(path)
    tensors = {}
    for file in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
        tensors.update(read_safetensors(file))
    return tensors


def values(dtype, raw):
    if dtype == "F32":
        return array.array("f", raw).tolist()
    if dtype == "F64":
        return array.array("d", raw).tolist()
    if dtype == "BF16":
        halves = array.array("H", raw)
        return array.array("f", struct.pack(f"<{len(halves)}I", *[h << 16 for h in halves])).tolist()
    raise SystemExit(f"unsupported dtype {dtype}")


def compare_logprobs(ours_path, expected_path, atol):
    ours = json.load(open(ours_path))
    expected = json.load(open(expected_path))
    seqs = expected["sequences"]
    if len(ours["logprobs"]) != len(seqs) or len(ours["entropy"]) != len(seqs):
        raise SystemExit(f"FAIL {ours_path}: {len(ours['logprobs'])} sequences, expected {len(seqs)}")
    worst = {"logprobs": 0.0, "entropy": 0.0}
    for i, s in enumerate(seqs):
        for key in worst:
            if len(ours[key][i]) != len(s[key]):
                raise SystemExit(f"FAIL {ours_path}: {key}[{i}] has {len(ours[key][i])} values, expected {len(s[key])}")
            for a, b in zip(ours[key][i], s[key]):
                worst[key] = max(worst[key], abs(a - b))
    for ours_key, expected_key in [("loss", "loss"), ("loss_token_mean", "loss_token_mean"),
                                   ("loss_seq_mean", "loss_seq_mean"), ("loss_seq_sum", "loss_seq_sum")]:
        worst[ours_key] = abs(ours[ours_key] - expected[expected_key])
    if ours["num_predicted_tokens"] != expected["num_predicted_tokens"]:
        raise SystemExit(f"FAIL {ours_path}: num_predicted_tokens {ours['num_predicted_tokens']}")
    summary = ", ".join(f"{k} {v:.2e}" for k, v in worst.items())
    tolerance = {k: atol * (4 if k == "loss_seq_sum" else 1) for k in worst}  # a sum of 4 sequence means
    if any(worst[k] > tolerance[k] for k in worst):
        raise SystemExit(f"FAIL {ours_path} vs {expected_path} (atol {atol}): worst {summary}")
    print(f"ok {os.path.basename(os.path.dirname(expected_path))} logprobs atol {atol}: worst {summary}")


def compare_grads(ours_path, expected_path, rtol):
    ours = read_safetensors(ours_path)
    expected = read_safetensors(expected_path)
    if sorted(ours) != sorted(expected):
        raise SystemExit(f"FAIL {ours_path}: tensors {sorted(set(ours) ^ set(expected))} differ from {expected_path}")
    worst_rel = 0.0
    for name, (dtype, shape, raw) in expected.items():
        o_dtype, o_shape, o_raw = ours[name]
        if o_dtype != "F32" or o_shape != shape:
            raise SystemExit(f"FAIL {name}: {o_dtype} {o_shape}, expected F32 {shape}")
        e, g = values(dtype, raw), values(o_dtype, o_raw)
        scale = max(abs(x) for x in e) if e else 0.0
        for k, (a, b) in enumerate(zip(g, e)):
            if abs(a - b) > rtol * abs(b) + 0.1 * rtol * scale:
                raise SystemExit(f"FAIL {name}[{k}]: {a} vs {b} (rtol {rtol})")
            if abs(b) > 0.01 * scale:
                worst_rel = max(worst_rel, abs(a - b) / abs(b))
    print(f"ok {os.path.basename(os.path.dirname(expected_path))} grads: {len(expected)} tensors, worst relative "
          f"error {worst_rel:.2e} (elements above 1% of their tensor's max)")


def compare_same(a_path, b_path):
    a, b = read_weights(a_path), read_weights(b_path)
    if sorted(a) != sorted(b):
        raise SystemExit(f"FAIL tensors differ: {sorted(set(a) ^ set(b))}")
    for name in a:
        if a[name] != b[name]:
            da, sa, _ = a[name]
            db, sb, _ = b[name]
            raise SystemExit(f"FAIL {name}: {da} {sa} vs {db} {sb}, or different bytes")
    print(f"ok same tensors ({len(a)}): {a_path} == {b_path}")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "logprobs":
        compare_logprobs(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif mode == "grads":
        compare_grads(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif mode == "same-tensors":
        compare_same(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(f"unknown mode {mode}")
