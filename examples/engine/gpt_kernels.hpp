// gpt_kernels.hpp — the engine's own op, "gpt_kernels": causal self-attention (kernels/attention.*)
// and, on the CPU, the FMA peak measurement (kernels/peak.cpp). Built the way a user's op is
// (accel/ops/launch.hpp): an ops::OpSpec with this directory's kernels, b.create_op_builder(spec)
// (host compiler on the CPU, NVRTC on CUDA; JIT-cached), b.launch_kernel(s, kernel, shape, args).
#pragma once

#include <accel/core/device.hpp>
#include <accel/core/dtype.hpp>
#include <accel/core/error.hpp>
#include <accel/ops/launch.hpp>
#include <accel/ops/op_builder.hpp>

#include "kernels/attention.h"
#include "layout.hpp"  // FlashBackward, flash_backward_scratch_floats
#include "kernels/peak.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <string>

namespace engine {

/// Where the engine's kernel sources are: $ENGINE_KERNEL_DIR, else the source tree's.
inline std::string engine_kernel_dir() {
  if (const char* d = std::getenv("ENGINE_KERNEL_DIR"); d != nullptr && *d != '\0') return d;
#ifdef ENGINE_KERNEL_DIR
  return ENGINE_KERNEL_DIR;
#else
  return "kernels";
#endif
}

/// The op's spec for a backend whose device is `type`.
inline accel::ops::OpSpec gpt_kernels_spec(accel::DeviceType type) {
  accel::ops::OpSpec s;
  s.name = "gpt_kernels";
  s.class_name = "GptKernelsBuilder";
  s.description = "the engine's causal multi-head self-attention (flash kernels on CUDA for 16-bit activations; and the CPU's FMA peak)";
  if (type == accel::DeviceType::cpu) {
    s.kind = accel::ops::OpKind::host;
    s.sources = {"attention.cpp", "peak.cpp"};
    // attention.cpp's 16-bit loads and stores are accel's own (kernels/cpu/cpu_convert.h): its kernel
    // directory's cpu/ and common/ go on the include path, and the headers into the cache key.
    const std::filesystem::path accel_kernels = accel::ops::default_kernel_dir();
    for (const char* d : {"cpu", "common"}) s.include_dirs.push_back((accel_kernels / d).string());
    for (const char* h : {"cpu/cpu_convert.h", "common/accel_ops_abi.h"}) s.headers.push_back((accel_kernels / h).string());
    s.flags = {"-ffp-contract=fast", "-mprefer-vector-width=512"};
    for (const char* k : {"gpt_attention_forward", "gpt_attention_backward", "gpt_head_permute", "gpt_softmax_forward",
                          "gpt_softmax_backward"}) {
      for (const char* d : {"_f32", "_bf16", "_f16"}) s.entry_points.push_back(std::string(k) + d);
    }
    s.entry_points.push_back("gpt_fma_peak");
    s.entry_points.push_back("gpt_attention_cpu_amx");
  } else {
    s.kind = accel::ops::OpKind::cuda;
    s.sources = {"attention.cu"};
    for (const char* k : {"gpt_attention_forward", "gpt_attention_backward", "gpt_attention_backward_kv",
                          "gpt_head_permute", "gpt_softmax_forward", "gpt_softmax_backward"}) {
      for (const char* d : {"_f32", "_bf16", "_f16"}) s.entry_points.push_back(std::string(k) + d);
    }
    for (const char* k : {"gpt_flash_forward", "gpt_flash_backward_dq", "gpt_flash_backward_dkv", "gpt_flash_backward_prep",
                          "gpt_flash_backward_fused"}) {
      for (const char* d : {"_bf16", "_f16"}) {
        for (const char* hs : {"_32", "_64"}) s.entry_points.push_back(std::string(k) + d + hs);
      }
    }
    s.headers.insert(s.headers.begin(), "flash_attention.cuh");
  }
  s.headers.insert(s.headers.begin(), {"attention.h", "peak.h"});
  return s;
}

/// Whether the flash kernels (kernels/flash_attention.cuh) serve this attention: CUDA, 16-bit
/// activations, head size 32 or 64, width a multiple of 8 (their 16-byte tile loads).
inline bool flash_attention_fits(accel::DeviceType type, accel::Dtype dtype, std::int64_t width, std::int64_t heads) {
  const std::int64_t hs = heads > 0 ? width / heads : 0;
  return heads > 0 && type == accel::DeviceType::cuda && (dtype == accel::Dtype::bfloat16 || dtype == accel::Dtype::float16) &&
         width % heads == 0 && (hs == 32 || hs == 64) && width % 8 == 0;
}

/// Whether the CPU's fused attention kernels (kernels/attention.cpp) have vector loops for this head
/// size (width / heads): 16, 32, 48, 64, 80, 96 or 128; they refuse any other.
inline bool cpu_fused_attention_fits(std::int64_t width, std::int64_t heads) {
  if (heads <= 0 || width % heads != 0) return false;
  const std::int64_t hs = width / heads;
  return hs == 16 || hs == 32 || hs == 48 || hs == 64 || hs == 80 || hs == 96 || hs == 128;
}

/// The longest block the CUDA fused kernels take: a row's T scores in shared memory, within the 48 KiB a
/// launch gets without opting in.
inline constexpr std::int64_t cuda_fused_attention_max_block = 48 * 1024 / 4;

template <class B>
class GptKernels {
 public:
  using StreamRef = typename B::StreamRef;

