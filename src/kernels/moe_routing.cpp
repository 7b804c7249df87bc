// moe_sort_by_expert: the expert-major stable order of a routing map (moe.h). Not per variant: the
// scan is a few integer compares per map entry, and one implementation keeps every variant's
// permutation identical by construction.
// Legend: N tokens, E experts, J routed rows.
#include <cstdint>

#include "core/error.h"
#include "kernels/moe.h"

namespace rf::kernels {

void moe_sort_by_expert(TensorView routing_map_NE, TensorView probs_NE, TensorView sorted_indices_J,
                        TensorView permuted_probs_J, TensorView tokens_per_expert_E) {
  const int64_t N = routing_map_NE.size(0), E = routing_map_NE.size(1), J = sorted_indices_J.size(0);
  const auto* map = static_cast<const uint8_t*>(routing_map_NE.raw());  // bool and u8 are both one byte
  const int64_t map_n = routing_map_NE.stride(0);
  int64_t* counts = tokens_per_expert_E.data<int64_t>();
  const int64_t count_e = tokens_per_expert_E.stride(0);
  int64_t routed = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t e = 0; e < E; ++e) routed += map[n * map_n + e] != 0;
  RF_CHECK(routed == J, "moe_permute: the routing map routes {} rows but permuted_JC and sorted_indices_J have {}",
           routed, J);
  const bool i64 = sorted_indices_J.dtype() == DType::i64;
  const int64_t index_j = sorted_indices_J.stride(0);
  const bool with_probs = !probs_NE.empty();
  int64_t j = 0;
  // Expert by expert, each column in token order: the stable expert-major order of §6.6.
  for (int64_t e = 0; e < E; ++e) {
    const int64_t first = j;
    for (int64_t n = 0; n < N; ++n) {
      if (map[n * map_n + e] == 0) continue;
      if (i64) {
        sorted_indices_J.data<int64_t>()[j * index_j] = n;
      } else {
        sorted_indices_J.data<int32_t>()[j * index_j] = int32_t(n);
      }
      if (with_probs)
        permuted_probs_J.data<float>()[j * permuted_probs_J.stride(0)] =
            probs_NE.data<float>()[n * probs_NE.stride(0) + e];
      ++j;
    }
    counts[e * count_e] = j - first;
  }
}

}  // namespace rf::kernels
