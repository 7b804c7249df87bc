# A self-contained reward file in the shape of verl's verl/utils/reward_score/gsm8k.py (written anew,
# not copied): the answer after the last "#### " (strict) or the last number (flexible), searched in
# the last 300 characters, compared with the ground truth as text.
import re

_CLIP_CHARS = 300


def extract_solution(solution_str, method="strict"):
    assert method in ["strict", "flexible"]
    tail = solution_str[-_CLIP_CHARS:] if len(solution_str) > _CLIP_CHARS else solution_str
    if method == "strict":
        answers = re.findall("#### (\\-?[0-9\\.\\,]+)", tail)
        if not answers:
            return None
        return answers[-1].replace(",", "").replace("$", "")
    numbers = re.findall("(\\-?[0-9\\.\\,]+)", tail)
    if not numbers:
        return None
    # As in verl: when every number is "." the loop ends on the first one, and that is the answer.
    for answer in reversed(numbers):
        if answer not in ["", "."]:
            break
    return answer


def compute_score(data_source, solution_str, ground_truth, extra_info=None, method="strict", format_score=0.0,
                  score=1.0, **kwargs):
    answer = extract_solution(solution_str, method=method)
    if answer is None:
        return 0
    return score if answer == ground_truth else format_score