  /// head_size: the flash kernels of that size are resolved too when flash_attention_fits; flash_backward:
  /// which backward flash_backward runs.
  GptKernels(B b, accel::Dtype dtype, std::int64_t head_size = 0, FlashBackward flash_backward = FlashBackward::split)
      : b_(b), flash_backward_(flash_backward) {
    auto builder = b.create_op_builder(gpt_kernels_spec(b.device_type()));
    builder.set_kernel_dir(engine_kernel_dir());
    accel::ops::LoadedOp op = builder.load();
    const std::string suffix = dtype == accel::Dtype::bfloat16 ? "_bf16" : dtype == accel::Dtype::float16 ? "_f16" : "_f32";
    forward_ = accel::ops::Kernel(op, "gpt_attention_forward" + suffix);
    backward_ = accel::ops::Kernel(op, "gpt_attention_backward" + suffix);
    permute_ = accel::ops::Kernel(op, "gpt_head_permute" + suffix);
    softmax_forward_ = accel::ops::Kernel(op, "gpt_softmax_forward" + suffix);
    softmax_backward_ = accel::ops::Kernel(op, "gpt_softmax_backward" + suffix);
    if (op.kind() == accel::ops::OpKind::cuda) {
      backward_kv_ = accel::ops::Kernel(op, "gpt_attention_backward_kv" + suffix);
      if (suffix != "_f32" && (head_size == 32 || head_size == 64)) {
        const std::string tail = suffix + "_" + std::to_string(head_size);
        flash_forward_ = accel::ops::Kernel(op, "gpt_flash_forward" + tail);
        flash_dq_ = accel::ops::Kernel(op, "gpt_flash_backward_dq" + tail);
        flash_dkv_ = accel::ops::Kernel(op, "gpt_flash_backward_dkv" + tail);
        flash_prep_ = accel::ops::Kernel(op, "gpt_flash_backward_prep" + tail);
        flash_fused_ = accel::ops::Kernel(op, "gpt_flash_backward_fused" + tail);
        flash_head_size_ = head_size;
      }
    } else {
      peak_ = accel::ops::Kernel(op, "gpt_fma_peak");
      amx_ = accel::ops::Kernel(op, "gpt_attention_cpu_amx");
    }
  }

  void set_num_threads(int n) noexcept { threads_ = n; }

  /// y and att from qkv (attention.h); bits: attention dropout's words or null.
  void forward(StreamRef s, void* y, float* att, const void* qkv, const std::uint32_t* bits, float p, std::int64_t batch,
               std::int64_t T, std::int64_t C, std::int64_t NH) const {
    const gpt_attention_args a = args(y, nullptr, att, nullptr, qkv, nullptr, bits, p, batch, T, C, NH);
    b_.launch_kernel(s, forward_, shape(batch, T, NH, T * 4), a);
  }
  /// dqkv (overwritten) from dy, qkv and att; scratch: [B x NH x T x T] floats on CUDA, unused on the CPU.
  void backward(StreamRef s, void* dqkv, float* scratch, const void* dy, const float* att, const void* qkv,
                const std::uint32_t* bits, float p, std::int64_t batch, std::int64_t T, std::int64_t C,
                std::int64_t NH) const {
    const gpt_attention_args a = args(nullptr, dqkv, const_cast<float*>(att), scratch, qkv, dy, bits, p, batch, T, C, NH);
    b_.launch_kernel(s, backward_, shape(batch, T, NH, T * 4), a);
    if (backward_kv_.valid()) b_.launch_kernel(s, backward_kv_, shape(batch, T, NH, 0), a);
  }

  // The flash kernels (kernels/flash_attention.cuh): CUDA, 16-bit activations.

