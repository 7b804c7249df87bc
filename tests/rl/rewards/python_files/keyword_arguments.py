# Reports the keyword arguments it was called with (custom_reward_function.reward_kwargs).
def compute_score(data_source, solution_str, ground_truth, extra_info=None, scale=1.0, **kwargs):
    return {"score": scale * len(solution_str), "num_other_kwargs": len(kwargs), "offset": kwargs.get("offset", -1)}
