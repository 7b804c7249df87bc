#include "model/model_inputs.h"

#include "core/element_access.h"

namespace rf::model {

void check_token_ids(TensorView ids_N, int64_t limit, int64_t allowed_negative, const char* what) {
  RF_CHECK(ids_N.dtype() == DType::i32 || ids_N.dtype() == DType::i64, "{}: expected i32 or i64 ids, got {}", what,
           dtype_name(ids_N.dtype()));
  for (int64_t n = 0; n < ids_N.numel(); ++n) {
    const int64_t id = int64_t(load_f64(ids_N, n * ids_N.stride(0)));
    RF_CHECK((id >= 0 && id < limit) || id == allowed_negative, "{}[{}] = {} is outside [0, {})", what, n, id, limit);
  }
}

void make_causal_lm_targets(TensorView tokens_N, std::span<const int32_t> cu_seqlens, TensorView positions_N,
                            TensorView targets_N) {
  const int64_t N = tokens_N.numel();
  RF_CHECK(!cu_seqlens.empty() && cu_seqlens.front() == 0 && cu_seqlens.back() == N,
           "cu_seqlens must run from 0 to the token count {}", N);
  for (size_t doc = 0; doc + 1 < cu_seqlens.size(); ++doc) {
    const int64_t begin = cu_seqlens[doc], end = cu_seqlens[doc + 1];
    RF_CHECK(begin <= end, "cu_seqlens must be non-decreasing: {} then {}", begin, end);
    for (int64_t n = begin; n < end; ++n) {
      store_f64(positions_N, n, double(n - begin));
      store_f64(targets_N, n, n + 1 < end ? load_f64(tokens_N, n + 1) : -100.0);
    }
  }
}

ModelInputs PackedSequences::inputs(double temperature) const {
  ModelInputs in;
  in.batch = 1;
  in.seq_len = tokens_N.numel();
  in.tokens_N = tokens_N;
  in.positions_N = positions_N;
  in.targets_N = targets_N;
  in.cu_seqlens = cu_seqlens;
  in.temperature = temperature;
  in.padding_tokens = padding_tokens;
  return in;
}

PackedSequences pack_sequences(const std::vector<std::vector<int64_t>>& sequences) {
  PackedSequences packed;
  packed.cu_seqlens.push_back(0);
  int64_t N = 0;
  for (const auto& s : sequences) {
    N += int64_t(s.size());
    packed.cu_seqlens.push_back(int32_t(N));
  }
  packed.tokens_N = Tensor(Shape{N}, DType::i64);
  packed.positions_N = Tensor(Shape{N}, DType::i64);
  packed.targets_N = Tensor(Shape{N}, DType::i64);
  int64_t n = 0;
  for (const auto& s : sequences)
    for (int64_t token : s) packed.tokens_N.data<int64_t>()[n++] = token;
  make_causal_lm_targets(packed.tokens_N, packed.cu_seqlens, packed.positions_N, packed.targets_N);
  return packed;
}

}  // namespace rf::model
