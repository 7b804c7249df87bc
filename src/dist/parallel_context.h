// ParallelContext: the process groups of one role's engine (DESIGN §3), created once per role and
// passed by reference; nothing is global. Layers name their parallel boundary with the conjugate
// pairs in tp_comm.h and never call a collective directly.
//
// A context is a split of the role's ranks into every group of its RankLayout (tp, cp, dp, dp_cp, pp,
// mp, embedding, ep, etp, edp, ...: rank_layout.h), so the features that come later (CP, PP, EP) find
// their groups here already. Colocated roles each create their own context from the same ranks.
#pragma once

#include <array>
#include <memory>
#include <string_view>
#include <utility>

#include "dist/process_group.h"
#include "dist/rank_layout.h"

namespace rf::dist {

// How attention talks over the context-parallel group (Megatron's cp_comm_type, megatron.md §5.2-5.5): keys and
// values passed around a ring (p2p), all-gathered (all_gather), or heads traded for the sequence (a2a, Ulysses).
enum class CpCommType : uint8_t { p2p, all_gather, a2a };
constexpr std::array<std::pair<CpCommType, std::string_view>, 3> enum_names(CpCommType) {
  return {{{CpCommType::p2p, "p2p"}, {CpCommType::all_gather, "all_gather"}, {CpCommType::a2a, "a2a"}}};
}

class ParallelContext {
 public:
  // Every axis of size 1: the single-process run.
  static ParallelContext single_process();
  // Collective over `role`, the ranks of one role (the MPI world, or a group split from it): every rank
  // of it calls create, with the same layout, at the same point. Splits `role` into each group of
  // `layout` (MPI_Comm_split), with the ranks inside each group ordered as the layout lists them.
  static ParallelContext create(const RankLayout& layout, ProcessGroup& role, bool sequence_parallel,
                                CpCommType cp_comm_type = CpCommType::p2p);

  ProcessGroup& tp() const { return group(GroupKind::tp); }
  ProcessGroup& dp() const { return group(GroupKind::dp); }
  ProcessGroup& pp() const { return group(GroupKind::pp); }
  ProcessGroup& cp() const { return group(GroupKind::cp); }
  // The ranks holding replicas of this rank's weights, the data-parallel group with the context-parallel ranks
  // (Megatron's DATA_PARALLEL_GROUP_WITH_CP): gradients are summed, and the distributed optimizer shards, over it.
  // dp() is the data group: ranks with different micro-batches.
  ProcessGroup& dp_cp() const { return group(GroupKind::dp_cp); }
  // This rank's group of `kind`. Throws naming the kind when there is none: the embedding groups
  // hold only the first and last pipeline stage (ask in_group first).
  ProcessGroup& group(GroupKind kind) const;
  bool in_group(GroupKind kind) const { return groups_[size_t(kind)] != nullptr; }
  // All ranks of the role (grad-norm reduction with the distributed optimizer, the controller's calls).
  ProcessGroup& role() const { return *role_; }
  const RankLayout& layout() const { return layout_; }
  bool sequence_parallel() const { return sequence_parallel_; }
  CpCommType cp_comm_type() const { return cp_comm_type_; }

 private:
  using Groups = std::array<std::unique_ptr<ProcessGroup>, kNumGroupKinds>;
  ParallelContext(RankLayout layout, std::unique_ptr<ProcessGroup> role, Groups groups, bool sequence_parallel,
                  CpCommType cp_comm_type);

  RankLayout layout_;
  std::unique_ptr<ProcessGroup> role_;
  Groups groups_;
  bool sequence_parallel_ = false;
  CpCommType cp_comm_type_ = CpCommType::p2p;
};

}  // namespace rf::dist
