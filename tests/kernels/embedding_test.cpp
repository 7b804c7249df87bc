// Embedding tests: every cpu variant against the ref (f32 and bf16, i32 and i64 ids, ids outside
// the held vocab range on both sides, strided views with sentinels, dtable +=), two vocab shards
// adding up to the whole table, a backward independent of the thread count, finite differences of
// the f64 ref backward, and argument errors.
// Legend: N tokens, C hidden, V vocab rows held here.
#include <omp.h>

#include <cstring>

#include "core/element_access.h"
#include "kernels/fast_variants.h"
#include "kernels/ref/ref_kernels.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using testing::expect_close;
using testing::guarded_copy;
using testing::GuardedTensor;
using testing::Layout;
using testing::random_ids;
using testing::random_tensor;

struct EmbeddingCase {
  int64_t N, V, C, vocab_start;
  DType dtype, id_dtype;
  Layout layout;
};

void check_against_ref(const EmbeddingCase& k) {
  const std::string name = fmt::format("N={} V={} C={} vocab_start={} {} ids {}", k.N, k.V, k.C, k.vocab_start,
                                       dtype_name(k.dtype), dtype_name(k.id_dtype));
  const EmbeddingParams params{.vocab_start = k.vocab_start};
  // Ids reach 3 past the held rows; with vocab_start > 0 some fall below them too.
  const Tensor ids = random_ids({k.N}, k.id_dtype, 1, k.vocab_start + k.V + 3);
  const Tensor table = random_tensor({k.V, k.C}, k.dtype, 2);
  const Tensor dout = random_tensor({k.N, k.C}, k.dtype, 3);
  const Tensor dtable_before = random_tensor({k.V, k.C}, DType::f32, 4);
  const Tensor out_ref({k.N, k.C}, k.dtype);
  ref::embedding_forward(params, ids, table, out_ref);
  const Tensor dtable_ref = clone(dtable_before, DType::f32);
  ref::embedding_backward(params, ids, dout, dtable_ref);

  for (const KernelTable* kernels : fast_tables()) {
    const std::string what = fmt::format("{} {}", kernel_variant_name(kernels->variant), name);
    const GuardedTensor table_g = guarded_copy(table, k.layout);
    const GuardedTensor out_g({k.N, k.C}, k.dtype, k.layout);
    kernels->embedding_forward(params, ids, table_g, out_g);
    expect_close(out_g, out_ref, 0, 0, what + " out");  // a copy: exact
    out_g.expect_sentinels_intact(what + " out");

    // Both add in token order, each sum rounded to f32: the same bits.
    const GuardedTensor dout_g = guarded_copy(dout, k.layout);
    const GuardedTensor dtable_g = guarded_copy(dtable_before, k.layout);
    kernels->embedding_backward(params, ids, dout_g, dtable_g);
    expect_close(dtable_g, dtable_ref, 0, 0, what + " dtable");
    dtable_g.expect_sentinels_intact(what + " dtable");
  }
}

TEST(Embedding, CpuMatchesRef) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    check_against_ref({1, 5, 7, 0, dtype, DType::i32, Layout::contiguous});
    check_against_ref({13, 11, 37, 4, dtype, DType::i64, Layout::strided});
    check_against_ref({50, 17, 300, 2, dtype, DType::i32, Layout::strided});  // two column tiles
    check_against_ref({200, 9, 130, 0, dtype, DType::i64, Layout::contiguous});  // multi-threaded
  }
}

