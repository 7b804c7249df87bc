#include "model/activation_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/tensor_allocation.h"

namespace rf::model {
namespace {

template <class S>
std::string names(const std::vector<SavedTensorSpec<S>>& specs, SavedPart part) {
  std::string out;
  for (const SavedTensorSpec<S>& spec : specs)
    if (spec.discarded == (part == SavedPart::discarded)) out += fmt::format("{}{}", out.empty() ? "" : ", ", spec.name);
  return out;
}

std::string joined(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& part : parts)
    if (!part.empty()) out += fmt::format("{}{}", out.empty() ? "" : ", ", part);
  return out;
}

std::string_view kind_name(LayerActivations::Kind kind) {
  switch (kind) {
    case LayerActivations::Kind::saved: return "saved";
    case LayerActivations::Kind::group_input: return "recomputed, its group starts here";
    case LayerActivations::Kind::recomputed: return "recomputed";
  }
  return "";
}

ChunkActivations plan_chunk(const ModelConfig& config, const ModelSpan& span, const ActivationShape& shape,
                            const RecomputePolicy& policy, int64_t offloaded_layers) {
  const int64_t N = shape.max_tokens, C = config.hidden_size, tp = shape.tp_size;
  const int64_t n = shape.sequence_parallel ? N / tp : N;
  const DType dtype = shape.dtype;
  const int64_t stream = int64_t(tensor_allocation_bytes({n, C}, dtype));
  const AttentionBlock attention(config, tp);
  const MlpBlock mlp(config, tp);
  const auto attention_specs = attention.saved_tensors(N, dtype, policy.selective);
  const auto mlp_specs = mlp.saved_tensors(N, dtype, policy.selective);
  const int64_t saved_layer = stream + allocation_bytes(attention_specs, SavedPart::kept) +
                              allocation_bytes(mlp_specs, SavedPart::kept);
  const std::string saved_names = joined({"mid", names(attention_specs, SavedPart::kept), names(mlp_specs, SavedPart::kept)});
  const std::string discarded_names =
      joined({names(attention_specs, SavedPart::discarded), names(mlp_specs, SavedPart::discarded)});
  // An MoE layer keeps its MoE block's tensors instead of the MLP's (all of them: no selective recompute there).
  MoeBlockConfig moe_config = MoeBlockConfig::from_model(config, shape.moe_parallel);
  moe_config.capacity = shape.moe_capacity;
  const std::optional<MoeBlock> moe = config.moe.enabled() ? std::optional<MoeBlock>(moe_config) : std::nullopt;
  const int64_t moe_bytes = moe ? moe->saved_bytes(N, dtype) : 0;
  // With recompute_modules' moe the block's tensors are one shared set, in the scratch.
  const bool moe_kept = !policy.selective.moe;
  const int64_t saved_moe_layer =
      stream + allocation_bytes(attention_specs, SavedPart::kept) + (moe_kept ? moe_bytes : 0);
  const std::string moe_names = "moe: router, routed rows, experts' activations";
  const std::string saved_moe_names =
      joined({"mid", names(attention_specs, SavedPart::kept), moe_kept ? moe_names : ""});
  const auto is_moe = [&](int64_t l) { return config.moe.is_moe_layer(span.hf_layers[size_t(l)]); };

  ChunkActivations chunk;
  const int64_t L = int64_t(span.hf_layers.size());
  const RecomputeGroups groups = recompute_groups(policy, L);
  const bool distributed = policy.full && policy.distribute_saved_activations && tp > 1;
  for (int64_t l = 0; l < L; ++l) {
    LayerActivations layer{.hf_layer = span.hf_layers[size_t(l)]};
    switch (residual_kept(groups, distributed, l)) {
      case ResidualKept::whole:
        layer.bytes = stream;
        layer.kept = "input";
        break;
      case ResidualKept::tp_slice:
        layer.bytes = int64_t(tensor_allocation_bytes({(n * C + tp - 1) / tp}, dtype));
        layer.kept = fmt::format("1/{} of the input", tp);
        break;
      case ResidualKept::none: break;
    }
    if (!groups.recomputes(l)) {
      layer.bytes += is_moe(l) ? saved_moe_layer : saved_layer;
      layer.kept = joined({layer.kept, is_moe(l) ? saved_moe_names : saved_names});
      layer.discarded = is_moe(l) ? joined({names(attention_specs, SavedPart::discarded), moe_kept ? "" : moe_names})
                                  : discarded_names;
    } else {
      layer.kind = layer.bytes > 0 ? LayerActivations::Kind::group_input : LayerActivations::Kind::recomputed;
    }
    layer.offloaded = l < offloaded_layers;
    chunk.layers.push_back(std::move(layer));
  }
  // At most two offloaded layers are on the device at once; all of one size but the chunk's first, whose input
  // may be a distributed slice: the two largest.
  std::vector<int64_t> offloaded;
  for (const LayerActivations& layer : chunk.layers)
    if (layer.offloaded) offloaded.push_back(layer.bytes);
  std::sort(offloaded.rbegin(), offloaded.rend());
  const size_t in_transit = std::min<size_t>(2, offloaded.size());
  for (size_t k = 0; k < in_transit; ++k) chunk.scratch_bytes += offloaded[k];
  chunk.output_bytes = stream;
  if (span.post_process)
    chunk.head_bytes = config.head == HeadKind::lm
                           ? allocation_bytes(LmHead(config, shape.vocab_columns, 0).saved_tensors(N, dtype),
                                              SavedPart::kept)
                           : allocation_bytes(ValueHead(config).saved_tensors(N, dtype), SavedPart::kept);
  // One group's layers, all they save (its first layer's input stays in the micro-batch's own).
  const SelectiveRecompute keep_all;
  const int64_t attention_and_stream =
      stream + allocation_bytes(attention.saved_tensors(N, dtype, keep_all), SavedPart::kept);
  const int64_t mlp_bytes = allocation_bytes(mlp.saved_tensors(N, dtype, keep_all), SavedPart::kept);
  const int64_t G = groups.largest();
  // Position k of a group holds an MLP's tensors if some group has a dense layer there, an MoE block's if some has
  // an MoE layer there (CausalLm::reserve).
  for (int64_t k = 0; k < G; ++k) {
    bool dense = false, sparse = false;
    for (const auto& [first, end] : groups.groups)
      if (first + k < end) (is_moe(first + k) ? sparse : dense) = true;
    chunk.scratch_bytes += attention_and_stream + (dense ? mlp_bytes : 0) + (sparse ? moe_bytes : 0);
  }
  if (G > 0) chunk.scratch_bytes += (G - 1) * stream;
  if (policy.selective.any())
    chunk.scratch_bytes += allocation_bytes(attention_specs, SavedPart::discarded) +
                           allocation_bytes(mlp_specs, SavedPart::discarded) + (moe_kept ? 0 : moe_bytes);
  if (distributed) chunk.scratch_bytes += 2 * int64_t(tensor_allocation_bytes({N, C}, dtype));
  chunk.scratch_holds =
      joined({G > 0 ? "a recomputed group" : "", policy.selective.any() ? "the discarded tensors" : "",
              distributed ? "two whole group inputs" : "",
              in_transit > 0 ? fmt::format("{} offloaded layers in transit", in_transit) : ""});
  return chunk;
}

}  // namespace

