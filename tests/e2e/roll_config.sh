#!/usr/bin/env bash
# Issue #10's ROLL configs: examples/roll_grpo_arith.yaml (the main job in ROLL's keys) resolves, with
# `--check-config`, to examples/grpo_arith.yaml's verl keys except the few ROLL spells another way (each
# listed below with why); it runs the arith task (3 steps of a tiny new model, overrides in verl's keys);
# and ROLL keys outside the table, another engine, a placement outside the world, more ranks than the job has, gae
# without a critic section, a ROLL-spelled key in the `rlforge:` block and a ROLL key as an override each fail
# with one message naming the key. ROLL's PPO (the critic) is roll_ppo_config.sh's.
source "$(dirname "$0")/common.sh"

readonly roll=examples/roll_grpo_arith.yaml

# --- the same run as the verl example -------------------------------------------------------------
"$RLFORGE" train --config examples/grpo_arith.yaml --check-config > "$SCRATCH/verl.yaml" 2> "$SCRATCH/verl.err" ||
  fail "grpo_arith.yaml --check-config: $(cat "$SCRATCH/verl.err")"
"$RLFORGE" train --config "$roll" --check-config > "$SCRATCH/roll.yaml" 2> "$SCRATCH/roll.err" ||
  fail "$roll --check-config: $(cat "$SCRATCH/roll.err")"
# What ROLL spells differently ([verl, roll] by key); every other key must be equal.
python3 - "$SCRATCH/expected.json" <<'PY'
import json, sys
expected = {
    # stated in ROLL (per_device_train_batch_size, infer_batch_size), left null in verl: both 128 responses
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": ("~", "128"),
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": ("~", "128"),
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": ("~", "128"),
    # ROLL's defaults (lambd, init_kl_coef); GRPO without KL in the reward reads neither
    "algorithm.lam": ("1.0", "0.95"),
    "algorithm.kl_ctrl.kl_coef": ("0.001", "0.2"),
    # ROLL's dual clip is 1 + 2 pg_clip or none: verl's default 3 cannot be written in ROLL's keys
    "actor_rollout_ref.actor.clip_ratio_c": ("3.0", "1.7976931348623157e+308"),
    # ROLL names each role's ranks (device_mapping: one process); verl's null is every rank
    "actor_rollout_ref.actor.device_mapping": ("~", "[0]"),
    "actor_rollout_ref.rollout.device_mapping": ("~", "[0]"),
    "actor_rollout_ref.ref.device_mapping": ("~", "[0]"),
    # output_dir names the folder verl derives from project and experiment names
    "trainer.default_local_dir": ("~", "checkpoints/rlforge/grpo_arith"),
}
json.dump(expected, open(sys.argv[1], "w"))
PY
python3 tests/e2e/config_diff.py "$SCRATCH/verl.yaml" "$SCRATCH/roll.yaml" "$SCRATCH/expected.json"

# --- it runs the arith task ------------------------------------------------------------------------
# A one-step SFT export of a tiny model (the builtin:arith tokenizer) stands in for the warm start; verl
# keys override the translated config.
quiet "$RLFORGE" sft --config examples/sft_arith3_warm_start.yaml trainer.default_local_dir="$SCRATCH/sft" \
  trainer.total_training_steps=1 trainer.test_freq=1 trainer.save_freq=1 data.val_size=16 trainer.num_threads=2 \
  "model.config={architectures: [Qwen3ForCausalLM], hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1,
   num_attention_heads: 2, num_key_value_heads: 1, head_dim: 16, tie_word_embeddings: false}"
# actor_train asks for selective recompute in its strategy_config (Megatron's keys, as ROLL passes them): the
# actor's engine prints the activation plan it runs, which must say so.
sed 's|^      use_distributed_optimizer: false$|      use_distributed_optimizer: false\n      recompute_granularity: selective\n      recompute_modules: [core_attn, layernorm]|' \
  "$roll" > "$SCRATCH/roll_recompute.yaml"
[[ $(grep -c "recompute_modules: \[core_attn, layernorm\]" "$SCRATCH/roll_recompute.yaml") == 1 ]] ||
  fail "the example's actor_train strategy_config moved: $(grep -n use_distributed_optimizer "$roll")"
