// The `rlforge sft` config: the blocks each layer owns (data, megatron, optim), assembled with the
// model and trainer sections. Keys follow verl's where verl has them (examples/sft_arith.yaml).
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "data/data_config.h"
#include "engine/engine_config.h"
#include "optim/optim_config.h"
#include "trainer/run_keys.h"

namespace rf::trainer {

struct ModelSection {
  std::optional<std::string> path;  // an HF folder to start from; null: build from `config`
  YAML::Node config;                // HF config.json fields; vocab_size defaults to the tokenizer's
  // "builtin:<task>", a folder with tokenizer.json, or null: model.path's own tokenizer when it has
  // one, else builtin:<data.task> (run_tokenizer.h)
  std::optional<std::string> tokenizer;

  template <class Fields>
  void fields(Fields& f) {
    f("path", path, "HF model folder to start from (null: a new model from `config`)");
    f("config", config, "HF config.json fields of a new model (architectures, hidden_size, ...)");
    f("tokenizer", tokenizer,
      "builtin:<task>, or a folder with tokenizer.json (byte-level BPE or a built-in tokenizer's save); null: "
      "model.path's own tokenizer.json, else builtin:<data.task>");
  }
};

struct TrainerConfig {
  int64_t total_training_steps = 1500;
  int64_t test_freq = 250;   // evaluate every k steps (and at the end); <= 0: only at the end
  int64_t save_freq = 500;   // checkpoint every k steps (and at the end); <= 0: never
  std::string default_local_dir = "checkpoints/sft";
  std::vector<Logger> logger = {Logger::console, Logger::jsonl};
  int num_threads = 0;              // OpenMP threads; 0: one per core
  ResumeMode resume_mode = ResumeMode::automatic;  // resume_path is RL's only
  std::optional<double> stop_at_val_acc;  // stop (with a checkpoint) at the first evaluation reaching it
  std::optional<double> device_memory_budget_gb;

  template <class Fields>
  void fields(Fields& f) {
    f("total_training_steps", total_training_steps, "optimizer steps of the run");
    f("test_freq", test_freq, "evaluate every k steps and at the end (<= 0: only at the end)");
    f("save_freq", save_freq, "checkpoint every k steps and at the end (<= 0: never)");
    f("default_local_dir", default_local_dir, "run folder: checkpoints, metrics.jsonl, resolved config");
    f("logger", logger, "console and/or jsonl");
    f("num_threads", num_threads,
      "OpenMP threads (0: one per core; more than the cores are capped there, with a warning)");
    f("resume_mode", resume_mode, "auto (continue from the latest checkpoint) or disable (start over)");
    f("stop_at_val_acc", stop_at_val_acc,
      "stop, with a checkpoint, at the first evaluation whose accuracy reaches this (null: run every step); "
      "builds a warm start of a given accuracy whatever the seed");
    f("device_memory_budget_gb", device_memory_budget_gb,
      "rlforge: the device tier's budget per rank in GiB, enforced by the memory tracker: an allocation that would "
      "exceed it stops the run naming the category and sizes (null: no budget). On the CPU the device tier is RAM "
      "like the host tier, so this is how a run shows it fits an accelerator of that size");
  }
  void validate() const;
};

struct SftConfig {
  ModelSection model;
  data::DataConfig data;
  engine::EngineConfig megatron;
  optim::OptimConfig optim;
  TrainerConfig trainer;

  template <class Fields>
  void fields(Fields& f) {
    f("model", model, "the model to train");
    f("data", data, "training and validation data");
    f("megatron", megatron, "engine: parallel layout, dtype, seed");
    f("optim", optim, "optimizer and learning-rate schedule");
    f("trainer", trainer, "run length, evaluation, checkpoints, logging");
  }
};

}  // namespace rf::trainer
