// ParallelContext: the process groups of one role's engine (DESIGN §3), created once per role and
// passed by reference; nothing is global. Layers name their parallel boundary with the conjugate
// pairs in tp_comm.h and never call a collective directly.
#pragma once

#include <memory>

#include "dist/process_group.h"

namespace rf::dist {

class ParallelContext {
 public:
  // Every axis of size 1: the single-process run.
  static ParallelContext single_process();

  ProcessGroup& tp() const { return *tp_; }
  ProcessGroup& dp() const { return *dp_; }
  ProcessGroup& pp() const { return *pp_; }
  ProcessGroup& cp() const { return *cp_; }
  bool sequence_parallel() const { return sequence_parallel_; }

  ParallelContext(std::unique_ptr<ProcessGroup> tp, std::unique_ptr<ProcessGroup> dp,
                  std::unique_ptr<ProcessGroup> pp, std::unique_ptr<ProcessGroup> cp, bool sequence_parallel);

 private:
  std::unique_ptr<ProcessGroup> tp_, dp_, pp_, cp_;
  bool sequence_parallel_ = false;
};

}  // namespace rf::dist
