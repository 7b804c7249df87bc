"""Asserts that two RL runs' metrics.jsonl are the same run, for the multi-rank e2e tests: the same steps,
scores, response lengths and validation exactly (the draws are keyed, not scheduled), and losses, gradient
norms, entropy, KL, advantages and, with a critic, its values and losses within 1e-4 relative (a DP sum adds
in another order, a TP matmul sums its halves apart). Each REQUIRED key must be logged by both runs at some
step, so that a comparison of the keys a run should have cannot pass by their absence.
Usage: same_run.py ONE.jsonl OTHER.jsonl STEPS WHAT [REQUIRED ...]"""
import json
import sys

one, other = ([json.loads(line) for line in open(p)] for p in sys.argv[1:3])
steps, what, required = int(sys.argv[3]), sys.argv[4], sys.argv[5:]
assert [r["step"] for r in one] == [r["step"] for r in other] == list(range(steps + 1)), "steps differ"
exact = ["critic/score/mean", "response_length/mean", "val-core/arith/acc/mean@1"]
close = ["actor/pg_loss", "actor/grad_norm", "actor/entropy", "actor/kl_loss", "critic/advantages/mean",
         "critic/vf_loss", "critic/grad_norm", "critic/vpred_mean", "critic/values/mean", "critic/returns/mean",
         "critic/vf_explained_var"]
for k in required:
    assert any(k in a for a in one) and any(k in b for b in other), f"{k} is not logged by both runs"
for a, b in zip(one, other):
    for k in exact:
        assert a.get(k) == b.get(k), f"step {a['step']} {k}: {a.get(k)} vs {b.get(k)}"
    for k in close + [k for k in required if k not in exact + close]:
        assert (k in a) == (k in b), f"step {a['step']} {k}: logged by one run only"
        if k in a:
            assert abs(a[k] - b[k]) <= 1e-4 * max(1e-3, abs(a[k])), f"step {a['step']} {k}: {a[k]} vs {b[k]}"
print(f"PASS: {what} = one process (scores, lengths and validation exact; losses within 1e-4)")
