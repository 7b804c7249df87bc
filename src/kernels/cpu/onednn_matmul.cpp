// oneDNN matmul under the cpu GEMM and linear kernels (see onednn_matmul.h).
#include "kernels/cpu/onednn_matmul.h"

#include <dnnl.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <unordered_map>

#include "core/element_access.h"
#include "kernels/blas_info.h"

namespace rf::kernels::RF_CPU_NS {
namespace {

using OnednnType = dnnl::memory::data_type;

OnednnType onednn_type(DType dtype) {
  RF_CHECK(dtype == DType::f32 || dtype == DType::bf16, "onednn_matmul: unsupported dtype {}", dtype_name(dtype));
  return dtype == DType::f32 ? OnednnType::f32 : OnednnType::bf16;
}

// A dim of extent 1 keeps whatever stride its parent view had there. Give it the stride a dense
// layout of the same order would have, so that oneDNN sees a plain row- or column-major matrix
// (its fast kernels take only those) and its primitive cache sees one key per shape.
dnnl::memory::desc matrix_desc(const TensorView& m) {
  int64_t stride0 = m.stride(0), stride1 = m.stride(1);
  if (m.size(0) == 1) stride0 = stride1 == 1 ? m.size(1) : 1;
  if (m.size(1) == 1) stride1 = stride0 == 1 ? m.size(0) : 1;
  return dnnl::memory::desc({m.size(0), m.size(1)}, onednn_type(m.dtype()), {stride0, stride1});
}

// One CPU engine for the process (an allowed singleton: it owns no data of ours, and oneDNN's
// primitive cache is keyed by it). Streams are per calling thread, since a stream is not meant to
// be used by two threads at once.
const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

// The K == 0 case: the product is empty, so c = the epilogue alone. oneDNN 2.6 faults (SIGFPE)
// creating a matmul with an empty K; this is a cold path, hence the generic element access.
void epilogue_only(const MatmulEpilogue& e, TensorView c_MN) {
  for (int64_t m = 0; m < c_MN.size(0); ++m) {
    for (int64_t n = 0; n < c_MN.size(1); ++n) {
      const int64_t at = m * c_MN.stride(0) + n;
      double value = e.beta == 0.0f ? 0.0 : e.beta * load_f64(c_MN, at);
      if (!e.bias_N.empty()) value += load_f64(e.bias_N, n * e.bias_N.stride(0));
      if (!e.addend_MN.empty()) value += load_f64(e.addend_MN, m * e.addend_MN.stride(0) + n);
      store_f64(c_MN, at, value);
    }
  }
}

void execute_matmul(TensorView a_MK, TensorView b_KN, TensorView c_MN, float alpha, const MatmulEpilogue& epilogue) {
  const int64_t N = c_MN.size(1);

  // oneDNN 2.x: output scales multiply the product before post-ops; the sum post-op adds
  // beta * (previous dst) and the binary one the addend, both read in their dtype and added in f32.
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  dnnl::post_ops ops;
  if (epilogue.beta != 0.0f) ops.append_sum(epilogue.beta);
  const bool with_addend = !epilogue.addend_MN.empty();
  if (with_addend) ops.append_binary(dnnl::algorithm::binary_add, matrix_desc(epilogue.addend_MN));
  if (ops.len() > 0) attr.set_post_ops(ops);
  const dnnl::engine& engine = cpu_engine();
  const dnnl::memory::desc a_md = matrix_desc(a_MK), b_md = matrix_desc(b_KN), c_md = matrix_desc(c_MN);
  // The matmul objects, memory wrappers and argument map are small per-call heap objects that
  // oneDNN's API requires; after the first call with the same shapes, strides, dtypes and
  // attributes the primitive comes from oneDNN's primitive cache (a few microseconds in all).
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(a_md, engine, a_MK.raw())},
                                             {DNNL_ARG_WEIGHTS, dnnl::memory(b_md, engine, b_KN.raw())},
                                             {DNNL_ARG_DST, dnnl::memory(c_md, engine, c_MN.raw())}};
  if (with_addend) {
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(ops.len() - 1) | DNNL_ARG_SRC_1,
                 dnnl::memory(matrix_desc(epilogue.addend_MN), engine, epilogue.addend_MN.raw()));
  }
  dnnl::matmul::desc desc(a_md, b_md, c_md);
  if (!epilogue.bias_N.empty()) {
    const dnnl::memory::desc bias_md({1, N}, onednn_type(epilogue.bias_N.dtype()), {N, 1});
    desc = dnnl::matmul::desc(a_md, b_md, bias_md, c_md);
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md, engine, epilogue.bias_N.raw()));
  }
  dnnl::stream& stream = cpu_stream();
  dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, engine)).execute(stream, args);
  stream.wait();
}

}  // namespace

void onednn_matmul(TensorView a_MK, TensorView b_KN, TensorView c_MN, float alpha, const MatmulEpilogue& epilogue) {
  const int64_t M = c_MN.size(0), N = c_MN.size(1), K = a_MK.size(1);
  if (M == 0 || N == 0) return;
  if (K == 0) return epilogue_only(epilogue, c_MN);
  // A library failure (no kernel for this ISA and dtype, ...) surfaces naming the call and the ISA path.
  try {
    execute_matmul(a_MK, b_KN, c_MN, alpha, epilogue);
  } catch (const dnnl::error& e) {
    throw Error(fmt::format("oneDNN matmul failed: {}x{}x{} (MxNxK) {} x {} -> {}, kernel variant {}, oneDNN isa {} "
                            "(ONEDNN_MAX_CPU_ISA={}): {}",
                            M, N, K, dtype_name(a_MK.dtype()), dtype_name(b_KN.dtype()), dtype_name(c_MN.dtype()),
                            kernel_variant_name(KernelVariant::RF_CPU_NS), onednn_isa_name(),
                            std::getenv("ONEDNN_MAX_CPU_ISA") ? std::getenv("ONEDNN_MAX_CPU_ISA") : "unset", e.what()));
  }
}

}  // namespace rf::kernels::RF_CPU_NS
