// MoE kernel tests (moe.h): permute / unpermute / gather and the grouped GEMM of every cpu variant
// (the grouped GEMM on every GEMM engine) against the ref, f32 and bf16, odd sizes, empty experts,
// top-k duplication and tokens routed nowhere; the identity invariant of spec §6.6; finite differences
// of the f64 ref backward; bitwise results at 1, 2 and 3 threads; argument errors naming the argument.
// Legend: N tokens, C hidden, E experts, J routed rows, I in-features, O out-features.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/element_access.h"
#include "core/tensor.h"
#include "kernels/fast_variants.h"
#include "kernels/ref/ref_kernels.h"
#include "support/test_support.h"

namespace rf::kernels {
namespace {

using testing::expect_close;
using testing::expect_error_containing;
using testing::guarded_copy;
using testing::GuardedTensor;
using testing::Layout;
using testing::random_tensor;

bool bitwise_equal(TensorView a, TensorView b) {
  bool same = a.shape() == b.shape() && a.dtype() == b.dtype();
  if (!same) return false;
  for_each_offset(a.shape(), a.strides(), b.strides(), [&](int64_t at_a, int64_t at_b) {
    same = same && std::memcmp(static_cast<std::byte*>(a.raw()) + at_a * int64_t(a.element_size()),
                               static_cast<std::byte*>(b.raw()) + at_b * int64_t(b.element_size()),
                               a.element_size()) == 0;
  });
  return same;
}

// A routing: each token goes to `topk` distinct experts, except every `skip`-th token (routed nowhere,
// as when a dispatcher keeps only its local experts) and the experts in `unused` (never chosen).
struct Routing {
  Tensor map_NE, probs_NE;
  int64_t num_routed = 0;
};

Routing make_routing(int64_t N, int64_t E, int64_t topk, uint64_t seed, int64_t skip = 0,
                     std::vector<int64_t> unused = {}, DType map_dtype = DType::boolean) {
  Routing r{Tensor({N, E}, map_dtype), random_tensor({N, E}, DType::f32, seed, 0.0, 1.0)};
  std::mt19937_64 rng(seed);
  std::vector<int64_t> experts;
  for (int64_t e = 0; e < E; ++e)
    if (std::find(unused.begin(), unused.end(), e) == unused.end()) experts.push_back(e);
  for (int64_t n = 0; n < N; ++n) {
    if (skip > 0 && n % skip == skip - 1) continue;
    std::shuffle(experts.begin(), experts.end(), rng);
    for (int64_t i = 0; i < std::min<int64_t>(topk, int64_t(experts.size())); ++i) {
      store_f64(r.map_NE, n * E + experts[size_t(i)], 1.0);
      ++r.num_routed;
    }
  }
  return r;
}

struct Permuted {
  Tensor rows_JC, probs_J, sorted_indices_J, tokens_per_expert_E;
};

Permuted permute(const KernelTable& table, TensorView tokens_NC, const Routing& r, DType index_dtype = DType::i64) {
  const int64_t J = r.num_routed, E = r.map_NE.size(1);
  Permuted p{Tensor({J, tokens_NC.size(1)}, tokens_NC.dtype()), Tensor({J}, DType::f32), Tensor({J}, index_dtype),
             Tensor({E}, DType::i64)};
  table.moe_permute(tokens_NC, r.map_NE, r.probs_NE, p.rows_JC, p.probs_J, p.sorted_indices_J, p.tokens_per_expert_E);
  return p;
}

Tensor bf16_representable(Shape shape, uint64_t seed) {
  const Tensor x = random_tensor(shape, DType::bf16, seed);
  Tensor out(shape, DType::f32);
  copy_convert(x, out);
  return out;
}

// The order of §6.6 on a map small enough to write out: expert 0's tokens ascending, then expert 1's, ...
TEST(MoePermute, ExpertMajorStableOrder) {
  // token:  0      1      2      3      4
  // expert: {0,2}  {}     {1,2}  {0}    {0,2}
  const bool map[5][3] = {{1, 0, 1}, {0, 0, 0}, {0, 1, 1}, {1, 0, 0}, {1, 0, 1}};
  Routing r{Tensor({5, 3}, DType::u8), Tensor({5, 3}, DType::f32), 7};
  for (int64_t n = 0; n < 5; ++n)
    for (int64_t e = 0; e < 3; ++e) {
      r.map_NE.at<uint8_t>({n, e}) = map[n][e];
      r.probs_NE.at<float>({n, e}) = float(10 * n + e);
    }
  const Tensor tokens = random_tensor({5, 7}, DType::f32, 1);
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    for (DType index_dtype : {DType::i32, DType::i64}) {
      const Permuted p = permute(*table, tokens, r, index_dtype);
      const int64_t expected_index[7] = {0, 3, 4, 2, 0, 2, 4};
      const int64_t expected_counts[3] = {3, 1, 3};
      for (int64_t j = 0; j < 7; ++j) {
        const int64_t n = int64_t(load_f64(p.sorted_indices_J, j));
        EXPECT_EQ(n, expected_index[j]) << kernel_variant_name(table->variant) << " j=" << j;
        const int64_t e = j < 3 ? 0 : j < 4 ? 1 : 2;
        EXPECT_EQ(p.probs_J.data<float>()[j], float(10 * n + e)) << j;
        EXPECT_TRUE(bitwise_equal(p.rows_JC.view().select(0, j), tokens.view().select(0, n))) << j;
      }
      for (int64_t e = 0; e < 3; ++e) EXPECT_EQ(p.tokens_per_expert_E.data<int64_t>()[e], expected_counts[e]);
      // Without probs: the same order and rows.
      const Tensor rows({7, 7}, DType::f32), indices({7}, index_dtype), counts({3}, DType::i64);
      table->moe_permute(tokens, r.map_NE, TensorView(), rows, TensorView(), indices, counts);
      EXPECT_TRUE(bitwise_equal(rows, p.rows_JC) && bitwise_equal(indices, p.sorted_indices_J) &&
                  bitwise_equal(counts, p.tokens_per_expert_E))
          << kernel_variant_name(table->variant) << " without probs";
    }
  }
}

struct Case {
  int64_t N, E, C, topk, skip;
  std::vector<int64_t> unused;
};
const Case kCases[] = {{1, 1, 7, 1, 0, {}},       {5, 3, 7, 2, 3, {}},        {13, 8, 33, 2, 4, {1, 6}},
                       {33, 6, 129, 4, 0, {0}},  {64, 16, 260, 3, 5, {15}}};

// Gather is a copy: bitwise equal to ref. Unpermute sums in f32 against ref's f64: the sums of up to
// topk terms differ by a few f32 ulps, by one bf16 rounding in bf16.
TEST(MoePermute, CpuMatchesRef) {
  int seed = 100;
  for (DType dtype : {DType::f32, DType::bf16}) {
    const double rtol = dtype == DType::bf16 ? 8e-3 : 1e-6, atol = 1e-6;
    for (const Case& c : kCases) {
      const Routing r = make_routing(c.N, c.E, c.topk, uint64_t(++seed), c.skip, c.unused);
      const Tensor tokens = random_tensor({c.N, c.C}, dtype, uint64_t(++seed));
      const DType index_dtype = c.N % 2 == 1 ? DType::i32 : DType::i64;
      const Permuted expected = permute(ref::table(), tokens, r, index_dtype);
      const Tensor y = random_tensor({r.num_routed, c.C}, dtype, uint64_t(++seed));
      const Tensor out_init = random_tensor({c.N, c.C}, dtype, uint64_t(++seed));
      Tensor out_ref({c.N, c.C}, dtype), out_add_ref({c.N, c.C}, dtype);
      ref::moe_unpermute(y, expected.sorted_indices_J, out_ref, Accumulate::overwrite);
      copy_convert(out_init, out_add_ref);
      ref::moe_unpermute(y, expected.sorted_indices_J, out_add_ref, Accumulate::add);
      for (const KernelTable* table : fast_tables()) {
        for (Layout layout : {Layout::contiguous, Layout::strided}) {
          const std::string what = fmt::format("{} N={} E={} C={} topk={} {} {}", kernel_variant_name(table->variant),
                                               c.N, c.E, c.C, c.topk, dtype_name(dtype),
                                               layout == Layout::strided ? "strided" : "contiguous");
          const GuardedTensor tokens_g = guarded_copy(tokens, layout);
          const GuardedTensor rows_g({r.num_routed, c.C}, dtype, layout);
          const Tensor probs({r.num_routed}, DType::f32), indices({r.num_routed}, index_dtype), counts({c.E}, DType::i64);
          table->moe_permute(tokens_g, r.map_NE, r.probs_NE, rows_g, probs, indices, counts);
          EXPECT_TRUE(bitwise_equal(rows_g, expected.rows_JC)) << what << " permuted rows";
          EXPECT_TRUE(bitwise_equal(probs, expected.probs_J)) << what << " permuted probs";
          EXPECT_TRUE(bitwise_equal(indices, expected.sorted_indices_J)) << what << " sorted indices";
          EXPECT_TRUE(bitwise_equal(counts, expected.tokens_per_expert_E)) << what << " tokens per expert";
          rows_g.expect_sentinels_intact(what + " permuted rows");

          const GuardedTensor y_g = guarded_copy(y, layout);
          const GuardedTensor out_g({c.N, c.C}, dtype, layout);
          table->moe_unpermute(y_g, indices, out_g, Accumulate::overwrite);
          expect_close(out_g, out_ref, rtol, atol, what + " unpermute");
          out_g.expect_sentinels_intact(what + " unpermute");
          const GuardedTensor out_add_g = guarded_copy(out_init, layout);
          table->moe_unpermute(y_g, indices, out_add_g, Accumulate::add);
          expect_close(out_add_g, out_add_ref, rtol, atol, what + " unpermute add");
          out_add_g.expect_sentinels_intact(what + " unpermute add");

          const GuardedTensor gathered_g({r.num_routed, c.C}, dtype, layout);
          table->moe_gather(out_g, indices, gathered_g);
          const Tensor gathered_ref({r.num_routed, c.C}, dtype);
          ref::moe_gather(out_g, indices, gathered_ref);
          EXPECT_TRUE(bitwise_equal(gathered_g, gathered_ref)) << what << " gather";
          gathered_g.expect_sentinels_intact(what + " gather");
        }
      }
    }
  }
}

// §6.6's invariant: identity experts, probs folded as 1, give topk x the input; scaling each row by
// its prob 1/topk gives the input exactly. Inputs are bf16-representable, so every partial sum is
// exact in f32 and the only rounding is the final one, to a representable value.
TEST(MoePermute, IdentityExpertsReturnTheInput) {
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  for (const KernelTable* table : tables) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (int64_t topk : {1, 2, 4}) {
        const int64_t N = 11, E = 5, C = 19;
        const std::string what = fmt::format("{} {} topk={}", kernel_variant_name(table->variant), dtype_name(dtype), topk);
        const Routing r = make_routing(N, E, topk, uint64_t(7 * topk));
        Tensor x({N, C}, dtype);
        copy_convert(bf16_representable({N, C}, uint64_t(topk)), x);
        const Permuted p = permute(*table, x, r);
        Tensor out({N, C}, dtype), expected({N, C}, dtype);
        table->moe_unpermute(p.rows_JC, p.sorted_indices_J, out, Accumulate::overwrite);
        for (int64_t i = 0; i < N * C; ++i) store_f64(expected, i, double(topk) * load_f64(x, i));
        EXPECT_TRUE(bitwise_equal(out, expected)) << what << ": topk x the input";
        for (int64_t j = 0; j < r.num_routed; ++j)
          for (int64_t c = 0; c < C; ++c)
            store_f64(p.rows_JC, j * C + c, load_f64(p.rows_JC, j * C + c) / double(topk));
        table->moe_unpermute(p.rows_JC, p.sorted_indices_J, out, Accumulate::overwrite);
        EXPECT_TRUE(bitwise_equal(out, x)) << what << ": probs 1/topk give the input";
      }
    }
  }
}

