#!/usr/bin/env bash
# ROLL's PPO: examples/roll_ppo_arith.yaml (adv_estimator gae with a critic section) resolves, with
# `--check-config`, to examples/ppo_arith.yaml's verl keys except the few ROLL spells another way (each listed
# below with why); 3 steps of each on a tiny model, with the two settings ROLL fixes set alike in the verl run,
# log exactly the same metrics, the critic's and the actor's after the critic warmup included; and a critic
# placed off actor_train's ranks, or gae without the critic or without whitened advantages, each fail with one
# message naming the ROLL key.
source "$(dirname "$0")/common.sh"

readonly roll=examples/roll_ppo_arith.yaml verl=examples/ppo_arith.yaml

# --- the same config as the verl example ---------------------------------------------------------------
"$RLFORGE" train --config "$verl" --check-config > "$SCRATCH/verl.yaml" 2> "$SCRATCH/verl.err" ||
  fail "$verl --check-config: $(cat "$SCRATCH/verl.err")"
"$RLFORGE" train --config "$roll" --check-config > "$SCRATCH/roll.yaml" 2> "$SCRATCH/roll.err" ||
  fail "$roll --check-config: $(cat "$SCRATCH/roll.err")"
grep -q "ROLL keys with no effect" "$SCRATCH/roll.err" && fail "the example has keys with no effect"
# What ROLL spells differently ([verl, roll] by key); every other key must be equal.
python3 - "$SCRATCH/expected.json" <<'PY'
import json, sys
# The critic's value clip, lambda, warmup and optimizer are among the equal keys.
expected = {
    # stated in ROLL (per_device_train_batch_size, infer_batch_size), left null in verl: all 64 responses
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": ("~", "64"),
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": ("~", "64"),
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": ("~", "64"),
    "critic.ppo_micro_batch_size_per_gpu": ("~", "64"),
    # the critic's mini-batch and passes, the actor's in verl (32 prompts, ppo_epochs 1); ROLL's critic
    # always makes one pass
    "critic.ppo_mini_batch_size": ("~", "32"),
    "critic.ppo_epochs": ("~", "1"),
    # ROLL's value loss always averages per response; verl's critic follows the actor's token-mean
    "critic.loss_agg_mode": ("~", "seq-mean-token-mean"),
    # placed explicitly in the ROLL file, on actor_train's rank (verl's null: the actor's ranks)
    "critic.device_mapping": ("~", "[0]"),
    # ROLL's default init_kl_coef; no KL in the reward reads it
    "algorithm.kl_ctrl.kl_coef": ("0.001", "0.2"),
    # ROLL's dual clip is 1 + 2 pg_clip or none: verl's default 3 cannot be written in ROLL's keys
    "actor_rollout_ref.actor.clip_ratio_c": ("3.0", "1.7976931348623157e+308"),
    # ROLL names each role's ranks (device_mapping: one process); verl's null is every rank
    "actor_rollout_ref.actor.device_mapping": ("~", "[0]"),
    "actor_rollout_ref.rollout.device_mapping": ("~", "[0]"),
    "actor_rollout_ref.ref.device_mapping": ("~", "[0]"),
    # output_dir names the folder verl derives from project and experiment names
    "trainer.default_local_dir": ("~", "checkpoints/rlforge/ppo_arith"),
}
json.dump(expected, open(sys.argv[1], "w"))
PY
python3 tests/e2e/config_diff.py "$SCRATCH/verl.yaml" "$SCRATCH/roll.yaml" "$SCRATCH/expected.json"

# --- the same run as the verl example ----------------------------------------------------------------
# A one-step SFT export of a tiny model (the builtin:arith tokenizer) stands in for the warm start. Both
# runs take the same verl overrides: 3 steps, the actor from step 2 (critic_warmup), one warmup step, a
# validation at the end; the verl run also takes the two settings ROLL fixes (no dual clip, the per-response
# value loss).
quiet "$RLFORGE" sft --config examples/sft_arith3_warm_start.yaml trainer.default_local_dir="$SCRATCH/sft" \
  trainer.total_training_steps=1 trainer.test_freq=1 trainer.save_freq=1 data.val_size=16 trainer.num_threads=2 \
  "model.config={architectures: [Qwen3ForCausalLM], hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1,
   num_attention_heads: 2, num_key_value_heads: 1, head_dim: 16, tie_word_embeddings: false}"
common=(actor_rollout_ref.model.path="$SCRATCH/sft/global_step_1/huggingface" trainer.total_training_steps=3
        trainer.critic_warmup=2 trainer.val_before_train=false trainer.test_freq=3 trainer.save_freq=-1
        trainer.time_budget_s=null trainer.resume_mode=disable data.val_size=16 trainer.num_threads=2
        actor_rollout_ref.actor.optim.lr_warmup_steps=1 critic.optim.lr_warmup_steps=1)
quiet timeout 300 "$RLFORGE" train --config "$roll" "${common[@]}" trainer.default_local_dir="$SCRATCH/roll_run"
quiet timeout 300 "$RLFORGE" train --config "$verl" "${common[@]}" trainer.default_local_dir="$SCRATCH/verl_run" \
  actor_rollout_ref.actor.clip_ratio_c=1.7976931348623157e+308 critic.loss_agg_mode=seq-mean-token-mean
python3 - "$SCRATCH/roll_run/metrics.jsonl" "$SCRATCH/verl_run/metrics.jsonl" <<'PY'
import json, sys
roll, verl = ([json.loads(line) for line in open(p)] for p in sys.argv[1:])
assert [r["step"] for r in roll] == [r["step"] for r in verl] == [1, 2, 3], [r["step"] for r in roll]
# The actor trains from step critic_warmup (2) on, the critic every step, and the run validated at its end.
assert [r["step"] for r in roll if "actor/pg_loss" in r] == [2, 3], "actor updates"
assert all("critic/vf_loss" in r and "critic/vf_explained_var" in r for r in roll), "critic metrics"
assert "val-core/arith/acc/mean@1" in roll[-1], "no validation at step 3"
for a, b in zip(roll, verl):
    keys = {k for k in a.keys() | b.keys()
            if not k.startswith(("timing_s/", "perf/mfu/", "perf/tflops/"))
            and k not in ("perf/throughput", "perf/time_per_step")}
    differ = {k: (a.get(k), b.get(k)) for k in sorted(keys) if a.get(k) != b.get(k)}
    assert not differ, f"step {a['step']}: {differ}"
print(f"ok: 3 steps of the ROLL PPO example = the verl one: {len(keys)} metrics (all but timings and MFU) equal exactly")
PY

# --- errors, each one line naming the ROLL key ---------------------------------------------------------
variant() { sed "$2" "$roll" > "$SCRATCH/$1.yaml"; echo "$SCRATCH/$1.yaml"; }
expect_error "critic.device_mapping: rank 1 is outside the world of 1 ranks" \
  train --config "$(variant placed '/^critic:/,/^validation:/ s/list(range(0,1))/[1]/')"
expect_error "adv_estimator: 'gae' needs ROLL's critic section" \
  train --config "$(variant no_critic '/^critic:/,/^validation:/ { /^validation:/!d }')"
expect_error "whiten_advantages: false with gae: verl's gae always whitens the advantages" \
  train --config "$(variant unwhitened 's/^whiten_advantages: true/whiten_advantages: false/')"