// Rows [0, 4) on one shard and [4, 10) on the other: the outputs add up to the whole table's, and
// each shard's gradient is its slice of the whole table's.
TEST(Embedding, VocabShardsAddUpToTheWholeTable) {
  const int64_t N = 20, V = 10, C = 6, split = 4;
  const Tensor ids = random_ids({N}, DType::i64, 61, V);
  const Tensor table = random_tensor({V, C}, DType::f32, 62);
  const Tensor dout = random_tensor({N, C}, DType::f32, 63);
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* kernels : tables) {
    const std::string what(kernel_variant_name(kernels->variant));
    const Tensor out_full({N, C}, DType::f32), out_a({N, C}, DType::f32), out_b({N, C}, DType::f32);
    kernels->embedding_forward({}, ids, table, out_full);
    kernels->embedding_forward({.vocab_start = 0}, ids, table.view().slice(0, 0, split), out_a);
    kernels->embedding_forward({.vocab_start = split}, ids, table.view().slice(0, split, V - split), out_b);
    Tensor out_sum({N, C}, DType::f32);
    for (int64_t i = 0; i < N * C; ++i)
      out_sum.data<float>()[i] = out_a.data<float>()[i] + out_b.data<float>()[i];
    expect_close(out_sum, out_full, 0, 0, what + " out");

    const Tensor dtable_full({V, C}, DType::f32);
    const Tensor dtable_a({split, C}, DType::f32), dtable_b({V - split, C}, DType::f32);
    kernels->embedding_backward({}, ids, dout, dtable_full);
    kernels->embedding_backward({.vocab_start = 0}, ids, dout, dtable_a);
    kernels->embedding_backward({.vocab_start = split}, ids, dout, dtable_b);
    expect_close(dtable_a, dtable_full.view().slice(0, 0, split), 0, 0, what + " dtable shard a");
    expect_close(dtable_b, dtable_full.view().slice(0, split, V - split), 0, 0, what + " dtable shard b");
  }
}

// Many tokens share few ids: the scatter must give the same bits for any number of threads.
TEST(Embedding, CpuBackwardIsIndependentOfThreadCount) {
  const int64_t N = 400, V = 5, C = 300;
  const Tensor ids = random_ids({N}, DType::i32, 71, V);
  const Tensor dout = random_tensor({N, C}, DType::bf16, 72);
  const int threads_before = omp_get_max_threads();
  for (const KernelTable* kernels : fast_tables()) {
    std::vector<Tensor> dtables;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      dtables.emplace_back(Shape{V, C}, DType::f32);
      kernels->embedding_backward({}, ids, dout, dtables.back());
    }
    for (size_t i = 1; i < dtables.size(); ++i)
      EXPECT_EQ(std::memcmp(dtables[0].data<float>(), dtables[i].data<float>(), dtables[0].nbytes()), 0)
          << kernel_variant_name(kernels->variant);
  }
  omp_set_num_threads(threads_before);
}

TEST(Embedding, RefBackwardMatchesFiniteDifferences) {
  // Rows hold ids 1..3: ids 0 and 7 are someone else's and must get no gradient.
  const int64_t N = 6, V = 3, C = 2;
  const EmbeddingParams params{.vocab_start = 1};
  Tensor ids({N}, DType::i32);
  const int32_t id_values[N] = {2, 0, 2, 7, 3, 1};
  for (int64_t n = 0; n < N; ++n) ids.at<int32_t>({n}) = id_values[n];
  const Tensor table = random_tensor({V, C}, DType::f64, 81);
  const Tensor r = random_tensor({N, C}, DType::f64, 82);
  const Tensor out({N, C}, DType::f64);
  auto loss = [&] {
    ref::embedding_forward(params, ids, table, out);
    double sum = 0;
    for (int64_t i = 0; i < out.numel(); ++i) sum += out.data<double>()[i] * r.data<double>()[i];
    return sum;
  };
  const Tensor dtable({V, C}, DType::f64);
  ref::embedding_backward(params, ids, r, dtable);
  testing::expect_gradient_matches_fd(loss, table, dtable, "embedding dtable");
}

TEST(Embedding, RejectsBadShapesAndDtypes) {
  const Tensor ids({3}, DType::i32), ids_f32({3}, DType::f32);
  const Tensor table({5, 4}, DType::f32), out({3, 4}, DType::f32), out_wide({3, 5}, DType::f32);
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* kernels : tables) {
    EXPECT_THROW(kernels->embedding_forward({}, ids, table, out_wide), Error);
    EXPECT_THROW(kernels->embedding_forward({}, ids_f32, table, out), Error);
  }
}

}  // namespace
}  // namespace rf::kernels
