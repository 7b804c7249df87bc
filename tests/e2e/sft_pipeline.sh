#!/usr/bin/env bash
# `rlforge sft` with pipeline parallel trains like one process (issue #22): 20 steps of the main job's config on a
# 4-layer model at PP 2, PP 2 x VPP 2 (interleaved 1F1B), PP 2 with noop layers padding 3 layers, and on four
# ranks PP 4, TP 2 x PP 2 + SP and PP 2 x DP 2 + distributed optimizer: per-step losses within 1e-5 relative of
# one process, the same token counts and held-out accuracy (greedy decoding on a copy gathered from the stages,
# the stages taking turns at the prompts). Checkpoints cross PP layouts (acceptance 3): a run at PP 2 x TP 2
# resumed from its step-10 checkpoint at one process and at PP 4, both match the
# uninterrupted one-process run; the PP 2 x TP 2 checkpoint converts to an HF folder whose weights are bit for bit
# those the run exported itself. `--dump-schedule M` prints the split and the table without any ranks.
source "$(dirname "$0")/common.sh"

base=(--config examples/sft_arith.yaml model.config.num_hidden_layers=4 trainer.total_training_steps=20
      trainer.test_freq=10 trainer.save_freq=0 trainer.resume_mode=disable optim.lr_warmup_steps=5
      trainer.logger='[jsonl]')
OMP_NUM_THREADS=2 quiet "$RLFORGE" sft "${base[@]}" trainer.default_local_dir="$SCRATCH/one" trainer.save_freq=10
compare() {
  local name=$1 ranks=$2; shift 2
  quiet "$RLFORGE" sft --nproc "$ranks" "${base[@]}" trainer.default_local_dir="$SCRATCH/$name" "$@"
  expect_sft_like one "$name"
}
back_to_step_10() {
  rm -rf "$1/global_step_20"
  echo 10 > "$1/latest_checkpointed_iteration.txt"
}
compare pp2 2 megatron.pipeline_model_parallel_size=2
grep -q "pp 1: \[2-3, L\]" "$SCRATCH/last.log" || fail "no pipeline split logged"
compare pp2_vpp2 2 megatron.pipeline_model_parallel_size=2 megatron.virtual_pipeline_model_parallel_size=2
# 3 real layers + a noop one divide over 2 stages; against a 3-layer one-process run.
OMP_NUM_THREADS=2 quiet "$RLFORGE" sft "${base[@]}" model.config.num_hidden_layers=3 \
  trainer.default_local_dir="$SCRATCH/one_3_layers"
quiet "$RLFORGE" sft --nproc 2 "${base[@]}" model.config.num_hidden_layers=3 megatron.pipeline_model_parallel_size=2 \
  'megatron.noop_layers=[3]' trainer.default_local_dir="$SCRATCH/pp2_noop"
expect_sft_like one_3_layers pp2_noop
compare pp4 4 megatron.pipeline_model_parallel_size=4
compare tp2_pp2_sp 4 megatron.pipeline_model_parallel_size=2 megatron.tensor_model_parallel_size=2 \
  megatron.sequence_parallel=true
compare pp2_dp2_distopt 4 megatron.pipeline_model_parallel_size=2 megatron.use_distributed_optimizer=true

# Checkpoints across PP layouts.
quiet "$RLFORGE" sft --nproc 4 "${base[@]}" trainer.default_local_dir="$SCRATCH/to_one" trainer.save_freq=10 \
  megatron.pipeline_model_parallel_size=2 megatron.tensor_model_parallel_size=2
quiet "$RLFORGE" convert --from "$SCRATCH/to_one/global_step_20" --to "$SCRATCH/to_one_hf"
same_weights "$SCRATCH/to_one_hf/model.safetensors" "$SCRATCH/to_one/global_step_20/huggingface/model.safetensors"
back_to_step_10 "$SCRATCH/to_one"
cp -r "$SCRATCH/to_one" "$SCRATCH/to_pp4"  # step 10 as PP 2 x TP 2 saved it
OMP_NUM_THREADS=2 quiet "$RLFORGE" sft "${base[@]}" trainer.default_local_dir="$SCRATCH/to_one" trainer.resume_mode=auto
grep -q "resumed from .*global_step_10" "$SCRATCH/last.log" || fail "the one-process run did not resume"
expect_sft_like one to_one
quiet "$RLFORGE" sft --nproc 4 "${base[@]}" trainer.default_local_dir="$SCRATCH/to_pp4" trainer.resume_mode=auto \
  megatron.pipeline_model_parallel_size=4
grep -q "resumed from .*global_step_10" "$SCRATCH/last.log" || fail "the PP 4 run did not resume"
expect_sft_like one to_pp4
quiet "$RLFORGE" sft "${base[@]}" megatron.pipeline_model_parallel_size=2 megatron.virtual_pipeline_model_parallel_size=2 \
  --dump-schedule 4
grep -qF "  pp 1: [1] [3, L]" "$SCRATCH/last.log" || fail "--dump-schedule printed no split"
grep -qF "   8 | B1.1 >a3.0+>g1.1+<a2.1+<g0.0 | B0.0 >a2.0+>g0.0+<a3.0+<g1.0" "$SCRATCH/last.log" \
  || fail "--dump-schedule: not the interleaved table"
echo "ok: --dump-schedule"