run_dir="$SCRATCH/run"
quiet timeout 300 "$RLFORGE" train --config "$SCRATCH/roll_recompute.yaml" \
  actor_rollout_ref.model.path="$SCRATCH/sft/global_step_1/huggingface" \
  trainer.total_training_steps=3 trainer.test_freq=3 trainer.save_freq=3 trainer.time_budget_s=null \
  actor_rollout_ref.actor.optim.lr_warmup_steps=1 data.val_size=16 trainer.num_threads=2 trainer.default_local_dir="$run_dir"
grep -q "ROLL keys with no effect" "$SCRATCH/last.log" && fail "the example has keys with no effect"
grep -q "activation recompute: selective: core_attn, layernorm; activations of micro-batches" "$SCRATCH/last.log" ||
  fail "actor_train's recompute keys did not reach the actor's activation plan"
grep -A3 "activation recompute: selective" "$SCRATCH/last.log" | grep -q "recomputes attention norm output" ||
  fail "the actor's activation plan does not recompute the norms: $(grep -A3 'activation recompute' "$SCRATCH/last.log")"
[ -f "$run_dir/global_step_3/huggingface/model.safetensors" ] || fail "no checkpoint after 3 steps"
python3 - "$run_dir/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
steps = [r["step"] for r in rows if "actor/pg_loss" in r]
assert steps == [1, 2, 3], f"training steps logged: {steps}"
for r in rows:
    if "actor/pg_loss" in r:
        assert 0.0 <= r["critic/score/mean"] <= 1.0, r["critic/score/mean"]
        assert r["response_length/mean"] <= 8, r["response_length/mean"]  # response_length: 8
        assert r["actor/kl_loss"] >= 0.0, r                                # use_kl_loss
val = [r for r in rows if "val-core/arith/acc/mean@1" in r]
assert [r["step"] for r in val] == [0, 3], f"validations: {[r['step'] for r in val]}"  # eval_steps, at 0 and the end
print("ok: 3 steps of the ROLL example on the arith task, validated at steps 0 and 3, checkpointed")
PY

# --- errors, each one line naming the ROLL key ------------------------------------------------------
# refused <case> <message> <file> [overrides...]: fails before any work with exactly one error line
# `rlforge: [rank 0] config error: <message>...`, and the run folder was not made.
refused() {
  local name=$1 message=$2 file=$3; shift 3
  local dir="$SCRATCH/$name"
  if "$RLFORGE" train --config "$file" trainer.default_local_dir="$dir" "$@" > "$SCRATCH/$name.out" \
       2> "$SCRATCH/$name.err"; then
    fail "$name: accepted"
  fi
  local errors; errors=$(grep "^rlforge: " "$SCRATCH/$name.err" || true)
  [[ $(grep -c . <<<"$errors") == 1 ]] || fail "$name: expected one error line, got: $(cat "$SCRATCH/$name.err")"
  [[ $errors == "rlforge: [rank 0] config error: $message"* ]] || fail "$name: expected '$message', got '$errors'"
  [[ ! -e $dir ]] || fail "$name: the run started"
  echo "ok: $name: $errors"
}
variant() { sed "$2" "$roll" > "$SCRATCH/$1.yaml"; echo "$SCRATCH/$1.yaml"; }

refused unknown_key "actor_train.training_args.lerning_rate: not a ROLL key rlforge reads (docs/config.md lists \
them; ROLL config $SCRATCH/typo.yaml); did you mean 'learning_rate'?" "$(variant typo 's/learning_rate:/lerning_rate:/')"
refused vllm "actor_infer.strategy_args.strategy_name: 'vllm': rlforge runs its own engines" \
  "$(variant vllm 's/strategy_name: rlforge/strategy_name: vllm/')"
refused subset_placement "actor_rollout_ref.ref.device_mapping: rank 1 is outside the world of 1 ranks" \
  "$(variant subset '/^reference:/,/^validation:/ s/list(range(0,1))/[1]/')"
refused gae_without_critic "adv_estimator: 'gae' needs ROLL's critic section" \
  "$(variant gae 's/^adv_estimator: grpo/adv_estimator: gae/')"
refused roll_key_in_block "rlforge.trainer.total_training_steps: trainer.total_training_steps has a ROLL key, \
max_steps: set it there" "$(variant block '/^  trainer:/ a\    total_training_steps: 3')"
# The ranks against the job's world: rlforge's placement check, on the verl keys the ranks became.
refused world "actor_rollout_ref.actor.device_mapping: rank 1" "$(variant world 's/list(range(0,1))/list(range(0,2))/')"
# Overrides after the translation are verl keys.
refused roll_key_override "max_steps: no such key to override" "$roll" max_steps=3
