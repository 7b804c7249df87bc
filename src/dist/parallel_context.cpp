#include "dist/parallel_context.h"

namespace rf::dist {

ParallelContext::ParallelContext(std::unique_ptr<ProcessGroup> tp, std::unique_ptr<ProcessGroup> dp,
                                 std::unique_ptr<ProcessGroup> pp, std::unique_ptr<ProcessGroup> cp,
                                 bool sequence_parallel)
    : tp_(std::move(tp)), dp_(std::move(dp)), pp_(std::move(pp)), cp_(std::move(cp)),
      sequence_parallel_(sequence_parallel) {}

ParallelContext ParallelContext::single_process() {
  return ParallelContext(std::make_unique<SingleProcessGroup>("tp"), std::make_unique<SingleProcessGroup>("dp"),
                         std::make_unique<SingleProcessGroup>("pp"), std::make_unique<SingleProcessGroup>("cp"),
                         false);
}

}  // namespace rf::dist
