# A reward file in verl's custom_reward_function shape: a number back.
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return float(solution_str.strip() == ground_truth)
