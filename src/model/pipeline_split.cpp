#include "model/pipeline_split.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"

namespace rf::model {
namespace {

constexpr const char* kVpKey = "virtual_pipeline_model_parallel_size";
constexpr const char* kFirstKey = "num_layers_in_first_pipeline_stage";
constexpr const char* kLastKey = "num_layers_in_last_pipeline_stage";
constexpr const char* kEmbeddingKey = "account_for_embedding_in_pipeline_split";
constexpr const char* kLossKey = "account_for_loss_in_pipeline_split";
constexpr const char* kLayoutKey = "pipeline_model_parallel_layout";
constexpr const char* kNoopKey = "noop_layers";
constexpr const char* kPpKey = "pipeline_model_parallel_size";
constexpr int kMaxLayoutNesting = 32;

// Recursive descent over the layout string, expanding repetitions as it goes into one item per char
// ('E', 't', 'm', 'L', '|'); stages are split at '|' afterwards.
class LayoutParser {
 public:
  explicit LayoutParser(std::string_view text) : text_(text) {}

  std::string expand() {
    parse_items(0);
    if (pos_ < text_.size()) fail(pos_, "')' without a matching '('");
    return out_;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw ConfigError(kLayoutKey, fmt::format("cannot parse at column {}: {} (in \"{}\")", at + 1, what, text_));
  }

  // Items up to the end of the text or an unconsumed ')'.
  void parse_items(int depth) {
    while (pos_ < text_.size() && text_[pos_] != ')') {
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      parse_item(depth);
    }
  }

  void parse_item(int depth) {
    const size_t atom_at = pos_;
    const size_t start = out_.size();
    const char c = text_[pos_];
    if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
      out_ += c;
      ++pos_;
    } else if (c == '(') {
      if (depth >= kMaxLayoutNesting) fail(pos_, fmt::format("groups nest deeper than {}", kMaxLayoutNesting));
      ++pos_;
      parse_items(depth + 1);
      if (pos_ >= text_.size()) fail(atom_at, "'(' is not closed");
      if (out_.size() == start) fail(atom_at, "empty group '()'");
      ++pos_;  // ')'
      if (pos_ >= text_.size() || text_[pos_] != '*') fail(pos_, "a group must be followed by *<count>");
    } else {
      fail(pos_, fmt::format("unexpected '{}'; expected E, t, m, L, |, ( or ,", c));
    }
    if (pos_ < text_.size() && text_[pos_] == '*') repeat(start, atom_at);
  }

