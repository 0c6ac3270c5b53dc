// accel/ops/nn_ops.hpp — accel::ops::NnKernels<B>: the nn_ops kernels (embedding, LayerNorm with a
// fused residual add, the residual add, GELU, softmax cross-entropy, dropout, clipping), forward and
// backward, on a stream of any backend.
//
//   accel::ops::NnKernels<B> nn(b);                 loads b.create_op_builder("nn_ops") (JIT-cached)
//   nn.layernorm_forward(s, out, mean, rstd, x, w, bias, N, C);
//
// Every call checks its arguments (InvalidArgumentError naming the kernel), then launches through
// b.launch_kernel (ops/launch.hpp): the same code on CpuBackend, CudaBackend and AnyBackend; the host
// kernels run in stream order with shape.threads = set_num_threads()'s value, the CUDA kernels with
// the grid each call computes here. Pointers are device memory of s's device; tensors are row-major
// [N x C]. Activations and weights are float32, bfloat16 or float16 (NnKernels(b, Dtype::bfloat16)),
// computed in float32;
// statistics (mean, rstd, losses, norms) are float32, token ids int32. What each kernel computes is
// written in kernels/common/accel_nn_abi.h; the CPU and CUDA kernels agree within float32 rounding.
// Results do not depend on the thread count or the grid: row sums have a fixed order.
// The CUDA kernels move 8 elements per access where C is a multiple of 8 and the pointers 16-byte
// aligned (checked at run time; one element per access otherwise); the grids below are sized for that.
#pragma once

#include <accel/core/dtype.hpp>
#include <accel/core/error.hpp>
#include <accel/detail/format_number.hpp>
#include <accel/ops/launch.hpp>
#include <accel/ops/nn_abi.hpp>
#include <accel/ops/detail/thread_count.hpp>
#include <accel/ops/op_builder.hpp>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

namespace accel::ops {

/// The op tag of nn_ops (B::create_op_builder(NnOps::name)).
struct NnOps {
  static constexpr std::string_view name = "nn_ops";
};

template <class B>
class NnKernels {
 public:
  using StreamRef = typename B::StreamRef;

  /// Loads nn_ops on `b` (compiling it on first use) for activations and weights of `dtype`.
  explicit NnKernels(B b, Dtype dtype = Dtype::float32) : NnKernels(b, b.create_op_builder(NnOps::name).load(), dtype) {}
  /// With an op already loaded (e.g. from a builder with its own cache or kernel directory).
  NnKernels(B b, LoadedOp op, Dtype dtype) : b_(b), dtype_(dtype) {
    if (dtype != Dtype::float32 && dtype != Dtype::bfloat16 && dtype != Dtype::float16) {
      throw InvalidArgumentError("nn_ops: activations must be float32, bfloat16 or float16, got " +
                                 std::string(name(dtype)));
    }
    const std::string suffix = dtype == Dtype::float32 ? "_f32" : dtype == Dtype::bfloat16 ? "_bf16" : "_f16";
    if (op.find_symbol("accel_nn_gelu_forward" + suffix) == nullptr) {
      throw InvalidArgumentError("nn_ops on " + std::string(b.name()) + " has no " + std::string(accel::name(dtype)) +
                                 " kernels (an op built from older sources?)");
    }
    const auto k = [&](const char* entry) { return Kernel(op, entry + suffix); };
    embedding_forward_ = k("accel_nn_embedding_forward");
    embedding_backward_ = k("accel_nn_embedding_backward");
    layernorm_forward_ = k("accel_nn_layernorm_forward");
    layernorm_backward_ = k("accel_nn_layernorm_backward");
    if (op.kind() == OpKind::cuda) layernorm_backward_reduce_ = k("accel_nn_layernorm_backward_reduce");
    gelu_forward_ = k("accel_nn_gelu_forward");
    gelu_backward_ = k("accel_nn_gelu_backward");
    cross_entropy_ = k("accel_nn_cross_entropy");
    add_ = k("accel_nn_add");
    dropout_ = k("accel_nn_dropout");
    clip_ = k("accel_nn_clip");
  }

  [[nodiscard]] Dtype dtype() const noexcept { return dtype_; }
  /// Host kernels: OpenMP threads per launch (0: all cores). Results do not depend on it.
  void set_num_threads(int n) { threads_ = detail::checked_thread_count("NnKernels", n); }
  [[nodiscard]] int num_threads() const noexcept { return threads_; }

