#!/usr/bin/env bash
# Issue #6's acceptance 6: a wrong parallel layout fails `rlforge sft --nproc N` on every rank with one
# message naming the key, before any work (the run folder is never created: the layout is checked
# right after the config is read), and never hangs (each job runs under a timeout). Each case uses the
# fewest ranks that show it; the pipeline's split keys (issue #22 acceptance 5) are refused on one process and
# on two alike. Not here: the order string and expert_tensor_parallel_size, which the
# megatron block does not have as keys (the default order is always used).
source "$(dirname "$0")/common.sh"

# Seconds a refused job may take: an mpirun start, an abort and the peers' grace period.
readonly hang_seconds=60
base=(--config examples/sft_arith.yaml trainer.save_freq=0 trainer.resume_mode=disable)

# refused <case> <ranks> <message> <overrides...>: the job fails in time with exactly one error line,
# `rlforge: [rank 0] config error: <message>`, and leaves no run folder behind.
refused() {
  local name=$1 ranks=$2 message=$3; shift 3
  local run_dir="$SCRATCH/$name" log="$SCRATCH/$name.log" status=0 start=$SECONDS
  timeout -k 5 "$hang_seconds" "$RLFORGE" sft --nproc "$ranks" "${base[@]}" trainer.default_local_dir="$run_dir" \
    "$@" > "$log" 2>&1 || status=$?
  [[ $status != 124 && $status != 137 ]] || fail "$name: the job hung, killed after $hang_seconds s: $(cat "$log")"
  [[ $status != 0 ]] || fail "$name: the wrong layout was accepted: $(cat "$log")"
  local errors; errors=$(grep "^rlforge: " "$log" || true)
  [[ $(grep -c . <<<"$errors") == 1 ]] || fail "$name: expected one error line, got: $(cat "$log")"
  [[ $errors == "rlforge: [rank 0] config error: $message"* ]] || fail "$name: expected '$message', got '$errors'"
  [[ $(grep -cF "$message" "$log") == 1 ]] || fail "$name: the message appears more than once: $(cat "$log")"
  [[ ! -e $run_dir ]] || fail "$name: the run started before the layout was refused ($run_dir exists)"
  echo "ok: $name on $ranks ranks in $((SECONDS - start)) s: $errors"
}

refused world_not_divisible_by_tp 3 \
  "megatron.tensor_model_parallel_size: tensor_model_parallel_size x context_parallel_size x \
pipeline_model_parallel_size = 2 x 1 x 1 = 2 does not divide the world size 3" megatron.tensor_model_parallel_size=2
refused model_parallel_larger_than_world 2 \
  "megatron.tensor_model_parallel_size: tensor_model_parallel_size x context_parallel_size x \
pipeline_model_parallel_size = 4 x 1 x 1 = 4 does not divide the world size 2" megatron.tensor_model_parallel_size=4
refused tp_zero 2 "megatron.tensor_model_parallel_size: must be >= 1, got 0" megatron.tensor_model_parallel_size=0
# The model has 4 heads, 2 kv heads (GQA groups of 2) and FFN 352; head_dim is given, so 3 heads fit.
refused heads_not_divisible 2 \
  "megatron.tensor_model_parallel_size: 2 does not divide num_attention_heads = 3 in model.config" \
  megatron.tensor_model_parallel_size=2 model.config.num_attention_heads=3 model.config.num_key_value_heads=1
refused kv_heads_not_divisible 2 \
  "megatron.tensor_model_parallel_size: 2 does not divide num_key_value_heads = 1 in model.config" \
  megatron.tensor_model_parallel_size=2 model.config.num_key_value_heads=1
# The same rule on a Hugging Face folder's config.json (a tiny one made by init-model: no download).
quiet "$RLFORGE" init-model --arch qwen3 --out "$SCRATCH/mqa" --seed 1 --vocab 512 --hidden 32 --layers 1 --heads 4 \
  --kv-heads 1 --ffn 64 --tie 0
refused kv_heads_not_divisible_in_model_path 2 \
  "megatron.tensor_model_parallel_size: 2 does not divide num_key_value_heads = 1 in $SCRATCH/mqa/config.json" \
  megatron.tensor_model_parallel_size=2 model.path="$SCRATCH/mqa"
refused ffn_not_divisible 2 \
  "megatron.tensor_model_parallel_size: 2 does not divide intermediate_size = 353 in model.config" \
  megatron.tensor_model_parallel_size=2 model.config.intermediate_size=353
refused sp_without_tp 2 \
  "megatron.sequence_parallel: true needs tensor_model_parallel_size > 1 (it splits the sequence over TP)" \
  megatron.sequence_parallel=true