  // "*<count>" after the atom whose expansion is out_[start..]: append it count - 1 more times.
  void repeat(size_t start, size_t atom_at) {
    const size_t star_at = pos_++;
    int64_t count = 0;
    const size_t digits_at = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      count = count * 10 + (text_[pos_] - '0');
      if (count > kMaxLayoutItems) fail(digits_at, fmt::format("repeat count above {}", kMaxLayoutItems));
      ++pos_;
    }
    if (pos_ == digits_at) fail(star_at, "'*' must be followed by a count");
    if (count < 1) fail(digits_at, "repeat count must be >= 1");
    const std::string atom = out_.substr(start);
    // atom.size() and count are both <= kMaxLayoutItems, so the product fits int64.
    if (static_cast<int64_t>(start) + static_cast<int64_t>(atom.size()) * count > kMaxLayoutItems)
      fail(atom_at, fmt::format("the layout expands to more than {} items", kMaxLayoutItems));
    for (int64_t i = 1; i < count; ++i) out_ += atom;
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string out_;
};

LayoutLayer layout_layer(char c) {
  switch (c) {
    case 'E':
      return LayoutLayer::embedding;
    case 'm':
      return LayoutLayer::mtp;
    case 'L':
      return LayoutLayer::loss;
    default:
      return LayoutLayer::decoder;
  }
}

// Decoder and MTP layers of each virtual stage (index vstage = v * P + p).
struct StageCounts {
  int64_t vp_size = 1;
  std::vector<int64_t> decoders;
  std::vector<int64_t> mtps;
};

[[noreturn]] void throw_layout(const std::string& what) { throw ConfigError(kLayoutKey, what); }

StageCounts counts_from_layout(const PipelineSplitConfig& config, int64_t num_layers, int64_t num_noop, int64_t pp_size,
                               int64_t num_mtp_layers) {
  const std::vector<LayoutStage> stages = parse_pipeline_layout(*config.pipeline_model_parallel_layout);
  const auto num_stages = static_cast<int64_t>(stages.size());
  if (num_stages % pp_size != 0)
    throw_layout(fmt::format("{} virtual stages do not divide over {} = {}", num_stages, kPpKey, pp_size));
  StageCounts counts;
  counts.vp_size = num_stages / pp_size;
  if (counts.vp_size > 1 && pp_size == 1)
    throw_layout(
        fmt::format("{} virtual stages need {} > 1 (they interleave over pipeline ranks)", num_stages, kPpKey));
  if (config.virtual_pipeline_model_parallel_size && *config.virtual_pipeline_model_parallel_size != counts.vp_size)
    throw ConfigError(kVpKey, fmt::format("{} conflicts with {}, which has {} virtual stages per pipeline rank "
                                          "({} over {} = {})",
                                          *config.virtual_pipeline_model_parallel_size, kLayoutKey, counts.vp_size,
                                          num_stages, kPpKey, pp_size));
  int64_t num_embeddings = 0, num_losses = 0, num_decoders = 0, num_mtps = 0;
  bool mtp_seen = false;
  int64_t mtp_stage = -1;
  for (int64_t s = 0; s < num_stages; ++s) {
    int64_t decoders = 0, mtps = 0;
    for (const LayoutLayer layer : stages[s]) {
      switch (layer) {
        case LayoutLayer::embedding:
          ++num_embeddings;
          break;
        case LayoutLayer::loss:
          ++num_losses;
          break;
        case LayoutLayer::decoder:
          if (mtp_seen) throw_layout(fmt::format("a decoder layer t in virtual stage {} follows an MTP layer m", s));
          ++decoders;
          break;
        case LayoutLayer::mtp:
          if (mtp_stage >= 0 && mtp_stage != s)
            throw_layout(
                fmt::format("MTP layers m in virtual stages {} and {}: they must all be in one", mtp_stage, s));
          mtp_seen = true;
          mtp_stage = s;
          ++mtps;
          break;
      }
    }
    counts.decoders.push_back(decoders);
    counts.mtps.push_back(mtps);
    num_decoders += decoders;
    num_mtps += mtps;
  }
  if (num_embeddings != 1) throw_layout(fmt::format("has {} embeddings E, expected exactly 1", num_embeddings));
  if (num_losses != 1) throw_layout(fmt::format("has {} losses L, expected exactly 1", num_losses));
  if (stages.front().empty() || stages.front().front() != LayoutLayer::embedding)
    throw_layout("the embedding E must open the first virtual stage (pipeline rank 0's first chunk)");
  if (stages.back().empty() || stages.back().back() != LayoutLayer::loss)
    throw_layout("the loss L must close the last virtual stage (the last pipeline rank's last chunk)");
  if (num_decoders != num_layers)
    throw_layout(fmt::format("has {} decoder layers t, the model has {} ({} + {} noop layers)", num_decoders,
                             num_layers, num_layers - num_noop, num_noop));
  if (num_mtps != num_mtp_layers)
    throw_layout(fmt::format("has {} MTP layers m, the model has {}", num_mtps, num_mtp_layers));
  if (mtp_stage >= 0 && mtp_stage / pp_size != counts.vp_size - 1)
    throw_layout(
        fmt::format("the MTP layers m are in virtual stage {}, chunk {} of pipeline rank {}: they must be "
                    "in its last chunk",
                    mtp_stage, mtp_stage / pp_size, mtp_stage % pp_size));
  return counts;
}

// Uneven first/last stages (Megatron's num_layers_in_{first,last}_pipeline_stage): the middle ranks share
// what is left evenly; with VP every rank's count splits evenly over its chunks.
std::vector<int64_t> stage_layers_uneven(const PipelineSplitConfig& config, int64_t num_layers, int64_t pp_size,
                                         int64_t vp_size) {
  const auto& first = config.num_layers_in_first_pipeline_stage;
  const auto& last = config.num_layers_in_last_pipeline_stage;
  const char* blame = first ? kFirstKey : kLastKey;
  const int64_t num_middle_stages = pp_size - (first ? 1 : 0) - (last ? 1 : 0);
  const int64_t num_middle_layers = num_layers - first.value_or(0) - last.value_or(0);
  const std::string given = first && last ? fmt::format("{} + {} = {}", *first, *last, *first + *last)
                                          : fmt::format("{}", first ? *first : *last);
  if (num_middle_layers < 0)
    throw ConfigError(blame, fmt::format("{} layers exceed the model's {}", given, num_layers));
  if (num_middle_stages == 0 && num_middle_layers != 0)
    throw ConfigError(blame, fmt::format("{} layers on the only two stages, the model has {}", given, num_layers));
  if (num_middle_stages > 0 && num_middle_layers == 0)
    throw ConfigError(blame, fmt::format("{} layers leave none for the {} middle stages", given, num_middle_stages));
  if (num_middle_stages > 0 && num_middle_layers % num_middle_stages != 0)
    throw ConfigError(blame, fmt::format("the {} layers left after {} do not divide over the {} other stages",
                                         num_middle_layers, given, num_middle_stages));
  const int64_t middle = num_middle_stages > 0 ? num_middle_layers / num_middle_stages : 0;
  if (first && *first % vp_size != 0)
    throw ConfigError(kFirstKey, fmt::format("{} does not divide over {} = {} chunks", *first, kVpKey, vp_size));
  if (last && *last % vp_size != 0)
    throw ConfigError(kLastKey, fmt::format("{} does not divide over {} = {} chunks", *last, kVpKey, vp_size));
  if (num_middle_stages > 0 && middle % vp_size != 0)
    throw ConfigError(kVpKey,
                      fmt::format("{} does not divide the {} layers of each middle pipeline stage", vp_size, middle));
  std::vector<int64_t> stage_layers(pp_size, middle);
  if (first) stage_layers.front() = *first;
  if (last) stage_layers.back() = *last;
  return stage_layers;
}

// The even split: n = L (+1 embedding) (+1 loss) layers' worth over P stages and V chunks each.
int64_t chunk_layers_even(const PipelineSplitConfig& config, int64_t num_layers, int64_t num_noop, int64_t pp_size,
                          int64_t vp_size) {
  const bool embedding = config.account_for_embedding_in_pipeline_split;
  const bool loss = config.account_for_loss_in_pipeline_split;
  const int64_t n = num_layers + (embedding ? 1 : 0) + (loss ? 1 : 0);
  if (n % pp_size != 0)
    throw ConfigError(kPpKey, fmt::format("{} does not divide the {} layers{}{}{} (noop_layers can pad them)", pp_size,
                                          num_layers, num_noop > 0 ? fmt::format(" ({} noop)", num_noop) : "",
                                          embedding ? " + 1 for the embedding" : "", loss ? " + 1 for the loss" : ""));
  if ((n / pp_size) % vp_size != 0)
    throw ConfigError(kVpKey,
                      fmt::format("{} does not divide the {} layers of each pipeline stage", vp_size, n / pp_size));
  return n / pp_size / vp_size;
}

StageCounts counts_from_sizes(const PipelineSplitConfig& config, int64_t num_layers, int64_t num_noop, int64_t pp_size,
                              int64_t num_mtp_layers) {
  StageCounts counts;
  counts.vp_size = config.virtual_pipeline_model_parallel_size.value_or(1);
  const int64_t P = pp_size, V = counts.vp_size;
  counts.decoders.assign(P * V, 0);
  counts.mtps.assign(P * V, 0);
  if (config.num_layers_in_first_pipeline_stage || config.num_layers_in_last_pipeline_stage) {
    const std::vector<int64_t> stage_layers = stage_layers_uneven(config, num_layers, P, V);
    for (int64_t v = 0; v < V; ++v)
      for (int64_t p = 0; p < P; ++p) counts.decoders[v * P + p] = stage_layers[p] / V;
  } else {
    const int64_t c = chunk_layers_even(config, num_layers, num_noop, P, V);
    std::fill(counts.decoders.begin(), counts.decoders.end(), c);
    // The embedding (loss) takes a layer's slot in the first (last) chunk. c >= 1 (n >= P * V), and with
    // P > 1 the two are different chunks, so no count goes below 0.
    if (config.account_for_embedding_in_pipeline_split) --counts.decoders.front();
    if (config.account_for_loss_in_pipeline_split) --counts.decoders.back();
  }
  counts.mtps.back() = num_mtp_layers;
  return counts;
}

void check_needs_pipeline(const PipelineSplitConfig& config) {
  if (config.virtual_pipeline_model_parallel_size && *config.virtual_pipeline_model_parallel_size > 1)
    throw ConfigError(kVpKey, fmt::format("{} needs {} > 1 (it interleaves chunks over the pipeline ranks)",
                                          *config.virtual_pipeline_model_parallel_size, kPpKey));
  if (config.num_layers_in_first_pipeline_stage)
    throw ConfigError(kFirstKey, fmt::format("{} needs {} > 1", *config.num_layers_in_first_pipeline_stage, kPpKey));
  if (config.num_layers_in_last_pipeline_stage)
    throw ConfigError(kLastKey, fmt::format("{} needs {} > 1", *config.num_layers_in_last_pipeline_stage, kPpKey));
  if (config.account_for_embedding_in_pipeline_split)
    throw ConfigError(kEmbeddingKey, fmt::format("true needs {} > 1 (it balances pipeline stages)", kPpKey));
  if (config.account_for_loss_in_pipeline_split)
    throw ConfigError(kLossKey, fmt::format("true needs {} > 1 (it balances pipeline stages)", kPpKey));
}

// "3", "3-5"
std::string layer_range(int64_t begin, int64_t end) {
  return end - begin == 1 ? fmt::format("{}", begin) : fmt::format("{}-{}", begin, end - 1);
}

std::string describe_chunk(const PipelineChunk& chunk) {
  std::vector<std::string> parts;
  if (chunk.pre_process) parts.emplace_back("E");
  // Runs of real and noop layers.
  for (int64_t begin = chunk.first_layer; begin < chunk.end_layer();) {
    const bool noop = chunk.is_noop(begin);
    int64_t end = begin + 1;
    while (end < chunk.end_layer() && chunk.is_noop(end) == noop) ++end;
    parts.push_back((noop ? "noop " : "") + layer_range(begin, end));
    begin = end;
  }
  if (chunk.num_mtp_layers > 0)
    parts.push_back("mtp " + layer_range(chunk.first_mtp_layer, chunk.first_mtp_layer + chunk.num_mtp_layers));
  if (chunk.post_process) parts.emplace_back("L");
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

}  // namespace

void PipelineSplitConfig::validate() const {
  if (virtual_pipeline_model_parallel_size && *virtual_pipeline_model_parallel_size < 1)
    throw ConfigError(kVpKey, fmt::format("must be >= 1 (or null), got {}", *virtual_pipeline_model_parallel_size));
  for (const auto& [key, value] : {std::pair{kFirstKey, num_layers_in_first_pipeline_stage},
                                   std::pair{kLastKey, num_layers_in_last_pipeline_stage}}) {
    if (value && *value < 1) throw ConfigError(key, fmt::format("must be >= 1 (or null), got {}", *value));
  }
  const char* account = account_for_embedding_in_pipeline_split ? kEmbeddingKey
                        : account_for_loss_in_pipeline_split    ? kLossKey
                                                                : nullptr;
  const char* uneven = num_layers_in_first_pipeline_stage  ? kFirstKey
                       : num_layers_in_last_pipeline_stage ? kLastKey
                                                           : nullptr;
  if (uneven && account)
    throw ConfigError(uneven, fmt::format("cannot be combined with {}: true (uneven stages place the embedding and "
                                          "loss stages' layers themselves)",
                                          account));
  if (pipeline_model_parallel_layout) {
    if (uneven || account)
      throw ConfigError(kLayoutKey, fmt::format("cannot be combined with {} (the layout places every layer)",
                                                uneven ? uneven : account));
    parse_pipeline_layout(*pipeline_model_parallel_layout);
  }
  std::vector<int64_t> sorted = noop_layers;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty() && sorted.front() < 0)
    throw ConfigError(kNoopKey, fmt::format("index {} is negative", sorted.front()));
  const auto repeated = std::adjacent_find(sorted.begin(), sorted.end());
  if (repeated != sorted.end()) throw ConfigError(kNoopKey, fmt::format("index {} appears twice", *repeated));
}