  /// out[n] = wte[tokens[n]] + wpe[n % T] for N rows of C; tokens in [0, V).
  void embedding_forward(StreamRef s, void* out, const std::int32_t* tokens, const void* wte, const void* wpe,
                         std::int64_t N, std::int64_t T, std::int64_t C, std::int64_t V) const {
    check_sizes("embedding_forward", {{"N", N, 0}, {"T", T, 1}, {"C", C, 1}, {"V", V, 1}});
    check_pointers("embedding_forward", N, {{"out", out}, {"tokens", tokens}, {"wte", wte}, {"wpe", wpe}});
    const abi::NnEmbeddingForward a{out, tokens, wte, wpe, N, T, C, V};
    const bool vec = C % 8 == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe);
    b_.launch_kernel(s, embedding_forward_, with_threads(elementwise_shape(vec ? N * C / 8 : N * C)), a);
  }
  /// dwte[tokens[n]] += dout[n]; dwpe[n % T] += dout[n] (sums in a fixed order: row order on the host).
  void embedding_backward(StreamRef s, void* dwte, void* dwpe, const void* dout, const std::int32_t* tokens,
                          std::int64_t N, std::int64_t T, std::int64_t C, std::int64_t V) const {
    check_sizes("embedding_backward", {{"N", N, 0}, {"T", T, 1}, {"C", C, 1}, {"V", V, 1}});
    check_pointers("embedding_backward", N, {{"dwte", dwte}, {"dwpe", dwpe}, {"dout", dout}, {"tokens", tokens}});
    const abi::NnEmbeddingBackward a{dwte, dwpe, dout, tokens, N, T, C, V};
    // CUDA: 1024 threads (the kernel's summation order is fixed for this block size) over up to 1024
    // groups of 8 columns (one column where C or the alignment rules out 16-byte accesses), block y the
    // further groups; block x a vocabulary row, then blocks of 1024 / groups positions each.
    const std::int64_t groups = C % 8 == 0 && aligned16(dout) && aligned16(dwte) && aligned16(dwpe) ? C / 8 : C;
    const std::int64_t col_blocks = (groups + 1023) / 1024;
    const std::int64_t per_block = 1024 / (groups < 1024 ? groups : 1024);
    LaunchShape shape =
        with_threads(LaunchShape::blocks(static_cast<std::uint32_t>(V + (T + per_block - 1) / per_block), 1024));
    shape.grid[1] = static_cast<std::uint32_t>(col_blocks < 65535 ? col_blocks : 65535);
    b_.launch_kernel(s, embedding_backward_, shape, a);
  }
  /// x = inp (+ residual), residual_out = x (when given), out = LayerNorm(x) * weight + bias; mean and
  /// rstd per row. With a residual, residual_out is required (the sum is the next block's input).
  void layernorm_forward(StreamRef s, void* out, float* mean, float* rstd, const void* inp, const void* weight,
                         const void* bias, std::int64_t N, std::int64_t C, float eps = 1e-5f,
                         const void* residual = nullptr, void* residual_out = nullptr) const {
    check_sizes("layernorm_forward", {{"N", N, 0}, {"C", C, 1}});
    check_pointers("layernorm_forward", N,
                   {{"out", out}, {"mean", mean}, {"rstd", rstd}, {"inp", inp}, {"weight", weight}, {"bias", bias}});
    if (residual != nullptr && residual_out == nullptr) {
      fail("layernorm_forward", "a residual is given but residual_out is null (the sum inp + residual is the next "
                                "block's input, so it must be written)");
    }
    if (!(eps >= 0)) fail("layernorm_forward", "eps = " + accel::detail::format_number(eps) + " must be >= 0");
    const abi::NnLayerNormForward a{out, mean, rstd, residual_out, inp, residual, weight, bias, N, C, eps, 0};
    b_.launch_kernel(s, layernorm_forward_, with_threads(rows_shape(N)), a);
  }
  /// dinp += dx, dweight += sum dout * xhat, dbias += sum dout; scratch holds
  /// layernorm_scratch_floats(N, C) floats (abi::nn_layernorm_scratch_floats). dinp must not overlap dout
  /// or inp.
  void layernorm_backward(StreamRef s, void* dinp, void* dweight, void* dbias, float* scratch, const void* dout,
                          const void* inp, const void* weight, const float* mean, const float* rstd, std::int64_t N,
                          std::int64_t C) const {
    check_sizes("layernorm_backward", {{"N", N, 0}, {"C", C, 1}});
    check_pointers("layernorm_backward", N,
                   {{"dinp", dinp}, {"dweight", dweight}, {"dbias", dbias}, {"scratch", scratch}, {"dout", dout},
                    {"inp", inp}, {"weight", weight}, {"mean", mean}, {"rstd", rstd}});
    if (N > 0 && (overlap(dinp, dout, N * C) || overlap(dinp, inp, N * C))) {
      throw InvalidArgumentError(std::string("nn_ops layernorm_backward: dinp overlaps ") +
                                 (overlap(dinp, dout, N * C) ? "dout" : "inp") +
                                 " (dinp is accumulated into; dout and inp are read again after it is written)");
    }
    const abi::NnLayerNormBackward a{dinp, dweight, dbias, scratch, dout, inp, weight, mean, rstd, N, C};
    const std::int64_t chunks = (N + abi::nn_ln_chunk - 1) / abi::nn_ln_chunk;
    // CUDA: a block per chunk, of 32 warps for bfloat16 and 16 otherwise (ln_backward_threads_* in
    // nn_ops.cu, its launch bounds; the kernel's summation order is fixed for this block size), then a
    // block per 32 columns adding the chunks' partial sums.
    const std::uint32_t threads = dtype_ == Dtype::bfloat16 ? 1024 : 512;
    b_.launch_kernel(s, layernorm_backward_,
                     with_threads(LaunchShape::blocks(static_cast<std::uint32_t>(chunks > 0 ? chunks : 1), threads)), a);
    if (layernorm_backward_reduce_.valid()) {  // CUDA: the chunks' partial sums, in order, in a second kernel
      b_.launch_kernel(s, layernorm_backward_reduce_, LaunchShape::blocks(static_cast<std::uint32_t>((C + 31) / 32), 256),
                       a);
    }
  }
  [[nodiscard]] static constexpr std::int64_t layernorm_scratch_floats(std::int64_t N, std::int64_t C) noexcept {
    return abi::nn_layernorm_scratch_floats(N, C);
  }
  /// out = GELU(inp) (tanh approximation), n elements.
  void gelu_forward(StreamRef s, void* out, const void* inp, std::int64_t n) const {
    check_sizes("gelu_forward", {{"n", n, 0}});
    check_pointers("gelu_forward", n, {{"out", out}, {"inp", inp}});
    b_.launch_kernel(s, gelu_forward_, with_threads(elementwise8_shape(n, aligned16(out) && aligned16(inp))),
                     abi::NnGeluForward{out, inp, n});
  }
  /// dinp = dout * GELU'(inp); dinp may be dout.
  void gelu_backward(StreamRef s, void* dinp, const void* inp, const void* dout, std::int64_t n) const {
    check_sizes("gelu_backward", {{"n", n, 0}});
    check_pointers("gelu_backward", n, {{"dinp", dinp}, {"inp", inp}, {"dout", dout}});
    b_.launch_kernel(s, gelu_backward_,
                     with_threads(elementwise8_shape(n, aligned16(dinp) && aligned16(inp) && aligned16(dout))),
                     abi::NnGeluBackward{dinp, inp, dout, n});
  }
  /// losses[n] = cross-entropy of row n's first V logits (rows of Vp) against targets[n]; with
  /// write_grad the logits become d(dloss * sum of losses)/d(logits) (0 in the padding columns).
  void cross_entropy(StreamRef s, void* logits, float* losses, const std::int32_t* targets, std::int64_t N,
                     std::int64_t V, std::int64_t Vp, float dloss, bool write_grad) const {
    check_sizes("cross_entropy", {{"N", N, 0}, {"V", V, 1}, {"Vp", Vp, V}});
    check_pointers("cross_entropy", N, {{"logits", logits}, {"losses", losses}, {"targets", targets}});
    const abi::NnCrossEntropy a{logits, losses, targets, N, V, Vp, dloss, write_grad ? 1 : 0};
    b_.launch_kernel(s, cross_entropy_, with_threads(rows_shape(N)), a);
  }
  /// out = a + b, n elements (the residual add on its own; out may be a or b).
  void add(StreamRef s, void* out, const void* a, const void* b, std::int64_t n) const {
    check_sizes("add", {{"n", n, 0}});
    check_pointers("add", n, {{"out", out}, {"a", a}, {"b", b}});
    b_.launch_kernel(s, add_, with_threads(elementwise8_shape(n, aligned16(out) && aligned16(a) && aligned16(b))),
                     abi::NnAdd{out, a, b, n});
  }
  /// out = bits >= p * 2^32 ? inp / (1 - p) : 0 (0 <= p < 1); out may be inp. The backward is the same
  /// call on the gradient with the same bits.
  void dropout(StreamRef s, void* out, const void* inp, const std::uint32_t* bits, std::int64_t n, float p) const {
    check_sizes("dropout", {{"n", n, 0}});
    if (!(p >= 0 && p < 1)) {
      fail("dropout", "p = " + accel::detail::format_number(p) + " is outside [0, 1) (p = 1 would drop everything)");
    }
    check_pointers("dropout", n, {{"out", out}, {"inp", inp}, {"bits", bits}});
    const double t = std::ldexp(static_cast<double>(p), 32);
    const abi::NnDropout a{out, inp, bits, n, static_cast<std::uint32_t>(t >= 4294967295.0 ? 4294967295.0 : t),
                           static_cast<float>(1.0 / (1.0 - static_cast<double>(p)))};
    b_.launch_kernel(s, dropout_, with_threads(elementwise8_shape(n, aligned16(out) && aligned16(inp) && aligned16(bits))),
                     a);
  }
  /// data *= max_norm / (*norm + 1e-6) where that is below 1; *norm is read when the kernel runs.
  void clip(StreamRef s, void* data, std::int64_t n, const float* norm, float max_norm) const {
    check_sizes("clip", {{"n", n, 0}});
    if (norm == nullptr) fail("clip", "norm is a null pointer");
    if (!(max_norm > 0)) fail("clip", "max_norm = " + accel::detail::format_number(max_norm) + " must be > 0");
    check_pointers("clip", n, {{"data", data}});
    b_.launch_kernel(s, clip_, with_threads(elementwise8_shape(n, aligned16(data))), abi::NnClip{data, norm, n, max_norm, 0});
  }

