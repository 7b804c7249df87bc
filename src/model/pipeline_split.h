// Pipeline-parallel layer split (Megatron §3.1, §3.8; MindSpeed's noop layers, §11): which decoder layers
// each pipeline rank builds, in how many virtual chunks, and which chunk owns the embedding and the loss.
// A pure function of (PipelineSplitConfig, layer counts, PP size): the engine, the schedule, the checkpoint
// writer and the start-up log all read the same PipelineSplit.
//
// Layer numbering. A *global* layer index counts every decoder layer of the Megatron model, noop ones
// included: num_layers = num_hidden_layers (config.json, the real layers) + len(noop_layers). Noop layers
// (MindSpeed's --noop-layers) are identity layers without weights; they pad the stack so that it divides
// over the stages (30 real + 2 noop = 32 on PP 4). The Hugging Face model has only the real layers, so its
// layer index skips them: hf = global - (noop layers below it); with noop_layers [30, 31], global 0..29
// are HF 0..29, with [0, 31] global 1..30 are HF 0..29. Megatron checkpoint keys and recompute decisions
// use the global index (§3.8), HF names the HF index. This is MindSpeed-LLM's convention (its --num-layers
// counts the noop layers; its HF converter skips them).
//
// Chunk order. A rank with V virtual chunks runs chunk v as virtual stage v*P + p; the model's forward pass
// visits the virtual stages in that order, and the global layers increase along it (interleaved placement:
// L=16, P=4, V=2 gives stage 0 {0,1},{8,9}; stage 1 {2,3},{10,11}; ...).
//
// Not here: the schedule (engine), the p2p transfers, MTP modules themselves (the layout's `m` is counted
// and placed, the model that runs it comes later).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rf::model {

// Megatron's and MindSpeed's split keys; verl keeps them in the `megatron:` block beside
// pipeline_model_parallel_size. validate() checks what needs no sizes; make_pipeline_split the rest.
// Keys in errors are relative to this struct (an enclosing config re-keys them).
struct PipelineSplitConfig {
  std::optional<int64_t> virtual_pipeline_model_parallel_size;  // null: 1 (no interleaving)
  std::optional<int64_t> num_layers_in_first_pipeline_stage;
  std::optional<int64_t> num_layers_in_last_pipeline_stage;
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  std::optional<std::string> pipeline_model_parallel_layout;
  std::vector<int64_t> noop_layers;  // global layer indices

  template <class Fields>
  void fields(Fields& f) {
    f("virtual_pipeline_model_parallel_size", virtual_pipeline_model_parallel_size,
      "model chunks per pipeline rank, run interleaved (null: 1); needs pipeline_model_parallel_size > 1 and "
      "layers per stage divisible by it");
    f("num_layers_in_first_pipeline_stage", num_layers_in_first_pipeline_stage,
      "decoder layers on pipeline rank 0 (null: even split); the middle ranks share the rest evenly");
    f("num_layers_in_last_pipeline_stage", num_layers_in_last_pipeline_stage,
      "decoder layers on the last pipeline rank (null: even split)");
    f("account_for_embedding_in_pipeline_split", account_for_embedding_in_pipeline_split,
      "count the embedding as a layer when splitting: the first chunk builds one decoder layer fewer");
    f("account_for_loss_in_pipeline_split", account_for_loss_in_pipeline_split,
      "count the output layer and loss as a layer when splitting: the last chunk builds one decoder layer fewer");
    f("pipeline_model_parallel_layout", pipeline_model_parallel_layout,
      "the layers of every virtual stage in execution order, e.g. \"Ettt|(tt|)*29,m|L\": E embedding, t decoder "
      "layer, m MTP layer, L loss, | next stage, (..)*n or x*n repeats, commas ignored; the stage count / "
      "pipeline_model_parallel_size is the virtual size");
    f("noop_layers", noop_layers,
      "MindSpeed: global indices of identity layers (no weights) added to the model's num_hidden_layers so "
      "that the layers divide over the stages, e.g. [30, 31] for 30 layers on PP 4");
  }
  // Throws ConfigError naming the key: sizes < 1, a negative or repeated noop index, a layout string that
  // does not parse, keys that exclude each other (first/last stage sizes with account_for_*, a layout
  // with any of those).
  void validate() const;
  bool operator==(const PipelineSplitConfig&) const = default;
};