std::vector<LayoutStage> parse_pipeline_layout(std::string_view layout) {
  const std::string items = LayoutParser(layout).expand();
  std::vector<LayoutStage> stages(1);
  for (const char c : items) {
    if (c == '|') {
      stages.emplace_back();
    } else {
      stages.back().push_back(layout_layer(c));
    }
  }
  return stages;
}

bool PipelineChunk::is_noop(int64_t global_layer) const {
  return std::binary_search(noop_layers.begin(), noop_layers.end(), global_layer);
}

std::vector<int64_t> PipelineChunk::layers() const {
  std::vector<int64_t> out;
  for (int64_t l = first_layer; l < end_layer(); ++l) out.push_back(l);
  return out;
}

const PipelineChunk& PipelineSplit::chunk(int64_t pp_rank, int64_t vp_stage) const {
  RF_CHECK(pp_rank >= 0 && pp_rank < pp_size && vp_stage >= 0 && vp_stage < vp_size,
           "chunk (pp {}, vp {}) of PP {} x VP {}", pp_rank, vp_stage, pp_size, vp_size);
  return chunks[vp_stage * pp_size + pp_rank];
}

const PipelineChunk& PipelineSplit::chunk_of_layer(int64_t global_layer) const {
  RF_CHECK(global_layer >= 0 && global_layer < num_layers, "global layer {} of {}", global_layer, num_layers);
  // Chunks are in forward order and their layers ascend along it: the last chunk starting at or before
  // the layer that is not empty holds it.
  const auto after = std::upper_bound(chunks.begin(), chunks.end(), global_layer,
                                      [](int64_t layer, const PipelineChunk& c) { return layer < c.first_layer; });
  auto it = after;
  do {
    --it;
  } while (!it->holds(global_layer));
  return *it;
}

