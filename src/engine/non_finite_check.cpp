#include "engine/non_finite_check.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/element_access.h"
#include "core/error.h"
#include "core/finite_values.h"
#include "dist/text_collectives.h"

namespace rf::engine {

namespace {

// A value as the messages show it: "nan" whatever its sign bit, else 6 significant digits.
std::string shown(double value) { return std::isnan(value) ? "nan" : fmt::format("{:.6g}", value); }

// The text of a finding, the same on every rank: the first rank (in the role's order) with one tells the
// others. Empty when no rank has one.
std::string shared_text(const std::string& local, const dist::ParallelContext& parallel) {
  for (const std::string& text : dist::all_gather_texts(parallel.role(), local))
    if (!text.empty()) return text;
  return "";
}

std::string where(const MicroBatchFinding& f, const dist::ParallelContext& parallel) {
  return fmt::format("micro-batch {} of {} on DP rank {}", f.micro_batch, f.num_micro_batches, parallel.dp().rank());
}

}  // namespace

std::string first_non_finite_output(const model::ModelOutputs& outputs, const model::OutputGrads& grads) {
  for (const auto& [name, values] :
       {std::pair{"log_probs", outputs.logp_N}, std::pair{"entropy", outputs.entropy_N},
        std::pair{"values", outputs.values_N}, std::pair{"the loss's gradient for log_probs", grads.dlogp_N},
        std::pair{"the loss's gradient for entropy", grads.dentropy_N},
        std::pair{"the loss's gradient for values", grads.dvalues_N}})
    if (const std::optional<int64_t> token = first_non_finite(values))
      return fmt::format("{} at token {} ({})", name, *token, shown(load_f64(values.slice(0, *token, 1), 0)));
  return "";
}

void MicroBatchFindings::note(int64_t micro_batch, int64_t num_micro_batches, double loss_value,
                              std::string first_output, TensorView embedding_output_grad) {
  const bool loss_finite = std::isfinite(loss_value);
  if ((loss_finite && output) || (!loss_finite && loss)) return;  // the first of each kind is kept
  if (first_output.empty() && !all_finite(embedding_output_grad))
    first_output = "a NaN or Inf born in its backward (in the gradient reaching the embedding)";
  if (loss_finite && first_output.empty()) return;
  (loss_finite ? output : loss) =
      MicroBatchFinding{micro_batch, num_micro_batches, loss_value, std::move(first_output)};
}

std::vector<EntryPart> entry_parts(const model::ParamLayout& layout, TensorView flat) {
  std::vector<EntryPart> parts;
  const std::vector<model::ParamEntry>& entries = layout.entries();
  for (size_t i = 0; i < entries.size(); ++i)
    parts.push_back({i, flat.slice(0, entries[i].offset, entries[i].shape.numel())});
  return parts;
}

std::vector<EntryPart> fragment_parts(const optim::BucketPlan& plan, TensorView values, FragmentIn where) {
  std::vector<EntryPart> parts;
  for (const optim::ShardFragment& f : plan.fragments())
    parts.push_back({f.entry, values.slice(0, where == FragmentIn::flat ? f.flat_offset : f.shard_offset, f.numel)});
  return parts;
}

std::optional<std::string> non_finite_parameter(std::span<const EntryPart> parts, const model::ParamLayout& layout,
                                                dist::ProcessGroup& group, EntryOrder order) {
  // Ranked by the whole model's order (ParamEntry::stream), which every pipeline stage shares; -1: none.
  double found = -1;
  for (const EntryPart& part : parts) {
    const double stream = double(layout.entries()[part.entry].stream);
    const bool better = found < 0 || (order == EntryOrder::layout ? stream < found : stream > found);
    if (better && !all_finite(part.values)) found = stream;
  }
  if (order == EntryOrder::layout) {
    constexpr double kNone = std::numeric_limits<double>::max();
    found = group.all_reduce_scalar(found < 0 ? kNone : found, dist::ReduceOp::min);
    if (found == kNone) return std::nullopt;
  } else {
    found = group.all_reduce_scalar(found, dist::ReduceOp::max);
    if (found < 0) return std::nullopt;
  }
  // The ranks that hold it name it (another pipeline stage may be the one).
  std::string name;
  for (const model::ParamEntry& e : layout.entries())
    if (double(e.stream) == found) name = e.name;
  for (const std::string& named : dist::all_gather_texts(group, name))
    if (!named.empty()) return named;
  return std::nullopt;
}

std::string describe_non_finite_step(const MicroBatchFindings& findings, double grad_norm,
                                     std::span<const EntryPart> grads, const model::ParamLayout& layout,
                                     const dist::ParallelContext& parallel) {
  std::string local_loss, local_lead;
  if (const auto& f = findings.loss)
    local_loss = fmt::format("the loss of {} is {}{}", where(*f, parallel), shown(f->loss),
                             f->first_output.empty() ? "" : " (first non-finite: " + f->first_output + ")");
  if (const auto& f = findings.output)
    local_lead = fmt::format("every loss is finite, but {} (loss {}) has {}", where(*f, parallel), shown(f->loss),
                             f->first_output);
  std::string found = shared_text(local_loss, parallel);
  if (found.empty()) found = shared_text(local_lead, parallel);
  if (found.empty()) found = "every loss, output and backward of the micro-batches is finite";
  found += fmt::format("; gradient norm {}", shown(grad_norm));
  if (const std::optional<std::string> name = non_finite_parameter(grads, layout, parallel.role(), EntryOrder::backward))
    found += fmt::format(", first non-finite gradient in backward order: {}", *name);
  return found;
}

void refuse_non_finite(std::span<const EntryPart> parts, const model::ParamLayout& layout, const std::string& prefix,
                       dist::ProcessGroup& group, const std::string& what) {
  const std::optional<std::string> name = non_finite_parameter(parts, layout, group, EntryOrder::layout);
  if (!name) return;
  throw Error(fmt::format("[{}] {}: refused: {}{} holds NaN or Inf values, and no checkpoint or export of "
                          "non-finite weights is written",
                          core::rank_label(), what, prefix, *name));
}

}  // namespace rf::engine
