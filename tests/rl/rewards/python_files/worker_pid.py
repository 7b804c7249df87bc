# Scores a sample with the process id of the worker that scored it.
import os


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return os.getpid()