  [[nodiscard]] bool has_flash() const noexcept { return flash_forward_.valid(); }
  /// y and lse ([B x NH x T] floats) from qkv; bits: attention dropout's words or null.
  void flash_forward(StreamRef s, void* y, float* lse, const void* qkv, const std::uint32_t* bits, float p,
                     std::int64_t batch, std::int64_t T, std::int64_t C, std::int64_t NH) const {
    check_flash("flash_forward", {y, qkv}, batch, T, C, NH);
    b_.launch_kernel(s, flash_forward_, flash_shape(batch, T, NH), args(y, nullptr, lse, nullptr, qkv, nullptr, bits, p, batch, T, C, NH));
  }
  /// Which backward flash_backward runs.
  [[nodiscard]] FlashBackward flash_backward_kind() const noexcept { return flash_backward_; }
  /// dqkv (overwritten) from dy, the forward's y and lse, and qkv; scratch: flash_backward_scratch_floats
  /// floats (for this object's FlashBackward), 16-byte aligned.
  void flash_backward(StreamRef s, void* dqkv, float* scratch, const void* dy, const void* y, const float* lse,
                      const void* qkv, const std::uint32_t* bits, float p, std::int64_t batch, std::int64_t T,
                      std::int64_t C, std::int64_t NH) const {
    check_flash("flash_backward", {dqkv, dy, y, qkv, scratch}, batch, T, C, NH);
    const gpt_attention_args a =
        args(const_cast<void*>(y), dqkv, const_cast<float*>(lse), scratch, qkv, dy, bits, p, batch, T, C, NH);
    if (flash_backward_ == FlashBackward::fused) {
      b_.launch_kernel(s, flash_prep_, flash_shape(batch, T, NH), a);  // D, and the counters and ticket zeroed
      b_.launch_kernel(s, flash_fused_, flash_shape(batch, T, NH), a);
      return;
    }
    b_.launch_kernel(s, flash_dq_, flash_shape(batch, T, NH), a);  // writes D, which flash_dkv_ reads
    b_.launch_kernel(s, flash_dkv_, flash_shape(batch, T, NH), a);
  }

  // The GEMM path's kernels (kernels/attention.h).

  /// tokens [B x T x parts*C] <-> heads[p] [B x NH x T x hs] (to_tokens: heads into tokens).
  void permute(StreamRef s, void* const* heads, int parts, void* tokens, bool to_tokens, std::int64_t batch,
               std::int64_t T, std::int64_t C, std::int64_t NH) const {
    gpt_permute_args a{};
    for (int p = 0; p < parts; ++p) a.heads[p] = heads[p];
    a.tokens = tokens;
    a.B = batch;
    a.T = T;
    a.C = C;
    a.NH = NH;
    a.parts = parts;
    a.to_tokens = to_tokens ? 1 : 0;
    const std::int64_t n = batch * T * parts * C;
    const std::int64_t blocks = (n + 255) / 256;
    b_.launch_kernel(s, permute_,
                     accel::ops::LaunchShape::blocks(static_cast<std::uint32_t>(blocks < 65536 ? blocks : 65536), 256,
                                                     0, threads_),
                     a);
  }
  /// Scores -> P in place (causal); with bits, pd = P x the dropout's factors.
  void softmax_forward(StreamRef s, void* att, void* pd, const std::uint32_t* bits, float p, std::int64_t heads,
                       std::int64_t T) const {
    b_.launch_kernel(s, softmax_forward_, rows_shape(heads * T), softmax_args(att, pd, nullptr, bits, p, heads, T, 0));
  }
  /// dPd -> dS in place (scale_qk folded in).
  void softmax_backward(StreamRef s, void* datt, const void* att, const std::uint32_t* bits, float p,
                        std::int64_t heads, std::int64_t T, float scale_qk) const {
    b_.launch_kernel(s, softmax_backward_, rows_shape(heads * T),
                     softmax_args(const_cast<void*>(att), nullptr, datt, bits, p, heads, T, scale_qk));
  }

  /// Whether the CPU's bf16 attention of this shape runs its products on AMX tiles (kernels/attention.cpp);
  /// false on other backends.
  bool cpu_attention_amx(StreamRef s, std::int64_t C, std::int64_t NH) const {
    if (!amx_.valid()) return false;
    int amx = 0;
    b_.launch_kernel(s, amx_, accel::ops::LaunchShape::blocks(1, 1, 0, 1), gpt_attention_amx_args{C, NH, &amx});
    s.synchronize();
    return amx != 0;
  }

  /// The CPU's measured FMA peak in FLOP/s on `threads` threads (0: all); 0 on other backends.
  double measure_peak(StreamRef s, double seconds, int threads) const {
    if (!peak_.valid()) return 0;
    double result = 0;
    b_.launch_kernel(s, peak_, accel::ops::LaunchShape::blocks(1, 1, 0, threads), gpt_peak_args{&result, seconds});
    s.synchronize();
    return result;
  }