// d/dtokens of sum(r * permute(tokens)) is unpermute(r); d/dy of sum(r * unpermute(y)) is gather(r).
TEST(MoePermute, RefBackwardMatchesFiniteDifferences) {
  const int64_t N = 5, E = 4, C = 3;
  const Routing routing = make_routing(N, E, 2, 61, 4);
  const int64_t J = routing.num_routed;
  const Tensor tokens = random_tensor({N, C}, DType::f64, 62);
  const Tensor r_JC = random_tensor({J, C}, DType::f64, 63), r_NC = random_tensor({N, C}, DType::f64, 64);
  const Permuted p = permute(ref::table(), tokens, routing);
  auto dot = [](const Tensor& a, const Tensor& b) {
    double sum = 0;
    for (int64_t i = 0; i < a.numel(); ++i) sum += a.data<double>()[i] * b.data<double>()[i];
    return sum;
  };
  auto permute_loss = [&] { return dot(permute(ref::table(), tokens, routing).rows_JC, r_JC); };
  const Tensor dtokens({N, C}, DType::f64);
  ref::moe_unpermute(r_JC, p.sorted_indices_J, dtokens, Accumulate::overwrite);
  testing::expect_gradient_matches_fd(permute_loss, tokens, dtokens, "permute dtokens");

  const Tensor y = random_tensor({J, C}, DType::f64, 65), out({N, C}, DType::f64);
  auto unpermute_loss = [&] {
    ref::moe_unpermute(y, p.sorted_indices_J, out, Accumulate::overwrite);
    return dot(out, r_NC);
  };
  const Tensor dy({J, C}, DType::f64);
  ref::moe_gather(r_NC, p.sorted_indices_J, dy);
  testing::expect_gradient_matches_fd(unpermute_loss, y, dy, "unpermute dy");
}