bool PipelineSplit::is_noop(int64_t global_layer) const {
  RF_CHECK(global_layer >= 0 && global_layer < num_layers, "global layer {} of {}", global_layer, num_layers);
  return std::binary_search(noop_layers.begin(), noop_layers.end(), global_layer);
}

std::optional<int64_t> PipelineSplit::hf_layer(int64_t global_layer) const {
  if (is_noop(global_layer)) return std::nullopt;
  const auto below = std::lower_bound(noop_layers.begin(), noop_layers.end(), global_layer) - noop_layers.begin();
  return global_layer - below;
}

int64_t PipelineSplit::global_layer(int64_t hf_layer) const {
  RF_CHECK(hf_layer >= 0 && hf_layer < num_hidden_layers, "HF layer {} of {}", hf_layer, num_hidden_layers);
  // Each noop layer at or below the running global index pushes it up by one.
  int64_t global = hf_layer;
  for (const int64_t noop : noop_layers) {
    if (noop > global) break;
    ++global;
  }
  return global;
}

std::string PipelineSplit::describe() const {
  std::string out = fmt::format("pipeline split: {} layers", num_layers);
  if (!noop_layers.empty()) out += fmt::format(" ({} + {} noop)", num_hidden_layers, noop_layers.size());
  if (num_mtp_layers > 0) out += fmt::format(" + {} MTP", num_mtp_layers);
  out += fmt::format(" on PP {} x VP {}", pp_size, vp_size);
  for (int64_t p = 0; p < pp_size; ++p) {
    std::vector<std::string> parts;
    for (int64_t v = 0; v < vp_size; ++v) parts.push_back(describe_chunk(chunk(p, v)));
    out += fmt::format("\n  pp {}: {}", p, fmt::join(parts, " "));
  }
  return out;
}

