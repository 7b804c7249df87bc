#!/usr/bin/env bash
# Issue #10, the reward-model role (reward_model.*): a one-label *ForSequenceClassification folder
# scores each training response at its last token and that score replaces the rule reward (verl's naive
# reward manager), while validation still scores with the rule scorer.
#   1. Same tokenizer (reward_model.model.input_tokenizer null): GRPO from the arith warm start against a
#      random reward model (init-model --head score, the warm start's tokenizer) raises the reward model's
#      score, which is no rule score (not a multiple of 1/responses), and the rule accuracy of validation
#      drops (the policy now chases the reward model).
#   2. Placement: the reward model alone on rank 1 of `--nproc 2`, on both ranks each scoring half of the
#      responses, or split over both at PP 2, gives exactly the one-process run.
#   3. verl's chat-template switch (input_tokenizer = the policy's): a reward model with Qwen3's tokenizer
#      reads each prompt and response re-rendered with Qwen3's chat template.
#   4. Bad reward-model configs are refused before any work.
source "$(dirname "$0")/common.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
readonly steps=30
"$RLFORGE" sft --config examples/sft_arith3_warm_start.yaml trainer.default_local_dir="$SCRATCH/sft" \
  > "$SCRATCH/sft.log" 2>&1 || { tail -20 "$SCRATCH/sft.log"; fail "warm start sft failed"; }
warm=$SCRATCH/sft/global_step_$(cat "$SCRATCH/sft/latest_checkpointed_iteration.txt")/huggingface
quiet "$RLFORGE" init-model --arch qwen3 --out "$SCRATCH/rm" --seed 7 --hidden 32 --layers 1 --heads 2 --kv-heads 1 \
  --ffn 64 --head score --tokenizer "$warm"

small=(actor_rollout_ref.model.path="$warm" reward_model.enable=true reward_model.model.path="$SCRATCH/rm"
       data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.rollout.n=4
       data.val_size=200 trainer.val_before_train=true trainer.save_freq=-1 trainer.time_budget_s=null
       actor_rollout_ref.actor.optim.lr_warmup_steps=0)

# 1. The reward model drives the run. At the main job's lr (3e-4) a random reward model's score moves by
#    ~0.005 in 30 steps, the size of one outlier response in a batch of 64: whether it rose depended on the
#    warm start's bits (CI's AVX2 pass fell 0.1789 -> 0.1752). At 1e-3 it rises by ~0.02 from either warm start.
"$RLFORGE" train --config examples/grpo_arith.yaml "${small[@]}" trainer.total_training_steps=$steps \
  actor_rollout_ref.actor.optim.lr=1e-3 trainer.test_freq=$steps trainer.default_local_dir="$SCRATCH/rm_run" > "$SCRATCH/rm_run.log" 2>&1 ||
  { tail -20 "$SCRATCH/rm_run.log"; fail "rlforge train with a reward model failed"; }
python3 - "$SCRATCH/rm_run/metrics.jsonl" "$steps" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
steps = [r for r in rows if r["step"] > 0]
assert len(steps) == int(sys.argv[2]), f"{len(steps)} step rows"
score = [r["critic/score/mean"] for r in steps]
# A rule score is 0 or 1 per response: its batch mean is a multiple of 1/64. The reward model's is not.
assert all(abs(s * 64 - round(s * 64)) > 1e-6 for s in score[:5]), f"scores look like rule scores: {score[:5]}"
assert all("reward/num_failed" not in r for r in steps), "reward/num_failed without a reward function"
window = 5
start, end = sum(score[:window]) / window, sum(score[-window:]) / window
val = [r["val-core/arith/acc/mean@1"] for r in rows if "val-core/arith/acc/mean@1" in r]
print("score moving average:", " ".join(f"{sum(score[i - window:i]) / window:.4f}" for i in range(window, len(score) + 1, 5)))
print(f"validation (rule) accuracy: {val}")
# Measured: 0.1780 -> 0.1992 from the native warm start, 0.1790 -> 0.1961 from the AVX2 one
# (docs/rl_trainer.md, "Reward model").
assert end > start + 0.01, f"the reward model's score {start:.4f} -> {end:.4f}: did not rise"
assert len(val) == 2 and val[1] < val[0], f"validation must score by the rule, before and after: {val}"
print(f"PASS: reward-model score {start:.4f} -> {end:.4f}; rule validation {val[0]:.3f} -> {val[1]:.3f}")
PY

# 2. The reward model on its own rank.
short=("${small[@]}" trainer.total_training_steps=3 trainer.test_freq=3)
quiet "$RLFORGE" train --config examples/grpo_arith.yaml "${short[@]}" trainer.default_local_dir="$SCRATCH/one"
quiet "$RLFORGE" --nproc 2 train --config examples/grpo_arith.yaml "${short[@]}" \
  actor_rollout_ref.actor.device_mapping=[0] actor_rollout_ref.rollout.device_mapping=[0] \
  reward_model.device_mapping=[1] trainer.default_local_dir="$SCRATCH/two"
