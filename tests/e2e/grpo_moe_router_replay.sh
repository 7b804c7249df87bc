#!/usr/bin/env bash
# MoE router replay R3 (issue #25): GRPO on a tiny Qwen3-MoE from `init-model --arch qwen3_moe` on the built-in
# arith task, deterministic (batch-invariant kernels everywhere). The old-log-prob pass and the update replay the
# rollout's routing, so at every step every recorded token's routing in the trainer is the rollout's
# (moe/replay_routing_match, counted, 1.0) and the trainer's old log-probs are the rollout's to 1e-5. The expert-load
# metrics are logged for both. Then the same run without replay logs the natural agreement, R2 runs, R3 runs on two
# ranks (R2 is refused there) and at TP 2 with sequence parallel (the rollout at TP 2; each rank routes its own
# tokens), TP 2 without sequence parallel is refused for the MoE actor, and a dense model refuses a replay mode by
# name.
source "$(dirname "$0")/common.sh"
quiet "$RLFORGE" init-model --arch qwen3_moe --out "$SCRATCH/moe" --seed 3 --hidden 32 --layers 2 --heads 4 \
  --kv-heads 2 --ffn 64 --experts 8 --top-k 2 --moe-ffn 32 --norm-topk-prob 1
quiet "$RLFORGE" init-model --arch qwen3 --out "$SCRATCH/dense" --seed 3 --hidden 32 --layers 2 --heads 4 \
  --kv-heads 2 --ffn 64

cat > "$SCRATCH/grpo.yaml" <<EOF
actor_rollout_ref:
  model: {path: $SCRATCH/moe}
  actor:
    ppo_mini_batch_size: 4
    entropy_coeff: 0.01
    optim: {lr: 1.0e-2}
    megatron: {dtype: float32, sequence_parallel: false, use_distributed_optimizer: false}
    router_replay: {mode: R3}
  rollout: {n: 4, dtype: float32, kv_cache_bytes: 8388608, calculate_log_probs: true}
data: {task: arith, task_kwargs: {digits: 2}, max_prompt_length: 16, max_response_length: 6, train_batch_size: 8,
       val_size: 16}
algorithm: {adv_estimator: grpo}
trainer: {total_training_steps: 4, test_freq: -1, save_freq: -1, deterministic: true, num_threads: 2,
          logger: [console, jsonl]}
EOF
train=(train --config "$SCRATCH/grpo.yaml")

"$RLFORGE" "${train[@]}" trainer.default_local_dir="$SCRATCH/r3" > "$SCRATCH/r3.log" 2>&1 \
  || { tail -20 "$SCRATCH/r3.log"; fail "GRPO with router replay R3 failed"; }
python3 - "$SCRATCH/r3/metrics.jsonl" <<'PY' || fail "R3 metrics"
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if r["step"] > 0]
assert len(steps) == 4, len(steps)
for r in steps:
    assert r["moe/replay_routing_match"] == 1.0, (r["step"], r["moe/replay_routing_match"])
    assert "moe/routing_agreement" not in r, r["step"]
    assert r["rollout/logprob_diff_max"] <= 1e-5, (r["step"], r["rollout/logprob_diff_max"])
    for prefix in ("", "rollout/"):
        assert r[prefix + "moe/load_imbalance"] >= 1.0, r
        assert 0 <= r[prefix + "moe/tokens_per_expert/min"] <= r[prefix + "moe/tokens_per_expert/max"], r
        assert r[prefix + "moe/dropped_tokens"] == 0, r
    assert r["actor/grad_norm"] > 0, r
worst = max(r["rollout/logprob_diff_max"] for r in steps)
print(f"ok R3: routing match 1.0 at every step, rollout/trainer log-prob diff max {worst:.2e}")
PY

# Without replay the old-log-prob pass routes freely: its agreement with the rollout is logged (deterministic mode
# computes the rollout's arithmetic, so it agrees here too), and R2 replays that pass's routing in the update.
"$RLFORGE" "${train[@]}" actor_rollout_ref.actor.router_replay.mode=disabled trainer.total_training_steps=2 \
  trainer.default_local_dir="$SCRATCH/free" > "$SCRATCH/free.log" 2>&1 \
  || { tail -20 "$SCRATCH/free.log"; fail "GRPO without replay failed"; }
"$RLFORGE" "${train[@]}" actor_rollout_ref.actor.router_replay.mode=R2 trainer.total_training_steps=2 \
  trainer.default_local_dir="$SCRATCH/r2" > "$SCRATCH/r2.log" 2>&1 \
  || { tail -20 "$SCRATCH/r2.log"; fail "GRPO with router replay R2 failed"; }
