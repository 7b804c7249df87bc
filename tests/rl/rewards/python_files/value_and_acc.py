# Returns half the integer in the response, as a plain number for data_source "number" and as a verl
# result dict otherwise: a numeric `acc` (kept), a `pred` string and a None (both dropped). extra_info's
# delay_s lets a test make later samples finish first.
import time


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    time.sleep(extra_info["delay_s"])
    value = int(solution_str)
    if data_source == "number":
        return value * 0.5
    return {"score": value * 0.5, "acc": value == int(ground_truth), "pred": solution_str, "note": None}
