# Misbehaves as the response says; scores exact matches otherwise.
import ctypes
import os
import time


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if solution_str == "raise":
        raise ValueError(f"cannot score {ground_truth!r}")
    if solution_str == "hang":
        time.sleep(100)
    if solution_str == "exit":
        os._exit(3)
    if solution_str == "segfault":
        ctypes.string_at(0)  # reads address 0
    if solution_str == "text":
        return "1.0"
    if solution_str == "nan":
        return float("nan")
    if solution_str == "no_score":
        return {"acc": 1.0}
    if solution_str == "forge":
        os.write(3, b'{"id": 0, "score": "high"}\n')  # a malformed answer to request 0, on the worker's own socket
    return float(solution_str == ground_truth)