// --- grouped GEMM ----------------------------------------------------------------------------

struct Grouped {
  int64_t I, O;
  std::vector<int64_t> group_sizes;
  int64_t rows() const { return std::accumulate(group_sizes.begin(), group_sizes.end(), int64_t(0)); }
};
// The last case cuts its big group and its outputs into several of the cpu kernels' tiles (grouped_tiles.h).
const Grouped kGrouped[] = {{7, 5, {3}},
                            {37, 29, {5, 0, 17, 1, 0}},
                            {64, 33, {0, 0, 70}},
                            {129, 77, {40, 3, 0, 81, 9, 2}},
                            {21, 530, {600, 0, 3}}};

// As linear_test: the sums of K products of values in [-1, 1) differ by ~K f32 ulps of the terms.
struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance(DType out, int64_t K) { return {out == DType::bf16 ? 8e-3 : 1e-5, 1e-6 * double(K + 1)}; }

// Every cpu table's grouped GEMM (forward, dgrad and wgrad in both modes, contiguous and strided) against the ref.
void expect_cpu_matches_ref(const Grouped& g, DType dtype, uint64_t seed) {
  const DType grad_dtype = DType::f32;
  const int64_t N = g.rows(), E = int64_t(g.group_sizes.size());
  const Tensor x = random_tensor({N, g.I}, dtype, ++seed);
  const Tensor w = random_tensor({E, g.O, g.I}, dtype, ++seed);
  const Tensor dy = random_tensor({N, g.O}, dtype, ++seed);
  const Tensor dx_init = random_tensor({N, g.I}, dtype, ++seed);
  const Tensor dw_init = random_tensor({E, g.O, g.I}, grad_dtype, ++seed);
  const Tensor y_ref({N, g.O}, dtype), dx_ref({N, g.I}, dtype), dw_ref({E, g.O, g.I}, grad_dtype);
  ref::grouped_gemm_forward(x, w, g.group_sizes, y_ref);
  for (Accumulate mode : {Accumulate::overwrite, Accumulate::add}) {
    copy_convert(dx_init, dx_ref);
    ref::grouped_gemm_dgrad(dy, w, g.group_sizes, dx_ref, mode);
    copy_convert(dw_init, dw_ref);
    ref::grouped_gemm_wgrad(dy, x, g.group_sizes, dw_ref, mode);
    for (const FastTable& t : fast_tables(dtype)) {
      for (Layout layout : {Layout::contiguous, Layout::strided}) {
        const std::string what = fmt::format("{} I={} O={} N={} {} {} {}", t.name, g.I, g.O, N, dtype_name(dtype),
                                             mode == Accumulate::add ? "add" : "overwrite",
                                             layout == Layout::strided ? "strided" : "contiguous");
        const GuardedTensor x_g = guarded_copy(x, layout), dy_g = guarded_copy(dy, layout);
        const GuardedTensor y_g({N, g.O}, dtype, layout);
        t.table->grouped_gemm_forward(x_g, w, g.group_sizes, y_g);
        expect_close(y_g, y_ref, tolerance(dtype, g.I).rtol, tolerance(dtype, g.I).atol, what + " y");
        y_g.expect_sentinels_intact(what + " y");
        const GuardedTensor dx_g = guarded_copy(dx_init, layout);
        t.table->grouped_gemm_dgrad(dy_g, w, g.group_sizes, dx_g, mode);
        expect_close(dx_g, dx_ref, tolerance(dtype, g.O).rtol, tolerance(dtype, g.O).atol, what + " dx");
        dx_g.expect_sentinels_intact(what + " dx");
        const Tensor dw({E, g.O, g.I}, grad_dtype);
        copy_convert(dw_init, dw);
        t.table->grouped_gemm_wgrad(dy_g, x_g, g.group_sizes, dw, mode);
        expect_close(dw, dw_ref, tolerance(DType::f32, N).rtol, tolerance(DType::f32, N).atol, what + " dw");
      }
    }
  }
  // An empty group's weight gradient: zero on overwrite, untouched on add (checked on ref, which
  // every cpu table matched above).
  for (int64_t e = 0; e < E; ++e) {
    if (g.group_sizes[size_t(e)] != 0) continue;
    EXPECT_TRUE(bitwise_equal(dw_ref.view().select(0, e), dw_init.view().select(0, e))) << "add leaves expert " << e;
    const Tensor dw({E, g.O, g.I}, grad_dtype);
    copy_convert(dw_init, dw);
    ref::grouped_gemm_wgrad(dy, x, g.group_sizes, dw, Accumulate::overwrite);
    EXPECT_EQ(testing::max_abs(dw.view().select(0, e)), 0.0) << "overwrite zeroes expert " << e;
  }
}

