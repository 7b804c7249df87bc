// SftTrainer: supervised fine-tuning / pretraining on a built-in task or JSONL data, through the
// TrainEngine. One step: train_batch_size examples from the data stream, cut into micro-batches of
// micro_batch_size_per_gpu examples packed into one row each (no padding), token-mean loss over the
// response tokens of the whole step, one optimizer step. Every test_freq steps a greedy-decoding
// evaluation on the held-out split (`val-core/<task>/acc/mean@1`); every save_freq steps a
// checkpoint that resumes bit-identically (weights, optimizer, schedule, data position) and carries
// the model as a Hugging Face folder (huggingface/: model.path's folder whole with the trained
// weights, engine/hf_checkpoint.h). Which tokenizer, bos and eos: run_tokenizer.h.
// The run folder (trainer.default_local_dir) holds config.yaml, metrics.jsonl and global_step_<k>/.
#pragma once

#include <memory>
#include <string>

#include "trainer/sft_config.h"
#include "dist/process_group.h"

namespace rf::trainer {

struct SftSummary {
  int64_t steps_run = 0;
  int64_t final_step = 0;
  double final_loss = 0;
  double val_accuracy = -1;  // of the last evaluation
  double train_seconds = 0;
  double tokens_per_second = 0;
};

// `resolved_yaml` is the config after overrides, written into the run folder. Collective over
// `world` (a group of one for a single process): the ranks form the layout of config.megatron.
SftSummary run_sft(const SftConfig& config, const std::string& resolved_yaml, dist::ProcessGroup& world);

}  // namespace rf::trainer
