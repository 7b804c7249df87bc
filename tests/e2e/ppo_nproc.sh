#!/usr/bin/env bash
# PPO with a critic (algorithm.adv_estimator gae) on two ranks against one process: `rlforge --nproc 2
# train` with the actor at DP 2 and the critic, on the actor's ranks, in its own layout
#  a. DP 2 (critic.megatron follows the actor's),
#  b. TP 2 (critic.megatron.tensor_model_parallel_size=2: each rank holds half of every critic matrix),
# or e. the actor on rank 0 and the critic on rank 1 (critic.device_mapping),
# each gives the one-process run: the same responses (the draws are keyed, not scheduled), scores and
# validation exactly, and the actor's and critic's losses, gradient norms, values, returns, advantages and
# vf_explained_var within 1e-4 relative. The tolerance is for f32 sums taken in another order, nothing
# else: the DP all-reduce adds the ranks' gradient partial sums where one process adds all micro-batches
# in one, and under TP each rank's matmul sums its half of the hidden dimension before the TP all-reduce
# adds the halves (deterministic mode makes every kernel batch-invariant, so the micro-batch sizes, 8
# responses per DP rank against 16, change nothing). The critic trains alone at step 1 (critic_warmup 2)
# and both train from step 2 on, two epochs of shuffled mini-batches each.
# Then the TP 2 run's step-2 checkpoint (the critic in one part per TP rank) resumed
#  c. at the same layout gives that run's steps 3 and 4 exactly,
#  d. in one process (every part read into whole tensors) gives them within the same tolerance.
source "$(dirname "$0")/common.sh"
readonly steps=4
"$RLFORGE" sft --config examples/sft_arith.yaml trainer.default_local_dir="$SCRATCH/sft" \
  trainer.total_training_steps=300 trainer.test_freq=300 trainer.save_freq=300 trainer.num_threads=2 \
  > "$SCRATCH/sft.log" 2>&1 || { tail -20 "$SCRATCH/sft.log"; fail "warm start sft failed"; }
args=(train --config examples/ppo_arith.yaml actor_rollout_ref.model.path="$SCRATCH/sft/global_step_300/huggingface"
      data.task_kwargs.digits=2 data.max_response_length=4 data.max_prompt_length=8 data.val_size=50
      data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.shuffle=true
      actor_rollout_ref.actor.ppo_epochs=2 actor_rollout_ref.actor.optim.lr_warmup_steps=1 critic.optim.lr_warmup_steps=1
      trainer.total_training_steps=$steps trainer.critic_warmup=2 trainer.test_freq=2 trainer.save_freq=2
      trainer.max_actor_ckpt_to_keep=null trainer.time_budget_s=null)
# Logged by both runs (so compared): the critic's metrics, and the actor's loss once it trains.
logged=(critic/vf_loss critic/grad_norm critic/vpred_mean critic/values/mean critic/returns/mean
        critic/vf_explained_var actor/pg_loss)