refused vocab_multiple_zero 2 "megatron.make_vocab_size_divisible_by: must be >= 1, got 0" \
  megatron.tensor_model_parallel_size=2 megatron.make_vocab_size_divisible_by=0
# Pipeline splits that do not fit the model (issue #22 acceptance 5): the main job's model has 2 layers. On one
# process (PP 1: a split key set there is checked all the same) and on two.
for ranks in 1 2; do
  refused vpp_without_pp_np$ranks $ranks \
    "megatron.virtual_pipeline_model_parallel_size: 2 needs pipeline_model_parallel_size > 1" \
    megatron.virtual_pipeline_model_parallel_size=2
  refused layout_unparsable_np$ranks $ranks \
    "megatron.pipeline_model_parallel_layout: cannot parse at column 4: '(' is not closed (in \"Et|(tL\")" \
    megatron.pipeline_model_parallel_size=$ranks 'megatron.pipeline_model_parallel_layout=Et|(tL'
done
refused noop_out_of_range_np1 1 "megatron.noop_layers: index 9 out of range [0, 3) (2 layers + 1 noop) in model.config" \
  'megatron.noop_layers=[9]'
refused layout_stages_at_pp1 1 "megatron.pipeline_model_parallel_layout: 2 virtual stages need \
pipeline_model_parallel_size > 1 (they interleave over pipeline ranks) in model.config" \
  'megatron.pipeline_model_parallel_layout=Et|tL'
refused first_stage_at_pp1 1 \
  "megatron.num_layers_in_first_pipeline_stage: 1 needs pipeline_model_parallel_size > 1 in model.config" \
  megatron.num_layers_in_first_pipeline_stage=1
refused pp_layers_not_divisible 2 \
  "megatron.pipeline_model_parallel_size: 2 does not divide the 3 layers (noop_layers can pad them) in model.config" \
  megatron.pipeline_model_parallel_size=2 model.config.num_hidden_layers=3
refused noop_out_of_range_np2 2 \
  "megatron.noop_layers: index 7 out of range [0, 4) (2 layers + 2 noop) in model.config" \
  megatron.pipeline_model_parallel_size=2 'megatron.noop_layers=[1, 7]'
# Interleaving takes at least PP micro-batches per step: 128 examples in micro-batches of 128 are one.
refused interleaved_microbatches 2 "megatron.microbatch_group_size_per_vp_stage: 2 must lie in \
[pipeline_model_parallel_size = 2, num_microbatches = 1]; a step has 1 micro-batches per data-parallel rank \
(data.train_batch_size 128 over 1 data-parallel ranks, data.micro_batch_size_per_gpu 128 each)" \
  megatron.pipeline_model_parallel_size=2 megatron.virtual_pipeline_model_parallel_size=2 \
  model.config.num_hidden_layers=4 data.micro_batch_size_per_gpu=128
# --dump-schedule checks the split the same way (it needs no ranks), and the count it is given.
refused dump_schedule_noop 1 "megatron.noop_layers: index 7 out of range [0, 3) (2 layers + 1 noop) in model.config" \
  megatron.pipeline_model_parallel_size=2 'megatron.noop_layers=[7]' --dump-schedule 4
refused dump_schedule_microbatches 2 "megatron.microbatch_group_size_per_vp_stage: 2 must lie in \
[pipeline_model_parallel_size = 2, num_microbatches = 1]" megatron.pipeline_model_parallel_size=2 \
  megatron.virtual_pipeline_model_parallel_size=2 model.config.num_hidden_layers=4 --dump-schedule 1
# Layouts the engine cannot run with this model, each on a world it would divide.
# Ulysses gives each CP rank a share of the heads: 1 kv head does not split over 2 (issue #24 acceptance 5).
refused context_parallel_a2a 2 "megatron.cp_comm_type: a2a (Ulysses) gives each of the context_parallel_size = 2 \
ranks a share of the heads, but a TP rank's 4 query heads and 1 kv heads" \
  megatron.context_parallel_size=2 megatron.cp_comm_type=a2a model.config.num_key_value_heads=1
# Megatron's hierarchical a2a+p2p is not built: the value is refused with the ones that are.
refused context_parallel_comm 2 "megatron.cp_comm_type: expected one of p2p, all_gather, a2a, got 'a2a+p2p'" \
  megatron.context_parallel_size=2 "megatron.cp_comm_type=a2a+p2p"
# Expert parallel needs experts: the SFT model here is dense.
refused expert_parallel_dense_model 2 "megatron.expert_model_parallel_size: 2: model.config has no MoE layers" \
  megatron.expert_model_parallel_size=2
# DP = 3 ranks / TP 1 cannot split the step's 128 examples.
refused dp_not_dividing_batch 3 "data.train_batch_size: 128 examples do not split over 3 data-parallel ranks"
