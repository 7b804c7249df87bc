#!/usr/bin/env bash
# Issue #10, acceptance 3: GRPO on JSONL data in verl's columns with a real tokenizer and its chat
# template. A tiny Qwen3 from `init-model` with Qwen3's real tokenizer (vendored for the parity tests),
# 16 gsm8k-style rows whose prompts are chat messages (data_source openai/gsm8k), two GRPO steps saved
# at the end; then the step's huggingface/ export: `rlforge logprobs` loads it and scores a sequence
# exactly as it scores the folder `rlforge convert` assembles from the checkpointed actor, and not as
# the initial model. Also checked: the prompt lengths the trainer logs are those of Qwen3's template
# text (written out here, encoded by `rlforge tokenize`), the data errors refused at startup, and verl's
# generation dumps (trainer.rollout_data_dir, validation_data_dir) and log_val_generations.
source "$(dirname "$0")/common.sh"
qwen3_tok="$REPO/tests/data/tokenizer_parity/qwen3"

quiet "$RLFORGE" init-model --arch qwen3 --out "$SCRATCH/model" --seed 5 --hidden 64 --layers 2 --heads 4 \
  --kv-heads 2 --ffn 128 --tie 1 --tokenizer "$qwen3_tok"

# train.jsonl (16 rows), test.jsonl (4 rows), and templates.jsonl: each train prompt as the text of
# Qwen3's template with add_generation_prompt, one JSON string a line, for `rlforge tokenize --file`.
python3 - "$SCRATCH" <<'PY'
import json, sys
scratch = sys.argv[1]
suffix = ' Let\'s think step by step and output the final answer after "####".'
def rows(split, count, offset):
    for i in range(count):
        a, b = 10 + 3 * i + offset, 20 + 5 * i  # two digits each: every prompt has the same length
        question = f"Tom has {a} apples and buys {b} more. How many apples does he have now?" + suffix
        yield {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": question}], "ability": "math",
               "reward_model": {"style": "rule", "ground_truth": str(a + b)}, "extra_info": {"split": split, "index": i}}
with open(f"{scratch}/train.jsonl", "w") as train, open(f"{scratch}/templates.jsonl", "w") as templates:
    for row in rows("train", 16, 0):
        train.write(json.dumps(row) + "\n")
        text = "<|im_start|>user\n" + row["prompt"][0]["content"] + "<|im_end|>\n<|im_start|>assistant\n"
        templates.write(json.dumps(text) + "\n")
with open(f"{scratch}/test.jsonl", "w") as test:
    for row in rows("test", 4, 50):
        test.write(json.dumps(row) + "\n")
PY
"$RLFORGE" tokenize --tokenizer "$qwen3_tok" --file "$SCRATCH/templates.jsonl" > "$SCRATCH/template_ids.jsonl" \
  || fail "tokenize --file"