TEST(GroupedGemm, CpuMatchesRef) {
  uint64_t seed = 200;
  for (DType dtype : {DType::f32, DType::bf16})
    for (const Grouped& g : kGrouped) expect_cpu_matches_ref(g, dtype, seed += 5);
}

// Experts of 1..33 rows, most of them on the AVX2 / AVX-512 few-row kernels (grouped_few_rows.h, up to kFewRows
// = 32 rows; 33 on the engine), with empty experts between them. I and O are not multiples of any vector width
// or register tile: 131 = 8 x 16 + 3 lanes past the vectors, 133 outputs leave a partial register tile and a
// partial depth chunk in dgrad. The last case gives a 32-row expert tiles of 256 outputs (forward) and of 1792
// dw columns (wgrad), so the kernels also run on tiles that start inside an expert's outputs.
TEST(GroupedGemm, FewRowKernelsMatchRef) {
  std::vector<int64_t> one_to_33;
  for (int64_t rows = 1; rows <= 33; ++rows) {
    one_to_33.push_back(rows);
    if (rows % 5 == 0) one_to_33.push_back(0);
  }
  const Grouped cases[] = {{131, 133, one_to_33}, {7, 9, one_to_33}, {2049, 300, {32, 0, 5}}};
  uint64_t seed = 300;
  for (DType dtype : {DType::f32, DType::bf16})
    for (const Grouped& g : cases) expect_cpu_matches_ref(g, dtype, seed += 5);
}

