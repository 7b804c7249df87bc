#!/usr/bin/env bash
# Resources the machine cannot give (issue #21), each a warning or a named one-line error, never a crash or
# memory growing without end:
#   threads   trainer.num_threads / --threads above the cores are capped there with a warning naming the key,
#             the count asked and the count used (100000 crashed libgomp); the run completes;
#   model     a config.json whose dimensions its weights' headers contradict (num_hidden_layers: 1e9 over 2
#             layers, hidden_size: 1e7) is refused naming the key and both files by every command that reads
#             the folder; a new model (SFT's model.config, init-model) too large for this machine is refused
#             by its memory estimate, naming the key, the estimate and the budget.
# Every refusal runs under a 4 GB address-space limit: growing memory first would end in bad_alloc instead.
# (`--nproc` above the cores warns up front: tests/dist/nproc_launch.sh.)
source "$(dirname "$0")/common.sh"

limited_error() { (ulimit -v 4000000; expect_error "$@"); }

cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
quiet "$RLFORGE" sft --config examples/sft_arith.yaml trainer.num_threads=100000 trainer.total_training_steps=2 \
  trainer.test_freq=0 trainer.save_freq=0 optim.lr_warmup_steps=0 data.val_size=8 trainer.logger='[jsonl]' \
  trainer.default_local_dir="$SCRATCH/threads"
grep -q "warning: trainer.num_threads: 100000 threads asked, $cores used" "$SCRATCH/last.log" ||
  { cat "$SCRATCH/last.log" >&2; fail "no warning capping trainer.num_threads"; }
grep -q "OpenMP pool: $cores thread" "$SCRATCH/last.log" || fail "the pool does not run $cores threads"
echo "ok: trainer.num_threads=100000 ran with $cores threads, warned"
OMP_NUM_THREADS=100000 "$RLFORGE" info > "$SCRATCH/info.log" 2>&1 || fail "info with OMP_NUM_THREADS=100000"
grep -q "warning: OMP_NUM_THREADS: 100000 threads asked, $cores used" "$SCRATCH/info.log" || fail "OMP_NUM_THREADS not capped"
echo "ok: OMP_NUM_THREADS=100000 capped to $cores"

# A folder whose config.json claims 4096 layers (the most config.json may say; 1e9 is refused as out of range
# when read) over weights of 2, then a hidden size of 1e7.
# The main job's warm-start model (2 layers, hidden 128, the 18-token arithmetic vocabulary), a few steps in.
quiet "$RLFORGE" sft --config examples/sft_arith3_warm_start.yaml trainer.total_training_steps=2 \
  trainer.stop_at_val_acc=null trainer.test_freq=0 trainer.save_freq=2 trainer.default_local_dir="$SCRATCH/sft"
warm=$SCRATCH/sft/global_step_2/huggingface
claiming() {  # claiming key value: a copy of the warm start whose config.json says key: value
  rm -rf "$SCRATCH/claim" && cp -r "$warm" "$SCRATCH/claim"
  python3 -c "import json, sys; p = sys.argv[1]; c = json.load(open(p)); v = float(sys.argv[3]); c[sys.argv[2]] = int(v) if v.is_integer() else v; \
json.dump(c, open(p, 'w'))" "$SCRATCH/claim/config.json" "$1" "$2"
}
claiming num_hidden_layers 4096
layers="num_hidden_layers: 4096 in $SCRATCH/claim/config.json, but the weights in $SCRATCH/claim hold 2 (model.layers.0 to model.layers.1)"
limited_error "$layers" train --config examples/grpo_arith.yaml actor_rollout_ref.model.path="$SCRATCH/claim" \
  trainer.default_local_dir="$SCRATCH/rl"
limited_error "$layers" sft --config examples/sft_arith.yaml model.path="$SCRATCH/claim" trainer.default_local_dir="$SCRATCH/sft"
limited_error "$layers" generate --model "$SCRATCH/claim" --prompt "<bos>1+2="
limited_error "$layers" convert --from "$SCRATCH/claim" --to "$SCRATCH/converted"
claiming hidden_size 1e7
echo '{"sequences": [[1, 2, 3]]}' > "$SCRATCH/sequences.json"
limited_error "hidden_size: 10000000 in $SCRATCH/claim/config.json, but $SCRATCH/claim/model.safetensors holds model.embed_tokens.weight of shape [18, 128]" \
  generate --model "$SCRATCH/claim" --prompt "<bos>1+2="
limited_error "hidden_size: 10000000 in $SCRATCH/claim/config.json, but $SCRATCH/claim/model.safetensors holds model.embed_tokens.weight of shape [18, 128]" \
  logprobs --model "$SCRATCH/claim" --input "$SCRATCH/sequences.json" --out "$SCRATCH/logprobs.json"

# New models: past the per-key bounds (4096 layers, sizes up to 2^31-1) nothing bounds their dimensions but
# the machine's memory. 4096 layers of hidden 65536 need over 100 TiB: refused on any machine.
limited_error "model.config.num_hidden_layers: 1000000000 is more than the 4096 rlforge supports" \
  sft --config examples/sft_arith.yaml model.config.num_hidden_layers=1000000000 trainer.default_local_dir="$SCRATCH/new"
limited_error "model.config.num_hidden_layers: 4096 in model.config: the model (qwen3: 4096 layers, hidden 65536" \
  sft --config examples/sft_arith.yaml model.config.hidden_size=65536 model.config.num_attention_heads=512 \
  model.config.num_hidden_layers=4096 trainer.default_local_dir="$SCRATCH/new"
grep -q "to train, more than the .* of physical memory" "$SCRATCH/stderr" || fail "the estimate or the budget is not named"
limited_error "init-model: --layers (num_hidden_layers): 4096 in the new config.json: the model (qwen3: 4096 layers" \
  init-model --arch qwen3 --out "$SCRATCH/init" --seed 1 --layers 4096 --hidden 65536 --heads 512
grep -q "to hold its weights, more than the .* of physical memory" "$SCRATCH/stderr" || fail "init-model: no estimate"
limited_error "--vocab: expected an integer in [0, 2147483647], got '1000000000000'" init-model --arch qwen3 \
  --out "$SCRATCH/init" --seed 1 --vocab 1000000000000
[[ ! -e "$SCRATCH/init/config.json" ]] || fail "a refused init-model wrote a config.json"