python3 tests/e2e/same_run.py "$SCRATCH/one/metrics.jsonl" "$SCRATCH/two/metrics.jsonl" 3 "the reward model on rank 1"
# ... and on both ranks, each scoring half of the responses (DP 2).
quiet "$RLFORGE" --nproc 2 train --config examples/grpo_arith.yaml "${short[@]}" trainer.default_local_dir="$SCRATCH/dp2"
python3 tests/e2e/same_run.py "$SCRATCH/one/metrics.jsonl" "$SCRATCH/dp2/metrics.jsonl" 3 "the reward model at DP 2"
# ... and split over both ranks at PP 2 (issue #22): its one layer on stage 0, a noop layer and the score head on
# stage 1, both keys in verl's override_transformer_config spelling.
quiet "$RLFORGE" --nproc 2 train --config examples/grpo_arith.yaml "${short[@]}" \
  +reward_model.megatron.override_transformer_config.noop_layers=[1] \
  reward_model.megatron.pipeline_model_parallel_size=2 trainer.default_local_dir="$SCRATCH/pp2"
grep -q "pp 1: \[noop 1, L\]" "$SCRATCH/last.log" || fail "the reward model's PP 2 split was not logged"
python3 tests/e2e/same_run.py "$SCRATCH/one/metrics.jsonl" "$SCRATCH/pp2/metrics.jsonl" 3 "the reward model at PP 2"

# 3. verl's chat-template switch to a reward model with its own tokenizer and template.
qwen3_tok="$REPO/tests/data/tokenizer_parity/qwen3"
quiet "$RLFORGE" init-model --arch qwen3 --out "$SCRATCH/rm_qwen3" --seed 8 --hidden 32 --layers 1 --heads 2 \
  --kv-heads 1 --ffn 64 --head score --tokenizer "$qwen3_tok"
"$RLFORGE" train --config examples/grpo_arith.yaml "${short[@]}" reward_model.model.path="$SCRATCH/rm_qwen3" \
  reward_model.model.input_tokenizer="$warm" trainer.default_local_dir="$SCRATCH/switch" > "$SCRATCH/switch.log" 2>&1 ||
  { tail -20 "$SCRATCH/switch.log"; fail "rlforge train with a switched chat template failed"; }
python3 - "$SCRATCH/switch.log" "$SCRATCH/switch/metrics.jsonl" <<'PY'
import json, re, sys
line = next(l for l in open(sys.argv[1]) if "switched chat template:" in l)
text = json.loads(line.split("switched chat template: ", 1)[1])
# Qwen3's template: the user turn, then the closing assistant turn with its empty think block.
pattern = r"<\|im_start\|>user\n(\d{3}\+\d{3}=)<\|im_end\|>\n<\|im_start\|>assistant\n<think>\n\n</think>\n\n(\d*)<\|im_end\|>\n"
match = re.fullmatch(pattern, text)
assert match, f"not a Qwen3 rendering of an arith prompt and answer: {text!r}"
rows = [json.loads(l) for l in open(sys.argv[2])]
assert all("critic/score/mean" in r for r in rows if r["step"] > 0)
print(f"PASS: the reward model read {text!r}")
PY

# 4. Refused up front.
base=(train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$warm" --check-config)
expect_error "reward_model.model.path" "${base[@]}" reward_model.enable=true
# A prompt and response longer than the policy's positions (every pass would score past them).
expect_error "data.max_response_length: a prompt of" train --config examples/grpo_arith.yaml \
  actor_rollout_ref.model.path="$warm" data.max_response_length=100000 trainer.default_local_dir="$SCRATCH/too_long"
expect_error "reward_model.model.path" train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$warm" \
  reward_model.enable=true reward_model.model.path="$warm" trainer.total_training_steps=1
expect_error "reward_model.model.input_tokenizer" train --config examples/grpo_arith.yaml \
  actor_rollout_ref.model.path="$warm" reward_model.enable=true reward_model.model.path="$SCRATCH/rm_qwen3" \
  trainer.total_training_steps=1
expect_error "reward_model.model.input_tokenizer" train --config examples/grpo_arith.yaml \
  actor_rollout_ref.model.path="$warm" reward_model.enable=true reward_model.model.path="$SCRATCH/rm_qwen3" \
  reward_model.model.input_tokenizer="$qwen3_tok" trainer.total_training_steps=1
expect_error "reward_model.device_mapping" "${base[@]}" reward_model.enable=true reward_model.model.path="$SCRATCH/rm" \
  reward_model.device_mapping=[3]
expect_error "reward_model.strategy" "${base[@]}" reward_model.enable=true reward_model.model.path="$SCRATCH/rm" \
  reward_model.strategy=fsdp
echo "PASS: grpo_reward_model"
