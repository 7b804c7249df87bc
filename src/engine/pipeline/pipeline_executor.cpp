#include "engine/pipeline/pipeline_executor.h"

#include <map>
#include <tuple>
#include <vector>

#include "core/error.h"

namespace rf::engine::pipeline {
namespace {

// A transfer's tensor on this stage, by what it is: (kind, microbatch, chunk).
using TransferKey = std::tuple<TransferTensor, int64_t, int64_t>;

// One channel per direction and kind: the k-th send on a channel pairs with the k-th receive (MPI keeps
// messages of one tag between two ranks in order), which is the pairing the table checker proves. The
// sender and the receiver name a wrapped transfer by different chunks, so the chunk cannot be in the tag.
int transfer_tag(const Transfer& t) { return t.tensor == TransferTensor::grad ? 1 : 0; }

class StageRun {
 public:
  StageRun(dist::ProcessGroup& pipeline, const StageWork& work, TensorAccount account)
      : pipeline_(pipeline), work_(work), account_(account) {}

  void run(const PipelineAction& action) {
    switch (action.kind) {
      case ActionKind::forward:
        compute(action, TransferTensor::activation, work_.forward);
        break;
      case ActionKind::backward:
        compute(action, TransferTensor::grad, work_.backward);
        break;
      case ActionKind::communicate:
        communicate(action);
        break;
      case ActionKind::param_gather:
        if (work_.param_gather) work_.param_gather(action.chunk);
        break;
      case ActionKind::enable_grad_sync:
        if (work_.enable_grad_sync) work_.enable_grad_sync(action.chunk);
        break;
      case ActionKind::launch_grad_sync:
        if (work_.launch_grad_sync) work_.launch_grad_sync(action.chunk);
        break;
    }
  }

  void check_drained() const {
    RF_CHECK(received_.empty() && to_send_.empty(),
             "pipeline stage {}: the schedule ended with {} received and {} unsent tensors", pipeline_.rank(),
             received_.size(), to_send_.size());
  }

 private:
  using Compute = std::function<TensorView(int64_t, int64_t, TensorView)>;

  // A forward consumes the activation received for it and yields one to send; a backward the same with grads.
  void compute(const PipelineAction& action, TransferTensor consumes, const Compute& fn) {
    const TransferKey in_key{consumes, action.microbatch, action.chunk};
    Tensor input;
    if (auto it = received_.find(in_key); it != received_.end()) {
      input = std::move(it->second);
      received_.erase(it);
    }
    const TensorView out = fn(action.microbatch, action.chunk, input.view());
    if (out.empty()) return;
    // The schedule's sends name the producing chunk: a forward's activation or a backward's gradient.
    to_send_.emplace(TransferKey{consumes, action.microbatch, action.chunk}, clone(out, out.dtype(), account_));
  }

  void communicate(const PipelineAction& action) {
    std::vector<dist::CommHandle> handles;
    std::vector<TransferKey> sent;
    for (const Transfer& t : action.transfers) {
      if (t.direction != TransferDirection::recv) continue;
      const TransferKey key{t.tensor, t.microbatch, t.chunk};
      Tensor buffer(work_.transfer_shape(t.microbatch), work_.transfer_dtype, account_);
      handles.push_back(pipeline_.irecv(buffer, int(t.peer), transfer_tag(t)));
      RF_CHECK(received_.emplace(key, std::move(buffer)).second, "pipeline stage {}: {} received twice",
               pipeline_.rank(), action_label(action));
    }
    for (const Transfer& t : action.transfers) {
      if (t.direction != TransferDirection::send) continue;
      const TransferKey key{t.tensor, t.microbatch, t.chunk};
      auto it = to_send_.find(key);
      RF_CHECK(it != to_send_.end(), "pipeline stage {}: {} sends a tensor no action produced", pipeline_.rank(),
               action_label(action));
      handles.push_back(pipeline_.isend(it->second, int(t.peer), transfer_tag(t)));
      sent.push_back(key);
    }
    for (dist::CommHandle& h : handles) h.wait();
    for (const TransferKey& key : sent) to_send_.erase(key);
  }

  dist::ProcessGroup& pipeline_;
  const StageWork& work_;
  TensorAccount account_;
  std::map<TransferKey, Tensor> received_;  // by the action that consumes it
  std::map<TransferKey, Tensor> to_send_;   // by the action that produced it
};

}  // namespace

void run_stage_actions(const StageActions& actions, dist::ProcessGroup& pipeline, const StageWork& work,
                       TensorAccount account) {
  StageRun run(pipeline, work, account);
  for (const PipelineAction& action : actions) run.run(action);
  run.check_drained();
}

}  // namespace rf::engine::pipeline
