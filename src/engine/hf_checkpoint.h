// Hugging Face model folder <-> native checkpoint step (DESIGN §6), behind `rlforge convert`, and
// the Hugging Face part a trainer adds to its checkpoints.
//   folder -> step  <root>/global_step_<k>/: actor/model.safetensors (the weights by HF name, where
//                   TrainEngine keeps its weights) and huggingface/, the folder's record: config.json
//                   (whole), the side files, and the JSON document hf_folder (each weight's stored
//                   dtype, the weight files' __metadata__, the split into files and the index's
//                   metadata), so that converting back gives the original folder bit for bit. No
//                   optimizer state: a model to export, inspect or start from, not a run to resume.
//   trainer step    the same record in huggingface/ plus the weights there in their stored dtypes
//                   (add_hf_export), so that part is itself a Hugging Face folder; a model imported,
//                   trained and exported keeps everything but the changed weights.
//   step -> folder  the weights assembled by CheckpointReader from whatever shards the step holds
//                   (any parallel layout: each tensor's region is read from the shards that overlap it),
//                   from component actor (else huggingface); config.json and the side files from
//                   huggingface/ when the step has them (sft checkpoints and converted ones do), else
//                   the model config TrainEngine recorded in actor/engine_state. Each weight's dtype:
//                   as recorded in hf_folder, else config.json's torch_dtype, else f32; the split into
//                   files: as recorded, under write_hf_folder's rule.
// Not here: choosing what to convert from a command line (apps/rlforge/convert_command.cpp).
#pragma once

#include <optional>
#include <string>

#include "checkpoint/checkpoint_writer.h"
#include "dist/parallel_context.h"
#include "model/hf_folder.h"
#include "model/param_store.h"

namespace rf::engine {

struct CheckpointStep {
  std::string root;  // the folder holding latest_checkpointed_iteration.txt and global_step_<k>/
  int64_t step = 0;
};

// A checkpoint root (its latest step) or one global_step_<k> folder (with manifest.json); IoError
// naming `path` when it is neither.
CheckpointStep locate_checkpoint_step(const std::string& path);

// Writes the folder at `hf_dir` as step `step` of the checkpoint at `root`; `dtype` sets every
// weight's dtype (nullopt: each keeps its stored dtype).
void hf_folder_to_checkpoint(const std::string& hf_dir, const CheckpointStep& target, std::optional<DType> dtype);

// Writes `folder`'s record (config.json, side files, hf_folder) and the weights of `params` (this
// rank's TP shards of its pipeline stage's part of a model of folder.config), each in its stored dtype, as the
// step's `component` (huggingface/: the step's model; an RL step's critic goes to critic_huggingface/).
// Collective over the engine's ranks: the first DP replica gathers each weight over TP and PP
// (whole_weights.h) and rank 0 of `parallel` writes them whole, so the component is a Hugging Face folder at
// any layout. Weights holding a NaN or Inf on any
// rank are refused, naming the tensor, before anything is written (as by hf_folder_to_checkpoint).
void add_hf_export(checkpoint::CheckpointWriter& writer, const model::HfModelFolder& folder,
                   const model::ParamStore& params, const dist::ParallelContext& parallel,
                   const std::string& component = "huggingface");

// Writes the step's model as a Hugging Face folder at `hf_dir`.
void checkpoint_to_hf_folder(const CheckpointStep& source, const std::string& hf_dir,
                             const model::HfExportOptions& options);

}  // namespace rf::engine
