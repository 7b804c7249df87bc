"""Asserts that two RL runs' metrics.jsonl are the same run, for the multi-rank e2e tests: the same steps,
scores, response lengths and validation exactly (the draws are keyed, not scheduled), and losses, gradient
norms, entropy, KL and advantages within 1e-4 relative (a DP sum adds in another order).
Usage: same_run.py ONE.jsonl OTHER.jsonl STEPS WHAT"""
import json
import sys

one, other = ([json.loads(line) for line in open(p)] for p in sys.argv[1:3])
steps, what = int(sys.argv[3]), sys.argv[4]
assert [r["step"] for r in one] == [r["step"] for r in other] == list(range(steps + 1)), "steps differ"
exact = ["critic/score/mean", "response_length/mean", "val-core/arith/acc/mean@1"]
close = ["actor/pg_loss", "actor/grad_norm", "actor/entropy", "actor/kl_loss", "critic/advantages/mean"]
for a, b in zip(one, other):
    for k in exact:
        assert a.get(k) == b.get(k), f"step {a['step']} {k}: {a.get(k)} vs {b.get(k)}"
    for k in close:
        if k in a:
            assert abs(a[k] - b[k]) <= 1e-4 * max(1e-3, abs(a[k])), f"step {a['step']} {k}: {a[k]} vs {b[k]}"
print(f"PASS: {what} = one process (scores, lengths and validation exact; losses within 1e-4)")