 private:
  // The checks name the argument that is wrong; their messages are built only on failure (every launch
  // of a training step passes through them).
  struct SizeArg {
    const char* name;
    std::int64_t value;
    std::int64_t min;  // 0: a count that may be empty; 1: a dimension; else another argument's value
  };
  struct PointerArg {
    const char* name;
    const void* pointer;
  };
  [[noreturn]] static void fail(const char* kernel, const std::string& what) {
    throw InvalidArgumentError(std::string("nn_ops ") + kernel + ": " + what);
  }
  static void check_sizes(const char* kernel, std::initializer_list<SizeArg> sizes) {
    for (const SizeArg& a : sizes) {
      if (a.value < a.min) {
        fail(kernel, std::string(a.name) + " = " + std::to_string(a.value) + " must be >= " + std::to_string(a.min));
      }
    }
  }
  // Pointers may be null only when there is nothing to read or write (`count` == 0).
  static void check_pointers(const char* kernel, std::int64_t count, std::initializer_list<PointerArg> pointers) {
    if (count == 0) return;
    for (const PointerArg& a : pointers) {
      if (a.pointer == nullptr) fail(kernel, std::string(a.name) + " is a null pointer");
    }
  }
  [[nodiscard]] LaunchShape with_threads(LaunchShape s) const noexcept {
    s.threads = threads_;
    return s;
  }
  // CUDA: one warp per row, 8 rows per 256-thread block.
  [[nodiscard]] static LaunchShape rows_shape(std::int64_t N) noexcept {
    return LaunchShape::blocks(static_cast<std::uint32_t>(N > 0 ? (N + 7) / 8 : 1), 256);
  }
  // CUDA: a grid-stride loop over at most 2^16 blocks of 256 threads.
  [[nodiscard]] static LaunchShape elementwise_shape(std::int64_t n) noexcept {
    const std::int64_t blocks = n > 0 ? (n + 255) / 256 : 1;
    return LaunchShape::blocks(static_cast<std::uint32_t>(blocks < 65536 ? blocks : 65536), 256);
  }
  // CUDA: the same for kernels that take 8 elements per thread where their pointers are 16-byte aligned
  // (the kernel checks again; this only sizes the grid).
  [[nodiscard]] static LaunchShape elementwise8_shape(std::int64_t n, bool aligned) noexcept {
    return elementwise_shape(aligned ? (n + 7) / 8 : n);
  }
  [[nodiscard]] static bool aligned16(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }
  // Whether n elements of this dtype at a and at b share a byte.
  [[nodiscard]] bool overlap(const void* a, const void* b, std::int64_t n) const noexcept {
    const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
    const auto bytes = static_cast<std::uintptr_t>(n) * size_of(dtype_);
    return x < y + bytes && y < x + bytes;
  }

  B b_;
  Dtype dtype_;
  int threads_ = 0;
  Kernel embedding_forward_, embedding_backward_, layernorm_forward_, layernorm_backward_, layernorm_backward_reduce_,
      gelu_forward_, gelu_backward_, cross_entropy_, add_, dropout_, clip_;
};

}  // namespace accel::ops