 private:
  static gpt_attention_args args(void* y, void* dqkv, float* att, float* scratch, const void* qkv, const void* dy,
                                 const std::uint32_t* bits, float p, std::int64_t batch, std::int64_t T, std::int64_t C,
                                 std::int64_t NH) {
    gpt_attention_args a{};
    a.y = y;
    a.dqkv = dqkv;
    a.att = att;
    a.scratch = scratch;
    a.qkv = qkv;
    a.dy = dy;
    a.bits = bits;
    a.B = batch;
    a.T = T;
    a.C = C;
    a.NH = NH;
    const double t = static_cast<double>(p) * 4294967296.0;
    a.threshold = static_cast<unsigned int>(t >= 4294967295.0 ? 4294967295.0 : t);
    a.scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
    return a;
  }
  // CUDA: a block per (row, head, batch) with T floats of shared memory; host: the thread count.
  [[nodiscard]] accel::ops::LaunchShape shape(std::int64_t batch, std::int64_t T, std::int64_t NH,
                                              std::int64_t shared) const {
    accel::ops::LaunchShape l = accel::ops::LaunchShape::blocks(static_cast<std::uint32_t>(T), 128,
                                                                static_cast<std::uint32_t>(shared), threads_);
    l.grid[1] = static_cast<std::uint32_t>(NH);
    l.grid[2] = static_cast<std::uint32_t>(batch);
    return l;
  }

  // The flash kernels' preconditions (kernels/flash_attention.cuh): the head size they were resolved
  // for, C a multiple of 8 and 16-byte aligned tensors (their tile loads move 16 bytes), sizes > 0.
  void check_flash(const char* what, std::initializer_list<const void*> tensors, std::int64_t batch, std::int64_t T,
                   std::int64_t C, std::int64_t NH) const {
    const auto fail = [&](const std::string& why) {
      throw accel::InvalidArgumentError(std::string("GptKernels::") + what + ": " + why);
    };
    if (!has_flash()) fail("no flash kernels here (CUDA, bf16/fp16, head size 32 or 64: see flash_attention_fits)");
    if (batch <= 0 || T <= 0 || NH <= 0 || C <= 0) fail("batch, T, C and NH must be > 0");
    if (C % NH != 0 || C / NH != flash_head_size_) {
      fail("head size C / NH = " + std::to_string(C) + " / " + std::to_string(NH) + ", the kernels are for " +
           std::to_string(flash_head_size_));
    }
    if (C % 8 != 0) fail("C = " + std::to_string(C) + " is not a multiple of 8");
    for (const void* t : tensors) {
      if (reinterpret_cast<std::uintptr_t>(t) % 16 != 0) fail("a tensor is not 16-byte aligned");
    }
  }

  // The flash kernels: a block of 128 threads per (64-row tile, head, batch).
  [[nodiscard]] accel::ops::LaunchShape flash_shape(std::int64_t batch, std::int64_t T, std::int64_t NH) const {
    accel::ops::LaunchShape l = accel::ops::LaunchShape::blocks(static_cast<std::uint32_t>((T + 63) / 64), 128, 0, threads_);
    l.grid[1] = static_cast<std::uint32_t>(NH);
    l.grid[2] = static_cast<std::uint32_t>(batch);
    return l;
  }

  static gpt_softmax_args softmax_args(void* att, void* pd, void* datt, const std::uint32_t* bits, float p,
                                       std::int64_t heads, std::int64_t T, float scale_qk) {
    gpt_softmax_args a{};
    a.att = att;
    a.pd = pd;
    a.datt = datt;
    a.bits = bits;
    a.heads = heads;
    a.T = T;
    const double t = static_cast<double>(p) * 4294967296.0;
    a.threshold = static_cast<unsigned int>(t >= 4294967295.0 ? 4294967295.0 : t);
    a.scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
    a.scale_qk = scale_qk;
    return a;
  }
  // CUDA: one warp per row, 8 rows per block.
  [[nodiscard]] accel::ops::LaunchShape rows_shape(std::int64_t rows) const {
    return accel::ops::LaunchShape::blocks(static_cast<std::uint32_t>(rows > 0 ? (rows + 7) / 8 : 1), 256, 0, threads_);
  }

  B b_;
  int threads_ = 0;
  accel::ops::Kernel forward_, backward_, backward_kv_, permute_, softmax_forward_, softmax_backward_, peak_, amx_;
  accel::ops::Kernel flash_forward_, flash_dq_, flash_dkv_, flash_prep_, flash_fused_;
  std::int64_t flash_head_size_ = 0;
  FlashBackward flash_backward_ = FlashBackward::split;
};

}  // namespace engine