// On the ordered GEMM the grouped GEMM is each expert's linear layer bit for bit: the ordered contract
// does not depend on how the products are cut into tiles. The big group and the 530 outputs make several tiles.
TEST(GroupedGemm, OnTheOrderedGemmEqualsOneLinearPerExpert) {
  const Grouped g{37, 530, {5, 0, 600, 1}};
  const int64_t N = g.rows(), E = 4;
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor x = random_tensor({N, g.I}, dtype, 5), w = random_tensor({E, g.O, g.I}, dtype, 6);
    int checked = 0;
    for (const FastTable& t : fast_tables(dtype)) {
      if (!t.name.ends_with("/ordered")) continue;
      const Tensor y({N, g.O}, dtype), y_loop({N, g.O}, dtype);
      t.table->grouped_gemm_forward(x, w, g.group_sizes, y);
      for (int64_t e = 0, row = 0; e < E; row += g.group_sizes[size_t(e)], ++e)
        if (g.group_sizes[size_t(e)] > 0)
          t.table->linear_forward(x.view().slice(0, row, g.group_sizes[size_t(e)]), w.view().select(0, e),
                                  TensorView(), y_loop.view().slice(0, row, g.group_sizes[size_t(e)]));
      EXPECT_TRUE(bitwise_equal(y, y_loop)) << t.name << " " << dtype_name(dtype);
      ++checked;
    }
    EXPECT_GT(checked, 0) << dtype_name(dtype);
  }
}

