#!/usr/bin/env bash
# PPO with a critic (algorithm.adv_estimator gae) is deterministic and resumes exactly: with
# trainer.deterministic, two runs with the same seed log identical metrics, and a run killed with SIGKILL
# after a checkpoint and restarted with resume_mode auto logs the uninterrupted run's metrics from the
# resumed step on, the critic's included (critic/vf_loss, vf_explained_var, values, grad_norm, lr).
# The run is killed twice, each time after a checkpoint:
#  1. during trainer.critic_warmup (the actor not trained yet, the critic mid-way through its LR warmup):
#     the restarted run must keep the actor frozen until step critic_warmup and start training it there;
#  2. after the warmup (the actor's optimizer and schedule a few steps behind the global step).
# Timings and throughput are left out of the comparison; everything else must match exactly.
source "$(dirname "$0")/common.sh"
readonly steps=14 warmup=7 save_freq=2
"$RLFORGE" sft --config examples/sft_arith.yaml trainer.default_local_dir="$SCRATCH/sft" \
  trainer.total_training_steps=300 trainer.test_freq=300 trainer.save_freq=300 trainer.num_threads=2 \
  > "$SCRATCH/sft.log" 2>&1 || { tail -20 "$SCRATCH/sft.log"; fail "warm start sft failed"; }
# Shuffled mini-batches over two epochs for both roles, and LR schedules that move every step (the critic
# still in its warmup at the first kill), so a resume that lost any of that state shows in the metrics.
args=(train --config examples/ppo_arith.yaml actor_rollout_ref.model.path="$SCRATCH/sft/global_step_300/huggingface"
      data.task_kwargs.digits=2 data.max_response_length=4 data.max_prompt_length=8 data.val_size=50
      data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.shuffle=true
      actor_rollout_ref.actor.ppo_epochs=2 actor_rollout_ref.actor.optim.lr_warmup_steps=1
      critic.ppo_mini_batch_size=4 critic.optim.lr_warmup_steps=5 critic.optim.lr_decay_style=cosine
      critic.optim.min_lr=1.0e-4
      trainer.total_training_steps=$steps trainer.critic_warmup=$warmup trainer.test_freq=7 trainer.save_freq=$save_freq
      trainer.deterministic=true trainer.num_threads=2 trainer.max_actor_ckpt_to_keep=null trainer.time_budget_s=null)

run() { "$RLFORGE" "${args[@]}" trainer.default_local_dir="$SCRATCH/$1" > "$SCRATCH/$2.log" 2>&1 \
          || { tail -20 "$SCRATCH/$2.log"; fail "run $2 failed"; }; }
run straight straight
run again again

# kill_after <checkpoint> <log>: runs in $SCRATCH/killed (resuming whatever it holds) and kills it with
# SIGKILL once it has checkpointed <checkpoint> or later and logged the step after it; echoes the step of
# the newest checkpoint at the kill.
kill_after() {
  local dir=$SCRATCH/killed
  "$RLFORGE" "${args[@]}" trainer.default_local_dir="$dir" > "$SCRATCH/$2.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 3000); do
    if [ -f "$dir/latest_checkpointed_iteration.txt" ] && [ "$(cat "$dir/latest_checkpointed_iteration.txt")" -ge "$1" ] &&
       grep -q "\"step\":$(($1 + 1))[,}]" "$dir/metrics.jsonl" 2>/dev/null; then
      break
    fi
    sleep 0.02
  done
  kill -9 "$pid" 2>/dev/null || fail "$2: the run ended before it could be killed"
  wait "$pid" 2>/dev/null || true
  cat "$dir/latest_checkpointed_iteration.txt"
}
first=$(kill_after "$save_freq" first)
[ "$first" -lt "$warmup" ] || fail "the first kill came after checkpoint $first, past critic_warmup $warmup"
[ -d "$SCRATCH/killed/global_step_$first/critic" ] || fail "no critic in checkpoint $first"
second=$(kill_after $((warmup + 1)) second)
grep -q "resumed from .*global_step_$first\$" "$SCRATCH/second.log" || fail "the second run did not resume from $first"
[ "$second" -gt "$warmup" ] && [ "$second" -lt "$steps" ] || fail "the second kill came after checkpoint $second"
run killed third
grep -q "resumed from .*global_step_$second\$" "$SCRATCH/third.log" || fail "the third run did not resume from $second"
echo "killed after checkpoints $first (during the critic warmup) and $second (after it)"

python3 - "$SCRATCH/straight/metrics.jsonl" "$SCRATCH/again/metrics.jsonl" "$SCRATCH/killed/metrics.jsonl" \
  "$steps" "$warmup" "$first" "$second" <<'PY'
import json, sys
def rows(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        out[r["step"]] = {k: v for k, v in r.items() if not k.startswith(("timing_s/", "perf/"))}
    return out
straight, again, resumed = (rows(p) for p in sys.argv[1:4])
steps, warmup, first, second = map(int, sys.argv[4:])
assert sorted(straight) == list(range(steps + 1)), sorted(straight)
critic = ["critic/vf_loss", "critic/vf_explained_var", "critic/vf_clipfrac", "critic/vpred_mean", "critic/grad_norm",
          "critic/lr", "critic/values/mean", "critic/returns/mean", "critic/advantages/mean"]
for s in range(1, steps + 1):
    missing = [k for k in critic if k not in straight[s]]
    assert not missing, f"step {s}: no {missing}"
# The comparison must cover the state a resume restores: the critic and both LR schedules move every step.
for k in ["critic/lr", "critic/vf_loss", "actor/lr"]:
    seen = [straight[s][k] for s in range(1, steps + 1) if k in straight[s]]
    assert len(set(seen)) == len(seen), f"{k} repeats over the steps: {seen}"
def differences(one, other):
    bad = [s for s in one if one[s] != other.get(s)]
    if not bad:
        return ""
    s = bad[0]
    keys = sorted(set(one[s]) | set(other.get(s, {})))
    diff = [(k, one[s].get(k), other.get(s, {}).get(k)) for k in keys if one[s].get(k) != other.get(s, {}).get(k)]
    return f"steps {bad} differ; step {s}: {diff[:6]}"
assert straight == again, "two deterministic runs: " + differences(straight, again)
assert sorted(resumed) == list(range(steps + 1)), sorted(resumed)
assert straight == resumed, f"killed after {first} and {second} and resumed: " + differences(straight, resumed)
# verl's critic warmup across the first resume: no actor update before step critic_warmup, one from it on.
early = [s for s in range(1, warmup) if "actor/pg_loss" in resumed[s]]
late = [s for s in range(warmup, steps + 1) if "actor/pg_loss" not in resumed[s]]
assert not early and not late, f"actor updates during the warmup at {early}, missing after it at {late}"
print(f"PASS: two deterministic PPO runs identical; killed after checkpoints {first} (critic warmup to step {warmup}) "
      f"and {second}, resumed: identical to the uninterrupted run, critic metrics included ({steps} steps)")
PY
