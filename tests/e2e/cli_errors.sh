#!/usr/bin/env bash
# Bad input through the command line: each case must exit non-zero with a one-line `rlforge:` error
# naming the problem, and must leave what was saved before intact.
source "$(dirname "$0")/common.sh"
# A run folder in the scratch space (the cases that fail late would otherwise write the repo's
# checkpoints/sft_arith/config.yaml); cases that need another folder override it.
base=(sft --config examples/sft_arith.yaml trainer.total_training_steps=2 trainer.test_freq=0 optim.lr_warmup_steps=1
      data.train_batch_size=64 data.val_size=8 trainer.default_local_dir="$SCRATCH/run")

expect_error "trainer.total_trainig_steps" "${base[@]}" trainer.total_trainig_steps=5
expect_error "did you mean" "${base[@]}" trainer.total_trainig_steps=5
expect_error "trainer.total_training_steps: expected an integer" "${base[@]}" trainer.total_training_steps=abc
expect_error "data.train_batch_size: must be positive, got -4" "${base[@]}" data.train_batch_size=-4
expect_error "model.config.num_key_value_heads" "${base[@]}" model.config.num_key_value_heads=3
expect_error "/nonexistent/train.jsonl" "${base[@]}" data.task=null data.task_kwargs=null "data.train_files=[/nonexistent/train.jsonl]" \
  "data.val_files=[/nonexistent/val.jsonl]"
expect_error "trainer.logger[1]: expected one of console, jsonl, got 'wandb'" "${base[@]}" "trainer.logger=[console,wandb]"
expect_error "trainer.resume_mode: resume_path: expected auto or disable" "${base[@]}" trainer.resume_mode=resume_path
expect_error "data.max_length: 100000 tokens exceed the model's max_position_embeddings" "${base[@]}" data.max_length=100000 \
  data.micro_batch_size_per_gpu=1  # 100000 tokens fit the memory estimate; the positions do not
expect_error "no_such_config.yaml" sft --config "$SCRATCH/no_such_config.yaml"
touch "$SCRATCH/a_file"
expect_error "$SCRATCH/a_file/run" "${base[@]}" trainer.default_local_dir="$SCRATCH/a_file/run"

# A good checkpoint, then corrupt copies of it: each is a named error, and the original survives.
"$RLFORGE" "${base[@]}" trainer.save_freq=1 trainer.default_local_dir="$SCRATCH/good" > /dev/null 2>&1 \
  || fail "could not make the reference checkpoint"
model_file="global_step_2/actor/model.safetensors"
[ -f "$SCRATCH/good/$model_file" ] || fail "expected $model_file"
before=$(find "$SCRATCH/good" -type f -name '*.safetensors' -o -type f -name '*.json' | sort | xargs sha256sum)

cp -r "$SCRATCH/good" "$SCRATCH/flipped"
printf '\x55' | dd of="$SCRATCH/flipped/$model_file" bs=1 seek=200 conv=notrunc status=none
expect_error "checksum mismatch" "${base[@]}" trainer.total_training_steps=3 trainer.default_local_dir="$SCRATCH/flipped"
expect_error "model.safetensors" "${base[@]}" trainer.total_training_steps=3 trainer.default_local_dir="$SCRATCH/flipped"

cp -r "$SCRATCH/good" "$SCRATCH/truncated"
truncate -s 100 "$SCRATCH/truncated/$model_file"
expect_error "truncated" "${base[@]}" trainer.total_training_steps=3 trainer.default_local_dir="$SCRATCH/truncated"

cp -r "$SCRATCH/good" "$SCRATCH/bad_pointer"
echo "banana" > "$SCRATCH/bad_pointer/latest_checkpointed_iteration.txt"
expect_error "latest_checkpointed_iteration.txt" "${base[@]}" trainer.default_local_dir="$SCRATCH/bad_pointer"

# Run-folder integrity (issue #21): a checkpoint of another model is refused by shape, naming the model key
# that differs, never loaded as each tensor's top-left box; checkpoints without a tracker are an error that
# says how to go on; a refused resume leaves config.yaml as it was.
cp -r "$SCRATCH/good" "$SCRATCH/smaller"
config_before=$(sha256sum < "$SCRATCH/smaller/config.yaml")
expect_error "the run's model has" "${base[@]}" trainer.total_training_steps=3 model.config.hidden_size=64 \
  model.config.intermediate_size=176 trainer.default_local_dir="$SCRATCH/smaller"
expect_error "hidden_size 128 -> 64" "${base[@]}" trainer.total_training_steps=3 model.config.hidden_size=64 \
  model.config.intermediate_size=176 trainer.default_local_dir="$SCRATCH/smaller"
[ "$(sha256sum < "$SCRATCH/smaller/config.yaml")" == "$config_before" ] || fail "a refused resume rewrote config.yaml"
cp -r "$SCRATCH/good" "$SCRATCH/no_tracker"
rm "$SCRATCH/no_tracker/latest_checkpointed_iteration.txt"
expect_error "missing, but the folder holds global_step_1..2" "${base[@]}" trainer.save_freq=1 \
  trainer.default_local_dir="$SCRATCH/no_tracker"
[ -d "$SCRATCH/no_tracker/global_step_2" ] || fail "the refused run touched the checkpoints"

# One run per folder: a second run on a folder in use is refused, naming the holder.
"$RLFORGE" "${base[@]}" trainer.total_training_steps=100000 trainer.default_local_dir="$SCRATCH/busy" > /dev/null 2>&1 &
holder=$!
for _ in $(seq 1 300); do [ -f "$SCRATCH/busy/.rlforge.lock" ] && break; sleep 0.1; done
sleep 0.5
expect_error "another rlforge run (pid $holder on" "${base[@]}" trainer.default_local_dir="$SCRATCH/busy"
kill -9 "$holder"; wait "$holder" 2>/dev/null || true

after=$(find "$SCRATCH/good" -type f -name '*.safetensors' -o -type f -name '*.json' | sort | xargs sha256sum)
[ "$before" == "$after" ] || fail "the good checkpoint changed"
"$RLFORGE" "${base[@]}" trainer.total_training_steps=3 trainer.default_local_dir="$SCRATCH/good" > "$SCRATCH/resume.log" 2>&1 \
  || { tail "$SCRATCH/resume.log"; fail "the good checkpoint no longer resumes"; }
grep -q "resumed from" "$SCRATCH/resume.log" || fail "did not resume from the good checkpoint"
echo "PASS: every bad input was a named one-line error; saved checkpoints intact"