TEST(GroupedGemm, RefGradientsMatchFiniteDifferences) {
  const std::vector<int64_t> group_sizes = {2, 0, 3, 1};
  const int64_t N = 6, E = 4, I = 3, O = 2;
  const Tensor x = random_tensor({N, I}, DType::f64, 71), w = random_tensor({E, O, I}, DType::f64, 72);
  const Tensor r = random_tensor({N, O}, DType::f64, 73), y({N, O}, DType::f64);
  auto loss = [&] {
    ref::grouped_gemm_forward(x, w, group_sizes, y);
    double sum = 0;
    for (int64_t i = 0; i < y.numel(); ++i) sum += y.data<double>()[i] * r.data<double>()[i];
    return sum;
  };
  const Tensor dx({N, I}, DType::f64), dw({E, O, I}, DType::f64);
  ref::grouped_gemm_dgrad(r, w, group_sizes, dx, Accumulate::overwrite);
  ref::grouped_gemm_wgrad(r, x, group_sizes, dw, Accumulate::overwrite);
  testing::expect_gradient_matches_fd(loss, x, dx, "grouped_gemm dx");
  testing::expect_gradient_matches_fd(loss, w, dw, "grouped_gemm dw");
}

// The cpu results are the same bits on 1, 2 and 3 threads, on every engine: unpermute's per-token sums run in
// increasing j on any team, and the grouped GEMM computes tiles fixed by the shapes, each on one thread with
// its whole K (moe.h). The big group and the 600 outputs cut the products into several tiles.
TEST(Moe, CpuResultsDoNotDependOnTheThreadCount) {
  const int saved_threads = omp_get_max_threads();
  const Grouped g{96, 600, {100, 0, 37, 700, 11}};
  const int64_t N = g.rows(), E = 5;
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor x = random_tensor({N, g.I}, dtype, 81), w = random_tensor({E, g.O, g.I}, dtype, 82);
    const Tensor dy = random_tensor({N, g.O}, dtype, 83);
    const Routing routing = make_routing(N, 8, 3, 84, 7);
    for (const FastTable& t : fast_tables(dtype)) {
      std::vector<std::vector<Tensor>> runs;
      for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        std::vector<Tensor> out;
        out.emplace_back(Shape{N, g.O}, dtype);
        t.table->grouped_gemm_forward(x, w, g.group_sizes, out.back());
        out.emplace_back(Shape{N, g.I}, dtype);
        t.table->grouped_gemm_dgrad(dy, w, g.group_sizes, out.back(), Accumulate::overwrite);
        out.emplace_back(Shape{E, g.O, g.I}, DType::f32);
        t.table->grouped_gemm_wgrad(dy, x, g.group_sizes, out.back(), Accumulate::overwrite);
        Permuted p = permute(*t.table, x, routing);
        out.emplace_back(Shape{N, g.I}, dtype);
        t.table->moe_unpermute(p.rows_JC, p.sorted_indices_J, out.back(), Accumulate::overwrite);
        out.push_back(std::move(p.rows_JC));
        runs.push_back(std::move(out));
      }
      const char* names[] = {"forward", "dgrad", "wgrad", "unpermute", "permute"};
      for (size_t r = 1; r < runs.size(); ++r)
        for (size_t i = 0; i < runs[0].size(); ++i)
          EXPECT_TRUE(bitwise_equal(runs[0][i], runs[r][i]))
              << t.name << " " << dtype_name(dtype) << " " << names[i] << " differs with " << r + 1 << " threads";
    }
  }
  omp_set_num_threads(saved_threads);
}