PipelineSplit make_pipeline_split(const PipelineSplitConfig& config, int64_t num_hidden_layers, int64_t pp_size,
                                  int64_t num_mtp_layers) {
  RF_CHECK(num_hidden_layers >= 1 && num_mtp_layers >= 0, "num_hidden_layers {}, num_mtp_layers {}", num_hidden_layers,
           num_mtp_layers);
  config.validate();
  if (pp_size < 1) throw ConfigError(kPpKey, fmt::format("must be >= 1, got {}", pp_size));
  PipelineSplit split;
  split.pp_size = pp_size;
  split.num_hidden_layers = num_hidden_layers;
  split.num_mtp_layers = num_mtp_layers;
  split.noop_layers = config.noop_layers;
  std::sort(split.noop_layers.begin(), split.noop_layers.end());
  const auto num_noop = static_cast<int64_t>(split.noop_layers.size());
  split.num_layers = num_hidden_layers + num_noop;
  if (!split.noop_layers.empty() && split.noop_layers.back() >= split.num_layers)
    throw ConfigError(kNoopKey, fmt::format("index {} out of range [0, {}) ({} layers + {} noop)",
                                            split.noop_layers.back(), split.num_layers, num_hidden_layers, num_noop));
  if (pp_size == 1) check_needs_pipeline(config);

  const StageCounts counts = config.pipeline_model_parallel_layout
                                 ? counts_from_layout(config, split.num_layers, num_noop, pp_size, num_mtp_layers)
                                 : counts_from_sizes(config, split.num_layers, num_noop, pp_size, num_mtp_layers);
  split.vp_size = counts.vp_size;
  const int64_t P = pp_size, V = split.vp_size;
  // Offsets are prefix sums in forward order (Megatron's get_transformer_layer_offset in closed form for
  // each mode; the test checks the two agree).
  int64_t next_layer = 0, next_mtp = 0;
  for (int64_t vstage = 0; vstage < P * V; ++vstage) {
    PipelineChunk chunk;
    chunk.pp_rank = vstage % P;
    chunk.vp_stage = vstage / P;
    chunk.vstage = vstage;
    chunk.first_layer = next_layer;
    chunk.num_layers = counts.decoders[vstage];
    for (const int64_t noop : split.noop_layers)
      if (chunk.holds(noop)) chunk.noop_layers.push_back(noop);
    chunk.first_mtp_layer = next_mtp;
    chunk.num_mtp_layers = counts.mtps[vstage];
    chunk.pre_process = vstage == 0;
    chunk.post_process = vstage == P * V - 1;
    next_layer = chunk.end_layer();
    next_mtp += chunk.num_mtp_layers;
    split.chunks.push_back(std::move(chunk));
  }
  RF_CHECK(next_layer == split.num_layers && next_mtp == num_mtp_layers, "split places {} of {} layers", next_layer,
           split.num_layers);
  return split;
}

}  // namespace rf::model