// One item of pipeline_model_parallel_layout.
enum class LayoutLayer : uint8_t { embedding, decoder, mtp, loss };

// The virtual stages of a layout string in order, each its items. ConfigError
// "pipeline_model_parallel_layout: cannot parse at column <c>: ..." (1-based column) on a bad string.
//   layout := item*          item := atom ('*' count)?          count := decimal >= 1
//   atom   := 'E' | 't' | 'm' | 'L' | '|' | '(' item+ ')'      ',' between items is ignored
// A group may nest; a count repeats the atom before it (a single letter, a '|', or a group). The expanded
// layout is capped at kMaxLayoutItems items.
using LayoutStage = std::vector<LayoutLayer>;
inline constexpr int64_t kMaxLayoutItems = int64_t(1) << 20;
std::vector<LayoutStage> parse_pipeline_layout(std::string_view layout);

// What pipeline rank `pp_rank` builds as its chunk `vp_stage`: the contiguous global layers
// [first_layer, first_layer + num_layers), some of them noop.
struct PipelineChunk {
  int64_t pp_rank = 0;
  int64_t vp_stage = 0;              // the chunk's index on its rank, 0..V-1
  int64_t vstage = 0;                // vp_stage * P + pp_rank: its place in the forward pass
  int64_t first_layer = 0;           // global index of its first decoder layer (where it would start when empty)
  int64_t num_layers = 0;            // decoder layers, noop ones included; may be 0
  std::vector<int64_t> noop_layers;  // the global indices among them that are identity layers, ascending
  int64_t first_mtp_layer = 0;       // MTP depth index of its first MTP layer
  int64_t num_mtp_layers = 0;
  bool pre_process = false;   // owns the embedding: pp_rank 0, vp_stage 0
  bool post_process = false;  // owns the final norm, the output layer and the loss: pp_rank P-1, vp_stage V-1

  int64_t end_layer() const { return first_layer + num_layers; }
  bool holds(int64_t global_layer) const { return global_layer >= first_layer && global_layer < end_layer(); }
  bool is_noop(int64_t global_layer) const;
  int64_t num_real_layers() const { return num_layers - static_cast<int64_t>(noop_layers.size()); }
  std::vector<int64_t> layers() const;  // first_layer, ..., end_layer() - 1
};

struct PipelineSplit {
  int64_t pp_size = 1;
  int64_t vp_size = 1;
  int64_t num_layers = 0;         // global layers: num_hidden_layers + noop layers
  int64_t num_hidden_layers = 0;  // the real layers, as the HF model has them
  int64_t num_mtp_layers = 0;
  std::vector<int64_t> noop_layers;   // ascending
  std::vector<PipelineChunk> chunks;  // P x V, in forward order (vstage = vp_stage * P + pp_rank)

  const PipelineChunk& chunk(int64_t pp_rank, int64_t vp_stage) const;
  // The chunk that holds global layer `global_layer`. Indices out of range here and below are rf::Errors
  // (a caller's bug, not a config's).
  const PipelineChunk& chunk_of_layer(int64_t global_layer) const;
  bool is_noop(int64_t global_layer) const;
  // The HF layer index of a real global layer; nullopt for a noop layer (it has no weights).
  std::optional<int64_t> hf_layer(int64_t global_layer) const;
  // The global index of HF layer `hf_layer` (0 <= hf_layer < num_hidden_layers); inverse of hf_layer().
  int64_t global_layer(int64_t hf_layer) const;
  // One line per pipeline rank with its chunks, for the start-up log:
  //   pipeline split: 32 layers (30 + 2 noop) on PP 4 x VP 1
  //     pp 3: [E 0-7] ...   [24-29, noop 30-31, L]
  std::string describe() const;
};

// The split of `num_hidden_layers` real decoder layers (config.json's; the noop layers of `config` come on
// top) and `num_mtp_layers` MTP layers over `pp_size` pipeline ranks. Runs config.validate(), then throws
// ConfigError naming the key for a split that does not fit: layers that do not divide over the stages or
// chunks, interleaving or uneven stages without pipeline_model_parallel_size > 1, a noop index out of range,
// a layout whose counts or order do not match the model. Without a layout the MTP layers go to the last chunk.
PipelineSplit make_pipeline_split(const PipelineSplitConfig& config, int64_t num_hidden_layers, int64_t pp_size,
                                  int64_t num_mtp_layers = 0);

}  // namespace rf::model