TEST(Moe, RejectsBadArgumentsNamingThem) {
  std::vector<const KernelTable*> tables = fast_tables();
  tables.push_back(&ref::table());
  const Tensor x({6, 4}, DType::f32), w({2, 3, 4}, DType::f32), y({6, 3}, DType::f32), dw({2, 3, 4}, DType::f32);
  const Tensor w_f64({2, 3, 4}, DType::f64), dw_bf16({2, 3, 4}, DType::bf16), w_wide({2, 3, 5}, DType::f32);
  const std::vector<int64_t> sizes = {2, 4}, short_sum = {2, 3}, negative = {7, -1}, three = {2, 2, 2};
  const Routing routing = make_routing(6, 3, 2, 9);
  const Tensor map_f32({6, 3}, DType::f32), rows({routing.num_routed, 4}, DType::f32), rows_short({5, 4}, DType::f32);
  const Tensor probs({routing.num_routed}, DType::f32), indices({routing.num_routed}, DType::i64);
  const Tensor indices_f32({routing.num_routed}, DType::f32), counts({3}, DType::i64);
  Tensor bad_indices({routing.num_routed}, DType::i64);
  bad_indices.data<int64_t>()[0] = 6;
  for (const KernelTable* t : tables) {
    expect_error_containing([&] { t->grouped_gemm_forward(x, w, short_sum, y); }, "group_sizes_E: sum to 5");
    expect_error_containing([&] { t->grouped_gemm_forward(x, w, negative, y); }, "group_sizes_E[1]: negative");
    expect_error_containing([&] { t->grouped_gemm_forward(x, w, three, y); }, "3 groups for 2 experts");
    expect_error_containing([&] { t->grouped_gemm_forward(x, w_f64, sizes, y); }, "grouped_gemm w_EOI");
    expect_error_containing([&] { t->grouped_gemm_forward(x, w_wide, sizes, y); }, "grouped_gemm w_EOI");
    expect_error_containing([&] { t->grouped_gemm_dgrad(y, w, short_sum, x, Accumulate::overwrite); },
                            "grouped_gemm_dgrad group_sizes_E");
    expect_error_containing([&] { t->grouped_gemm_wgrad(y, x, sizes, dw_bf16, Accumulate::add); },
                            "grouped_gemm_wgrad dw_EOI");
    expect_error_containing(
        [&] { t->moe_permute(x, map_f32, routing.probs_NE, rows, probs, indices, counts); }, "routing_map_NE");
    expect_error_containing(
        [&] {
          t->moe_permute(x, routing.map_NE, routing.probs_NE, rows_short, Tensor({5}, DType::f32),
                         Tensor({5}, DType::i64), counts);
        },
        "routes 12 rows");
    expect_error_containing(
        [&] { t->moe_permute(x, routing.map_NE, routing.probs_NE, rows, probs, indices_f32, counts); },
        "sorted_indices_J");
    expect_error_containing([&] { t->moe_unpermute(rows, bad_indices, x, Accumulate::overwrite); },
                            "sorted_indices_J[0] = 6 is outside [0, 6)");
    expect_error_containing([&] { t->moe_gather(x, bad_indices, rows); }, "sorted_indices_J[0] = 6");
  }
}

TEST(Moe, RegistryRunsTheOpOnTheBestVariant) {
  EXPECT_EQ(kernel_op_name(KernelOp::moe), "moe");
  EXPECT_EQ(parse_kernel_op("moe"), KernelOp::moe);
  const KernelRegistry registry;
  EXPECT_NE(registry.variant(KernelOp::moe, DType::f32), KernelVariant::ref);
  EXPECT_EQ(registry.variant(KernelOp::moe, DType::f64), KernelVariant::ref);
  const std::vector<int64_t> sizes = {3, 0, 2};
  const Tensor x = random_tensor({5, 6}, DType::f64, 1), w = random_tensor({3, 4, 6}, DType::f64, 2);
  const Tensor y({5, 4}, DType::f64), y_ref({5, 4}, DType::f64);
  registry.grouped_gemm_forward(x, w, sizes, y);
  ref::grouped_gemm_forward(x, w, sizes, y_ref);
  EXPECT_TRUE(bitwise_equal(y, y_ref));
}

}  // namespace
}  // namespace rf::kernels