prompt_length=$(python3 -c "
import json, sys
lengths = {len(json.loads(line)) for line in open(sys.argv[1])}
assert len(lengths) == 1, f'the test rows were meant to have one prompt length, got {lengths}'
print(lengths.pop())" "$SCRATCH/template_ids.jsonl") || fail "prompt lengths"

cat > "$SCRATCH/grpo.yaml" <<EOF
actor_rollout_ref:
  model: {path: $SCRATCH/model}
  actor:
    ppo_mini_batch_size: 2
    entropy_coeff: 0.01  # a random model scores 0 everywhere, so GRPO's advantages are 0: the bonus moves it
    optim: {lr: 1.0e-2}
    megatron: {dtype: float32, sequence_parallel: false, use_distributed_optimizer: false}
  rollout: {n: 2, dtype: float32, kv_cache_bytes: 8388608}
data:
  train_files: $SCRATCH/train.jsonl
  val_files: [$SCRATCH/test.jsonl]
  max_prompt_length: 64
  max_response_length: 8
  train_batch_size: 4
algorithm: {adv_estimator: grpo}
trainer:
  total_training_steps: 2
  test_freq: 2
  save_freq: 2
  deterministic: true
  num_threads: 2
EOF
train=(train --config "$SCRATCH/grpo.yaml")

# Refused at startup, before the model loads: a data_source without a rule scorer (named with its
# row), a built-in task beside train_files, an overlong prompt under truncation: error, and a file
# whose every row filter_overlong_prompts drops.
sed 's|"openai/gsm8k"|"gsm8k"|' "$SCRATCH/test.jsonl" > "$SCRATCH/unknown_source.jsonl"
expect_error "data_source: unknown name 'gsm8k'" "${train[@]}" trainer.default_local_dir="$SCRATCH/refused" \
  "data.val_files=[$SCRATCH/unknown_source.jsonl]"
grep -qF "(in $SCRATCH/unknown_source.jsonl: line 1)" "$SCRATCH/stderr" || fail "the error does not name the row"
expect_error "data.task: a built-in task and data.train_files exclude each other" "${train[@]}" \
  trainer.default_local_dir="$SCRATCH/refused" data.task=arith
expect_error "data.max_prompt_length: $SCRATCH/train.jsonl: line 1: the prompt has $prompt_length tokens, more than 16" \
  "${train[@]}" trainer.default_local_dir="$SCRATCH/refused" data.max_prompt_length=16
expect_error "every row of data.train_files is longer than data.max_prompt_length = 16" "${train[@]}" \
  trainer.default_local_dir="$SCRATCH/refused" data.max_prompt_length=16 data.filter_overlong_prompts=true

"$RLFORGE" "${train[@]}" trainer.default_local_dir="$SCRATCH/run" trainer.rollout_data_dir="$SCRATCH/rollouts" \
  trainer.validation_data_dir="$SCRATCH/val_generations" trainer.log_val_generations=2 > "$SCRATCH/train.log" 2>&1 \
  || { tail -20 "$SCRATCH/train.log"; fail "GRPO on the JSONL rows failed"; }
grep -q "data.train_files $SCRATCH/train.jsonl: 16 prompts" "$SCRATCH/train.log" || fail "no data log line"
python3 - "$SCRATCH/run/metrics.jsonl" "$prompt_length" <<'PY' || fail "metrics"
import json, math, sys
rows = {r["step"]: r for r in map(json.loads, open(sys.argv[1]))}
assert sorted(rows) == [0, 1, 2], sorted(rows)
# verl's gsm8k scorer returns a bare score (no acc), so the reward is the core variable.
for step in (0, 2):
    reward = rows[step]["val-core/openai/gsm8k/reward/mean@1"]
    assert 0 <= reward <= 1 and not any("acc" in k for k in rows[step]), rows[step]
for step in (1, 2):
    r = rows[step]
    # Every prompt is the template text's length: no padding, no bos, nothing cut.
    assert r["prompt_length/mean"] == r["prompt_length/max"] == int(sys.argv[2]), (r["prompt_length/mean"], sys.argv[2])
    assert 1 <= r["response_length/max"] <= 8, r["response_length/max"]
    assert all(math.isfinite(r[k]) for k in ("critic/score/mean", "actor/pg_loss", "actor/grad_norm")), r
    assert r["actor/grad_norm"] > 0, r
core = "val-core/openai/gsm8k/reward/mean@1"
print(f"ok metrics: val reward {rows[0][core]} -> {rows[2][core]}, prompt length {sys.argv[2]}")
PY

# verl's generation dumps: each step's 4 prompts x 2 responses and each validation's 4, with the row's
# ground truth, the prompt's text (Qwen3's template without its special tokens) and the score the metrics
# average; the first two validation samples in the log.
python3 - "$SCRATCH" <<'PY' || fail "generation dumps"
import json, sys
scratch = sys.argv[1]
metrics = {r["step"]: r for r in map(json.loads, open(f"{scratch}/run/metrics.jsonl"))}
rows = {json.loads(l)["prompt"][0]["content"]: json.loads(l) for f in ("train", "test") for l in open(f"{scratch}/{f}.jsonl")}
def check(path, count, step, mean_key):
    lines = [json.loads(l) for l in open(path)]
    assert len(lines) == count, f"{path}: {len(lines)} lines"
    for g in lines:
        assert set(g) == {"input", "output", "gts", "score", "step"}, sorted(g)
        assert g["step"] == step and g["input"].startswith("user\n") and g["input"].endswith("\nassistant\n"), g
        row = rows[g["input"][len("user\n"):-len("\nassistant\n")]]
        assert g["gts"] == row["reward_model"]["ground_truth"], (g["gts"], row)
    mean = sum(g["score"] for g in lines) / count
    assert abs(mean - metrics[step][mean_key]) < 1e-12, (path, mean, metrics[step][mean_key])
for step in (1, 2):
    check(f"{scratch}/rollouts/{step}.jsonl", 8, step, "critic/score/mean")
for step in (0, 2):
    check(f"{scratch}/val_generations/{step}.jsonl", 4, step, "val-core/openai/gsm8k/reward/mean@1")
print("ok generation dumps: rollouts/{1,2}.jsonl (8 each), val_generations/{0,2}.jsonl (4 each)")
PY
for step in 0 2; do
  [ "$(grep -c "val generation [01] at step $step: input \"user" "$SCRATCH/train.log")" == 2 ] &&
    ! grep -q "val generation 2 at step $step" "$SCRATCH/train.log" || fail "log_val_generations 2 at step $step"
done

# The export, the checkpointed actor converted, and the initial model score the first train prompt
# followed by an answer.
export="$SCRATCH/run/global_step_2/huggingface"
[ -f "$export/tokenizer.json" ] && cmp -s "$export/tokenizer.json" "$qwen3_tok/tokenizer.json" \
  || fail "the export does not carry Qwen3's tokenizer"
quiet "$RLFORGE" convert --from "$SCRATCH/run/global_step_2" --to "$SCRATCH/converted"
answer=$("$RLFORGE" tokenize --tokenizer "$qwen3_tok" --text " 10 + 20 = 30. #### 30<|im_end|>")
python3 -c "
import json, sys
prompt = json.loads(open(sys.argv[1]).readline())
json.dump({'sequences': [prompt + json.loads(sys.argv[2])]}, open(sys.argv[3], 'w'))" \
  "$SCRATCH/template_ids.jsonl" "$answer" "$SCRATCH/sequence.json"
for name in export converted initial; do
  folder=$export
  [ $name == converted ] && folder="$SCRATCH/converted"
  [ $name == initial ] && folder="$SCRATCH/model"
  quiet "$RLFORGE" logprobs --model "$folder" --input "$SCRATCH/sequence.json" --out "$SCRATCH/lp_$name.json" \
    --threads 2
done
python3 - "$SCRATCH" <<'PY' || fail "log-probs of the export"
import json, math, sys
lp = {n: json.load(open(f"{sys.argv[1]}/lp_{n}.json"))["logprobs"][0] for n in ("export", "converted", "initial")}
assert all(math.isfinite(x) for x in lp["export"]), lp["export"]
assert lp["export"] == lp["converted"], "the export is not the checkpointed actor"
moved = max(abs(a - b) for a, b in zip(lp["export"], lp["initial"]))
assert moved > 1e-4, f"the exported weights score like the initial model (max |diff| {moved})"
print(f"ok logprobs: export == checkpointed actor over {len(lp['export'])} tokens; max |diff| to the initial model {moved:.3g}")
PY
echo "PASS: 2 GRPO steps on chat-template JSONL prompts with Qwen3's tokenizer; the HF export reloads as the trained actor"
