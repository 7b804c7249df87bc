// RankLayout: where each rank of one role sits on the parallel axes, and every process group Megatron
// builds from that (megatron.md §1), as lists of ranks. A pure function of the sizes and the order string:
// no MPI here (ParallelContext::create turns the lists into communicators).
//
// The rank numbering (Megatron's RankGenerator). The order string names the axes from fastest to slowest
// (default "tp-cp-ep-dp-pp": TP neighbours are adjacent ranks, PP the slowest). Over the ordered axes
// a_0, a_1, ... with sizes n_0, n_1, ... a rank is the mixed-radix number
//     rank = sum_i idx_i * stride_i,   stride_0 = 1,   stride_{i+1} = stride_i * n_i,
// e.g. rank = tp + TP*(cp + CP*(ep + EP*(dp + DP*pp))) for the default order.
// Two grids share the world and the order string:
//   dense:  tp=TP,  cp=CP, ep=1,  dp=DP  = W/(TP*CP*PP),   pp=PP
//   expert: tp=ETP, cp=1,  ep=EP, dp=EDP = W/(ETP*EP*PP),  pp=PP   (CP ranks fold into EDP)
// A group over a set of axes S holds the ranks that differ only in the axes of S. Member j of a group
// sits at the digits of j over S's sizes (in order-string order, the earliest axis fastest); group g at
// the digits of g over the other axes (also earliest fastest). So "dp-cp" groups list cp fastest, because
// cp precedes dp in the order, and the g-th group of every kind is numbered the same way Megatron numbers
// it; ranks listed first get the low ranks inside the group's communicator.
// The embedding group of a pipeline is its first and last stage ([first] when PP = 1); the position-
// embedding group its first stage. Ranks of middle stages are in no group of these two kinds.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace rf::dist {

// The tokens of the order string.
enum class Axis : uint8_t { tp, cp, ep, dp, pp };
inline constexpr int kNumAxes = 5;
std::string_view axis_name(Axis axis);

// The sizes a role's engine is asked for, under the names Megatron and verl give them. The data-parallel
// sizes are derived: DP = W/(TP*CP*PP), EDP = W/(ETP*EP*PP).
struct ParallelDims {
  int world_size = 1;
  int tensor_model_parallel_size = 1;
  int context_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  int expert_model_parallel_size = 1;
  int expert_tensor_parallel_size = 0;  // 0: the same as tensor_model_parallel_size (Megatron's None)
  std::string order = "tp-cp-ep-dp-pp";

  // Throws ConfigError naming the key: sizes < 1, sizes whose product does not divide the world, an
  // order string with an unknown or repeated token or without an axis whose size is > 1.
  void validate() const;
  int expert_tensor_size() const;  // expert_tensor_parallel_size with 0 resolved
};

// Megatron's process groups (parallel_state.py), by the name used for them here.
enum class GroupKind : uint8_t {
  tp,                  // TENSOR_MODEL_PARALLEL_GROUP            dense "tp"
  cp,                  // CONTEXT_PARALLEL_GROUP                 dense "cp"
  dp,                  // DATA_PARALLEL_GROUP                    dense "dp": pure replicas (data split)
  dp_cp,               // DATA_PARALLEL_GROUP_WITH_CP            dense "dp-cp": gradient reduction, DistOpt shards
  pp,                  // PIPELINE_MODEL_PARALLEL_GROUP          dense "pp", stage order
  mp,                  // MODEL_PARALLEL_GROUP                   dense "tp-pp": grad norm without DistOpt
  tp_cp,               // TENSOR_AND_CONTEXT_PARALLEL_GROUP      dense "tp-cp"
  tp_dp,               // TENSOR_AND_DATA_PARALLEL_GROUP         dense "tp-dp"
  tp_dp_cp,            // TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP dense "tp-dp-cp"
  embedding,           // EMBEDDING_GROUP                        first + last stage of each pipeline
  position_embedding,  // POSITION_EMBEDDING_GROUP               first stage of each pipeline
  ep,                  // EXPERT_MODEL_PARALLEL_GROUP            expert "ep": token all-to-all
  etp,                 // EXPERT_TENSOR_PARALLEL_GROUP           expert "tp"
  edp,                 // EXPERT_DATA_PARALLEL_GROUP             expert "dp": expert gradient reduction
  tp_ep,               // EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP expert "tp-ep"
  tp_ep_pp,            // EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP expert "tp-ep-pp"
};
inline constexpr int kNumGroupKinds = 16;
inline constexpr std::array<GroupKind, kNumGroupKinds> kAllGroupKinds = {
    GroupKind::tp,    GroupKind::cp,       GroupKind::dp,        GroupKind::dp_cp,
    GroupKind::pp,    GroupKind::mp,       GroupKind::tp_cp,     GroupKind::tp_dp,
    GroupKind::tp_dp_cp, GroupKind::embedding, GroupKind::position_embedding, GroupKind::ep,
    GroupKind::etp,   GroupKind::edp,      GroupKind::tp_ep,     GroupKind::tp_ep_pp};
std::string_view group_name(GroupKind kind);

// Where one rank sits among the groups of one kind: group number `color` (the MPI_Comm_split colour),
// position `index` in it (the split key, so it is also the rank inside the communicator), and its ranks.
// color and index are -1 when the rank is in no group of that kind (embedding groups on middle stages).
struct GroupMembership {
  int color = -1;
  int index = -1;
  std::vector<int> ranks;
  bool member() const { return color >= 0; }
};

class RankLayout {
 public:
  // Validates `dims` (ParallelDims::validate) and Megatron's two cross-grid rules: with PP > 1 and an
  // order that does not end in pp, EDP must equal DP, and both grids must give the same pipelines.
  explicit RankLayout(ParallelDims dims);

  const ParallelDims& dims() const { return dims_; }
  int world_size() const { return dims_.world_size; }
  int data_parallel_size() const { return dense_.sizes[size_t(Axis::dp)]; }
  int expert_data_parallel_size() const { return expert_.sizes[size_t(Axis::dp)]; }

  // Every group of `kind`, numbered and listed as Megatron lists them.
  std::vector<std::vector<int>> groups(GroupKind kind) const;
  GroupMembership membership(GroupKind kind, int rank) const;
  // "rank 5 tp=1 dp=0 pp=1": the rank and its dense coordinates on every axis of size > 1, for messages.
  std::string label(int rank) const;

 private:
  // One numbering of the world: the axes in order (the order string's, then any it leaves out, all of
  // size 1) and the size of each axis.
  struct Grid {
    std::vector<Axis> order;
    std::array<int, kNumAxes> sizes{};
    Grid(const std::vector<Axis>& named_order, std::array<int, kNumAxes> axis_sizes);
    // All groups over `axes` (any order; it does not change the result).
    std::vector<std::vector<int>> groups(std::initializer_list<Axis> axes) const;
  };

  ParallelDims dims_;
  Grid dense_, expert_;
};

}  // namespace rf::dist