# saved_by <run> <component>: "tp=<size> dp=<size>" of the engine that wrote the last checkpoint's component.
saved_by() {
  python3 -c "import json, sys; s = json.load(open(sys.argv[1]))['saved_by']
print(f\"tp={s['tensor_model_parallel_size']} dp={s['data_parallel_size']}\")" \
    "$SCRATCH/$1/global_step_$steps/$2/engine_state.json"
}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
quiet timeout 300 "$RLFORGE" "${args[@]}" trainer.num_threads=1 trainer.default_local_dir="$SCRATCH/one"

# a. The critic at DP 2, as the actor.
quiet timeout 300 "$RLFORGE" --nproc 2 "${args[@]}" trainer.default_local_dir="$SCRATCH/dp2"
[ "$(saved_by dp2 actor) $(saved_by dp2 critic)" == "tp=1 dp=2 tp=1 dp=2" ] \
  || fail "DP 2 run: actor $(saved_by dp2 actor), critic $(saved_by dp2 critic)"
python3 tests/e2e/same_run.py "$SCRATCH/one/metrics.jsonl" "$SCRATCH/dp2/metrics.jsonl" $steps \
  "actor DP 2, critic DP 2" "${logged[@]}"

# b. The critic at TP 2 (DP 1) under the actor at DP 2: its checkpoint is one part per TP rank.
quiet timeout 300 "$RLFORGE" --nproc 2 "${args[@]}" critic.megatron.tensor_model_parallel_size=2 \
  trainer.default_local_dir="$SCRATCH/tp2"
[ "$(saved_by tp2 actor) $(saved_by tp2 critic)" == "tp=1 dp=2 tp=2 dp=1" ] \
  || fail "TP 2 run: actor $(saved_by tp2 actor), critic $(saved_by tp2 critic)"
for part in model-tp0 model-tp1; do
  [ -f "$SCRATCH/tp2/global_step_$steps/critic/$part.safetensors" ] || fail "no critic $part in the TP 2 run's checkpoint"
done
python3 tests/e2e/same_run.py "$SCRATCH/one/metrics.jsonl" "$SCRATCH/tp2/metrics.jsonl" $steps \
  "actor DP 2, critic TP 2" "${logged[@]}"

# c. Context parallel (issue #24): the actor and the critic at CP 2, every response split over both ranks (the
# critic's values gathered back for GAE): the one-process run still, and its checkpoint a one-part one (CP ranks
# hold replicas: dp-cp rank 0 writes).
quiet timeout 300 "$RLFORGE" --nproc 2 "${args[@]}" actor_rollout_ref.actor.megatron.context_parallel_size=2 \
  critic.megatron.context_parallel_size=2 trainer.default_local_dir="$SCRATCH/cp2"
python3 tests/e2e/same_run.py "$SCRATCH/one/metrics.jsonl" "$SCRATCH/cp2/metrics.jsonl" $steps \
  "actor CP 2, critic CP 2" "${logged[@]}"
[ "$(saved_by cp2 actor) $(saved_by cp2 critic)" == "tp=1 dp=1 tp=1 dp=1" ] \
  || fail "CP 2 run: actor $(saved_by cp2 actor), critic $(saved_by cp2 critic)"

# e. Placed apart (critic.device_mapping): the actor and rollout on rank 0, the critic alone on rank 1, whose
# values and metrics reach rank 0 by broadcast and whose shards the world-wide checkpoint collects.
quiet timeout 300 "$RLFORGE" --nproc 2 "${args[@]}" actor_rollout_ref.actor.device_mapping=[0] \
  actor_rollout_ref.rollout.device_mapping=[0] critic.device_mapping=[1] trainer.default_local_dir="$SCRATCH/apart"
[ "$(saved_by apart actor) $(saved_by apart critic)" == "tp=1 dp=1 tp=1 dp=1" ] \
  || fail "placed run: actor $(saved_by apart actor), critic $(saved_by apart critic)"
[ -f "$SCRATCH/apart/global_step_$steps/critic_huggingface/config.json" ] || fail "no critic export in the placed run"
python3 tests/e2e/same_run.py "$SCRATCH/one/metrics.jsonl" "$SCRATCH/apart/metrics.jsonl" $steps \
  "actor on rank 0, critic on rank 1" "${logged[@]}"

# c, d. Resumed from the TP 2 run's checkpoint of step 2, as if killed after it (resume_mode auto reads
# latest_checkpointed_iteration.txt; the metrics after step 2 are dropped on resume).
for run in tp2_resumed one_resumed; do
  cp -r "$SCRATCH/tp2" "$SCRATCH/$run"
  rm -r "$SCRATCH/$run/global_step_$steps"
  echo 2 > "$SCRATCH/$run/latest_checkpointed_iteration.txt"
done
quiet timeout 300 "$RLFORGE" --nproc 2 "${args[@]}" critic.megatron.tensor_model_parallel_size=2 \
  trainer.default_local_dir="$SCRATCH/tp2_resumed"
grep -q "resumed from .*global_step_2$" "$SCRATCH/last.log" || fail "the TP 2 run did not resume from step 2"
python3 - "$SCRATCH/tp2/metrics.jsonl" "$SCRATCH/tp2_resumed/metrics.jsonl" <<'PY'
import json, sys
def rows(path):
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(("timing_s/", "perf/"))} for line in open(path)]
straight, resumed = (rows(p) for p in sys.argv[1:])
assert [r["step"] for r in resumed] == [r["step"] for r in straight], [r["step"] for r in resumed]
bad = [(a["step"], k, a.get(k), b.get(k)) for a, b in zip(straight, resumed) for k in sorted(set(a) | set(b))
       if a.get(k) != b.get(k)]
assert not bad, f"the resumed TP 2 run differs: {bad[:6]}"
print("PASS: actor DP 2, critic TP 2, resumed from step 2 at the same layout = the uninterrupted run, exactly")
PY
quiet timeout 300 "$RLFORGE" "${args[@]}" trainer.num_threads=1 trainer.default_local_dir="$SCRATCH/one_resumed"
grep -q "resumed from .*global_step_2$" "$SCRATCH/last.log" || fail "the one-process run did not resume from step 2"
python3 tests/e2e/same_run.py "$SCRATCH/tp2/metrics.jsonl" "$SCRATCH/one_resumed/metrics.jsonl" $steps \
  "the TP 2 run's steps 3-4 (resumed from its step-2 checkpoint)" "${logged[@]}"
