#!/usr/bin/env bash
# `rlforge sft --nproc N` trains like one process: 20 steps of the main job's config at TP2, TP2+SP and
# (4 ranks) TP2 x DP2 + SP + distributed optimizer, per-step losses equal to 1e-5 relative, the same
# token counts and held-out accuracy. Checkpoints cross layouts (issue #6, acceptance 3): a run at
# TP2 x DP2 (+SP, distributed optimizer) resumed from its step-10 checkpoint at one process, and a
# one-process run resumed at TP2 x DP2, both match the uninterrupted one-process run; the four-rank
# checkpoint converts to an HF folder whose weights are bit for bit those the run exported itself.
# Context parallel (issue #24): CP 2 with the ring (p2p), and on four ranks TP 2 x CP 2 +SP and CP 2 x DP 2 with
# Ulysses (a2a) and the distributed optimizer, each example split over the CP ranks, train like one process too.
source "$(dirname "$0")/common.sh"

base=(--config examples/sft_arith.yaml trainer.total_training_steps=20 trainer.test_freq=10 trainer.save_freq=0
      trainer.resume_mode=disable optim.lr_warmup_steps=5 trainer.logger='[jsonl]')
OMP_NUM_THREADS=2 quiet "$RLFORGE" sft "${base[@]}" trainer.default_local_dir="$SCRATCH/one" trainer.save_freq=10
tp2_sp_dp2_distopt=(megatron.tensor_model_parallel_size=2 megatron.sequence_parallel=true
                    megatron.use_distributed_optimizer=true)
# name ranks megatron overrides...: a run from scratch.
compare() {
  local name=$1 ranks=$2; shift 2
  quiet "$RLFORGE" sft --nproc "$ranks" "${base[@]}" trainer.default_local_dir="$SCRATCH/$name" "$@"
  expect_sft_like one "$name"
}
# folder: as if the run had been killed after its step-10 checkpoint.
back_to_step_10() {
  rm -rf "$1/global_step_20"
  echo 10 > "$1/latest_checkpointed_iteration.txt"
}
compare tp2 2 megatron.tensor_model_parallel_size=2
compare tp2_sp 2 megatron.tensor_model_parallel_size=2 megatron.sequence_parallel=true
# Issue #6's acceptance 2: TP2 x DP2 with SP and the distributed optimizer on four ranks.
compare tp2_sp_dp2_distopt 4 "${tp2_sp_dp2_distopt[@]}"
compare cp2 2 megatron.context_parallel_size=2
compare tp2_cp2_sp 4 megatron.tensor_model_parallel_size=2 megatron.context_parallel_size=2 megatron.sequence_parallel=true
compare cp2_a2a_dp2_distopt 4 megatron.context_parallel_size=2 megatron.cp_comm_type=a2a \
  megatron.use_distributed_optimizer=true

# Issue #6's acceptance 3: checkpoints across layouts.
quiet "$RLFORGE" sft --nproc 4 "${base[@]}" trainer.default_local_dir="$SCRATCH/to_one" trainer.save_freq=10 \
  "${tp2_sp_dp2_distopt[@]}"
quiet "$RLFORGE" convert --from "$SCRATCH/to_one/global_step_20" --to "$SCRATCH/to_one_hf"
same_weights "$SCRATCH/to_one_hf/model.safetensors" "$SCRATCH/to_one/global_step_20/huggingface/model.safetensors"
back_to_step_10 "$SCRATCH/to_one"
OMP_NUM_THREADS=2 quiet "$RLFORGE" sft "${base[@]}" trainer.default_local_dir="$SCRATCH/to_one" trainer.resume_mode=auto
grep -q "resumed from .*global_step_10" "$SCRATCH/last.log" || fail "the one-process run did not resume"
expect_sft_like one to_one
cp -r "$SCRATCH/one" "$SCRATCH/to_four"
back_to_step_10 "$SCRATCH/to_four"
quiet "$RLFORGE" sft --nproc 4 "${base[@]}" trainer.default_local_dir="$SCRATCH/to_four" trainer.resume_mode=auto \
  "${tp2_sp_dp2_distopt[@]}"
expect_sft_like one to_four
