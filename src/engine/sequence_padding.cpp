#include "engine/sequence_padding.h"

#include "core/element_access.h"

namespace rf::engine {

model::PackedSequences pad_to_multiple(const model::ModelInputs& in, int64_t multiple) {
  RF_CHECK(in.batch == 1, "sequence padding takes one packed row, got {} rows", in.batch);
  RF_CHECK(multiple >= 1, "sequence padding multiple must be >= 1, got {}", multiple);
  const int64_t N = in.seq_len, padded = (N + multiple - 1) / multiple * multiple;
  model::PackedSequences out{Tensor({padded}, DType::i64), Tensor({padded}, DType::i64), Tensor({padded}, DType::i64),
                             {}};
  for (int64_t n = 0; n < padded; ++n) {
    const bool real = n < N;
    out.tokens_N.data<int64_t>()[n] = real ? int64_t(load_f64(in.tokens_N, n * in.tokens_N.stride(0))) : 0;
    out.positions_N.data<int64_t>()[n] = real ? int64_t(load_f64(in.positions_N, n * in.positions_N.stride(0))) : n - N;
    out.targets_N.data<int64_t>()[n] = real ? int64_t(load_f64(in.targets_N, n * in.targets_N.stride(0))) : -100;
  }
  if (in.cu_seqlens.empty())
    out.cu_seqlens = {0, int32_t(N)};
  else
    out.cu_seqlens.assign(in.cu_seqlens.begin(), in.cu_seqlens.end());
  if (padded > N) out.cu_seqlens.push_back(int32_t(padded));
  out.padding_tokens = padded - N;
  return out;
}

}  // namespace rf::engine
