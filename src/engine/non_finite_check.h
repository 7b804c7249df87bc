// What check_for_nan_in_loss_and_grad (engine_config.h) looks at in one optimizer step, the report that
// names what it found, and the save-time refusal of non-finite weights.
//
// Cost on the normal path: a test of each micro-batch's loss (a scalar the step computes anyway), of its
// outputs and their gradients (N values each) and of the gradient its backward brought down to the
// embedding (N x C values, against the backward's N x parameters work), and one scalar all-reduce per
// optimizer step. A gradient holds a NaN or Inf exactly when its pre-clip norm is not finite (an f64 sum
// of squares of f32 values, which cannot overflow), and that norm is computed for clipping anyway. Only a
// step that failed is searched for where it failed.
// Not here: what the step does about it (TrainEngine::optimizer_step, nan_policy).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dist/parallel_context.h"
#include "model/model_inputs.h"
#include "model/param_layout.h"
#include "optim/bucket_plan.h"

namespace rf::engine {

// A micro-batch of this rank's step that held a NaN or Inf.
struct MicroBatchFinding {
  int64_t micro_batch = 0;  // among the micro-batches this rank ran (its DP share), from 0
  int64_t num_micro_batches = 0;
  double loss = 0;
  // The first model output, or loss gradient, holding a NaN or Inf ("log_probs at token 7 (-inf)"), or empty.
  std::string first_output;
};

// What this rank's micro-batches held since the last optimizer step: the first whose loss was not finite
// (what the check acts on), and the first whose loss was finite but whose outputs, the loss's gradients
// with respect to them, or the gradient its backward brought down were not (no verdict of its own: a loss
// may mask such a token out; named as the lead when a parameter's gradient turns out non-finite).
struct MicroBatchFindings {
  std::optional<MicroBatchFinding> loss, output;

  // Records one micro-batch after its backward: its loss, first_non_finite_output of it (taken before the
  // backward, which reuses those buffers), and the gradient its backward brought down to the embedding
  // (N x C values, against the backward's N x parameters work).
  void note(int64_t micro_batch, int64_t num_micro_batches, double loss_value, std::string first_output,
            TensorView embedding_output_grad);
  bool losses_finite() const { return !loss; }
  void clear() { loss.reset(), output.reset(); }
};

// "log_probs at token 7 (-inf)" for the first of a micro-batch's outputs (log_probs, entropy, values), then
// of the loss's gradients with respect to them, holding a NaN or Inf (N values each); empty when none does.
std::string first_non_finite_output(const model::ModelOutputs& outputs, const model::OutputGrads& grads);

// A parameter's values on this rank (its TP shard, or its fragment of the DP shard): `entry` indexes the
// layout's entries.
struct EntryPart {
  size_t entry = 0;
  TensorView values;
};
// Every parameter of `flat` (laid out by `layout`).
std::vector<EntryPart> entry_parts(const model::ParamLayout& layout, TensorView flat);
// This rank's fragments of the plan, in `flat` (the gradient buffer) or in `shard` (optimizer state).
enum class FragmentIn : uint8_t { flat, shard };
std::vector<EntryPart> fragment_parts(const optim::BucketPlan& plan, TensorView values, FragmentIn where);

// Collective over `group`: the HF name of the first parameter whose part holds a NaN or Inf on any rank, the
// same on every rank, in the whole model's layout order or in backward order (the reverse), whichever pipeline
// stage holds it. `parts` index `layout`'s entries.
enum class EntryOrder : uint8_t { layout, backward };
std::optional<std::string> non_finite_parameter(std::span<const EntryPart> parts, const model::ParamLayout& layout,
                                                dist::ProcessGroup& group, EntryOrder order);

// Collective over the role's ranks: one text, the same on every rank, naming what the step found: the
// first micro-batch whose loss was not finite (else the first whose outputs were not), with its DP rank,
// index and first non-finite output; the gradient norm; the first parameter (HF name, layout order) whose
// reduced gradient holds a NaN or Inf, first in backward order (the last in the layout): where a NaN born
// in a backward entered the parameters.
std::string describe_non_finite_step(const MicroBatchFindings& findings, double grad_norm,
                                     std::span<const EntryPart> grads, const model::ParamLayout& layout,
                                     const dist::ParallelContext& parallel);

// Collective over `group`: throws an Error before anything is written when a part holds a NaN or Inf on
// any rank, naming `what` is being saved and the tensor (`prefix` + its HF name).
void refuse_non_finite(std::span<const EntryPart> parts, const model::ParamLayout& layout, const std::string& prefix,
                       dist::ProcessGroup& group, const std::string& what);

}  // namespace rf::engine