python3 - "$SCRATCH/free/metrics.jsonl" "$SCRATCH/r2/metrics.jsonl" <<'PY' || fail "disabled / R2 metrics"
import json, sys
free = [r for r in map(json.loads, open(sys.argv[1])) if r["step"] > 0]
r2 = [r for r in map(json.loads, open(sys.argv[2])) if r["step"] > 0]
for r in free:
    assert 0.9 <= r["moe/routing_agreement"] <= 1.0 and "moe/replay_routing_match" not in r, r
for r in r2:
    assert r["moe/replay_routing_match"] == r["moe/routing_agreement"], r
print(f"ok: natural agreement {[r['moe/routing_agreement'] for r in free]}, R2 ran")
PY

# Two ranks: the rollout's records travel with its responses to every rank, each actor DP rank replays its share.
"$RLFORGE" --nproc 2 "${train[@]}" trainer.total_training_steps=2 trainer.num_threads=1 \
  trainer.default_local_dir="$SCRATCH/two" > "$SCRATCH/two.log" 2>&1 \
  || { tail -20 "$SCRATCH/two.log"; fail "GRPO with router replay R3 on two ranks failed"; }
python3 - "$SCRATCH/two/metrics.jsonl" <<'PY' || fail "R3 metrics on two ranks"
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if r["step"] > 0]
assert len(steps) == 2 and all(r["moe/replay_routing_match"] == 1.0 for r in steps), steps
assert all(r["rollout/logprob_diff_max"] <= 1e-5 for r in steps), [r["rollout/logprob_diff_max"] for r in steps]
print("ok R3 on two ranks")
PY
# TP 2 + SP: the actor's ranks each replay their own tokens' rows, the rollout decodes at TP 2 (experts split).
"$RLFORGE" --nproc 2 "${train[@]}" trainer.total_training_steps=2 trainer.num_threads=1 \
  actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 \
  actor_rollout_ref.actor.megatron.sequence_parallel=true \
  actor_rollout_ref.rollout.tensor_model_parallel_size=2 trainer.default_local_dir="$SCRATCH/tp2" \
  > "$SCRATCH/tp2.log" 2>&1 || { tail -20 "$SCRATCH/tp2.log"; fail "GRPO with router replay R3 at TP 2 failed"; }
python3 - "$SCRATCH/tp2/metrics.jsonl" <<'PY' || fail "R3 metrics at TP 2"
import json, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if r["step"] > 0]
assert len(steps) == 2 and all(r["moe/replay_routing_match"] == 1.0 for r in steps), steps
assert all(r["rollout/logprob_diff_max"] <= 1e-5 for r in steps), [r["rollout/logprob_diff_max"] for r in steps]
print("ok R3 at TP 2 + SP, rollout TP 2")
PY
if "$RLFORGE" --nproc 2 "${train[@]}" actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=2 trainer.num_threads=1 \
  trainer.default_local_dir="$SCRATCH/tp2_no_sp" > "$SCRATCH/stdout" 2> "$SCRATCH/stderr"; then
  fail "--nproc 2: an MoE actor at TP 2 without sequence parallel was not refused"
fi
grep -q "^rlforge: .*actor_rollout_ref.actor.megatron.sequence_parallel: false with tensor_model_parallel_size 2" \
  "$SCRATCH/stderr" || { cat "$SCRATCH/stderr" >&2; fail "--nproc 2: TP 2 without SP not refused by name"; }

# (under mpirun the abort notice follows rank 0's error line)
if "$RLFORGE" --nproc 2 "${train[@]}" actor_rollout_ref.actor.router_replay.mode=R2 trainer.num_threads=1 \
  trainer.default_local_dir="$SCRATCH/two_r2" > "$SCRATCH/stdout" 2> "$SCRATCH/stderr"; then
  fail "--nproc 2: R2 over two actor DP ranks was not refused"
fi
grep -q "^rlforge: .*router_replay.mode: R2 with more than one actor data-parallel rank is not built" \
  "$SCRATCH/stderr" || { cat "$SCRATCH/stderr" >&2; fail "--nproc 2: R2 not refused by name"; }
echo "ok: --nproc 2: $(grep '^rlforge:' "$SCRATCH/stderr" | head -1 | cut -c1-140)"

expect_error "actor_rollout_ref.actor.router_replay.mode: R3: the model has no MoE layers" "${train[@]}" \
  actor_rollout_ref.model.path="$SCRATCH/dense" trainer.default_local_dir="$SCRATCH/dense_run"
expect_error "router_replay.mode" "${train[@]}" actor_rollout_ref.actor.router_replay.mode=R4 \
  trainer.default_local_dir="$SCRATCH/bad_mode"
echo "PASS: GRPO on a tiny Qwen3-MoE with router replay R3 (match 1.0, log-probs within 1e-5), R2, disabled," \
  "two ranks, TP 2"