int64_t ChunkActivations::layers_bytes() const {
  int64_t bytes = output_bytes;
  for (const LayerActivations& layer : layers)
    if (!layer.offloaded) bytes += layer.bytes;
  return bytes;
}

int64_t ChunkActivations::offloaded_bytes() const {
  int64_t bytes = 0;
  for (const LayerActivations& layer : layers)
    if (layer.offloaded) bytes += layer.bytes;
  return bytes;
}

int64_t ActivationPlan::scratch_bytes() const {
  int64_t bytes = 0;
  for (const ChunkActivations& chunk : chunks) bytes += chunk.scratch_bytes;
  return bytes;
}

std::vector<int64_t> ActivationPlan::slot_bytes() const {
  std::vector<int64_t> bytes;
  for (const ChunkActivations& chunk : chunks) bytes.push_back(chunk.slot_bytes());
  return bytes;
}

std::string ActivationPlan::table(int64_t in_flight_peak_bytes, std::string_view in_flight) const {
  std::string out;
  for (size_t v = 0; v < chunks.size(); ++v) {
    const ChunkActivations& chunk = chunks[v];
    if (chunks.size() > 1) out += fmt::format("  chunk {}:\n", v);
    // Runs of consecutive layers that keep the same.
    for (size_t begin = 0; begin < chunk.layers.size();) {
      const LayerActivations& first = chunk.layers[begin];
      size_t end = begin + 1;
      while (end < chunk.layers.size() && chunk.layers[end].kind == first.kind &&
             chunk.layers[end].bytes == first.bytes && chunk.layers[end].kept == first.kept &&
             chunk.layers[end].offloaded == first.offloaded)
        ++end;
      const int64_t last = chunk.layers[end - 1].hf_layer;
      out += fmt::format("    {:<14} {:>10} per micro-batch each  {}{}{}{}\n",
                         first.hf_layer == last ? fmt::format("layer {}", last)
                                                : fmt::format("layers {}-{}", first.hf_layer, last),
                         format_bytes(first.bytes), kind_name(first.kind),
                         first.kept.empty() ? "" : fmt::format("; keeps {}", first.kept),
                         first.discarded.empty() ? "" : fmt::format("; recomputes {}", first.discarded),
                         first.offloaded ? "; on the host tier between its forward and backward" : "");
      begin = end;
    }
    out += fmt::format("    {:<14} {:>10} per micro-batch\n", "output", format_bytes(chunk.output_bytes));
    if (chunk.head_bytes > 0)
      out += fmt::format("    {:<14} {:>10} per micro-batch\n", "head", format_bytes(chunk.head_bytes));
    if (chunk.scratch_bytes > 0)
      out += fmt::format("    {:<14} {:>10} once: {}\n", "scratch", format_bytes(chunk.scratch_bytes),
                         chunk.scratch_holds);
  }
  out += fmt::format("    peak: {} = scratch {} + {} in flight ({})", format_bytes(peak_bytes(in_flight_peak_bytes)),
                     format_bytes(scratch_bytes()), format_bytes(in_flight_peak_bytes), in_flight);
  return out;
}

ActivationPlan plan_activations(const ModelConfig& config, const std::vector<ModelSpan>& chunks,
                                const ActivationShape& shape, const RecomputePolicy& policy,
                                int64_t offloaded_layers) {
  ActivationPlan plan;
  for (const ModelSpan& span : chunks) plan.chunks.push_back(plan_chunk(config, span, shape, policy, offloaded_layers));
  return plan;
}

}  // namespace rf::model
