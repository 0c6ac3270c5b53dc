// accel/ops/tensor_ops.hpp — fill, cast, scale, multi-tensor L2 norm and isfinite: the host kernel's caller.
//
//   TensorRef        {data, numel, dtype} (float32, float16 or bfloat16)
//   HostTensorOps    the loaded CPU kernels (kernels/cpu/tensor_ops.cpp), run on the calling thread;
//                    cpu::TensorOpsOp enqueues the same calls on a stream.
//     fill(dst, dtype, n, value)                 dst[i] = value (rounded to dtype)
//     cast(dst, dst_dtype, src, src_dtype, n)    copy with conversion (round to nearest even)
//     scale(dst, dst_dtype, src, src_dtype, n, s) dst[i] = src[i] * s (in place when dst == src)
//     l2norm(tensors, &total, per_tensor)        sqrt of the sum of squares (in double) of all tensors;
//                                                per_tensor (optional) gets each tensor's norm
//     all_finite(tensors, &flag)                 flag = 1 when no element is inf or NaN, else 0
// Results are bit-identical for any thread count (fixed partitioning and reduction order).
#pragma once

#include <accel/core/dtype.hpp>
#include <accel/core/error.hpp>
#include <accel/ops/abi.hpp>
#include <accel/ops/detail/thread_count.hpp>
#include <accel/ops/op_builder.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace accel::ops {

struct TensorRef {
  const void* data = nullptr;
  std::int64_t numel = 0;
  Dtype dtype = Dtype::float32;
};

namespace detail {
inline void check_float_dtype(const char* op, Dtype d) {
  if (d != Dtype::float32 && d != Dtype::float16 && d != Dtype::bfloat16) {
    throw InvalidArgumentError(std::string("tensor_ops ") + op + ": dtype must be float32, float16 or bfloat16, got " +
                               std::string(name(d)));
  }
}
inline void check_elements(const char* op, const char* name, const void* p, std::int64_t n) {
  if (n < 0) throw InvalidArgumentError(std::string("tensor_ops ") + op + ": n = " + std::to_string(n) + " is negative");
  if (n > 0 && p == nullptr) {
    throw InvalidArgumentError(std::string("tensor_ops ") + op + ": " + name + " is a null pointer with " +
                               std::to_string(n) + " elements");
  }
}
/// fill's arguments: a float dtype, n >= 0, dst given when n > 0.
inline void check_fill(const void* dst, Dtype dtype, std::int64_t n) {
  check_float_dtype("fill", dtype);
  check_elements("fill", "dst", dst, n);
}
/// scale's (and cast's): as fill's for both, and no overlap but exactly in place between dtypes of one
/// size (each element is read before it is written; any other overlap reads what was just written).
inline void check_scale(const void* dst, Dtype dst_dtype, const void* src, Dtype src_dtype, std::int64_t n) {
  check_float_dtype("scale", dst_dtype);
  check_float_dtype("scale", src_dtype);
  check_elements("scale", "dst", dst, n);
  check_elements("scale", "src", src, n);
  if (n == 0) return;
  const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
  const auto dst_bytes = static_cast<std::uintptr_t>(n) * size_of(dst_dtype);
  const auto src_bytes = static_cast<std::uintptr_t>(n) * size_of(src_dtype);
  const bool in_place = d == s && size_of(dst_dtype) == size_of(src_dtype);
  if (!in_place && d < s + src_bytes && s < d + dst_bytes) {
    throw InvalidArgumentError("tensor_ops scale: dst overlaps src (" + std::to_string(n) + " elements, " +
                               std::string(name(dst_dtype)) + " from " + std::string(name(src_dtype)) +
                               "): only exactly in place between dtypes of one size is allowed");
  }
}
/// A result pointer (l2norm's total, all_finite's flag).
inline void check_output(const char* op, const char* name, const void* p) {
  if (p == nullptr) throw InvalidArgumentError(std::string("tensor_ops ") + op + ": " + name + " is null");
}
[[nodiscard]] inline std::vector<abi::TensorRef> tensor_refs(const char* op, std::span<const TensorRef> tensors) {
  std::vector<abi::TensorRef> out;
  out.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorRef& t = tensors[i];
    check_float_dtype(op, t.dtype);
    if (t.numel < 0) {
      throw InvalidArgumentError(std::string("tensor_ops ") + op + ": tensor " + std::to_string(i) + " has numel " +
                                 std::to_string(t.numel));
    }
    if (t.numel > 0 && t.data == nullptr) {
      throw InvalidArgumentError(std::string("tensor_ops ") + op + ": tensor " + std::to_string(i) +
                                 " is a null pointer with " + std::to_string(t.numel) + " elements");
    }
    out.push_back(abi::TensorRef{t.data, t.numel, abi::code(t.dtype), 0});
  }
  return out;
}
}  // namespace detail

/// The CPU tensor kernels, loaded. Every call runs on the calling thread.
class HostTensorOps {
 public:
  explicit HostTensorOps(LoadedOp op)
      : op_(std::move(op)),
        fill_(op_.function<int(void*, int, long long, float, int)>("accel_fill")),
        scale_(op_.function<int(void*, int, const void*, int, long long, float, int)>("accel_scale")),
        l2norm_(op_.function<int(const abi::TensorRef*, long long, float*, float*, int)>("accel_l2norm")),
        isfinite_(op_.function<int(const abi::TensorRef*, long long, int*, int)>("accel_isfinite")) {}

  void set_num_threads(int n) { threads_ = detail::checked_thread_count("HostTensorOps", n); }
  [[nodiscard]] int num_threads() const noexcept { return threads_; }

  void fill(void* dst, Dtype dtype, std::int64_t n, float value) const {
    detail::check_fill(dst, dtype, n);
    check(fill_(dst, abi::code(dtype), n, value, threads_), "fill");
  }
  void cast(void* dst, Dtype dst_dtype, const void* src, Dtype src_dtype, std::int64_t n) const {
    scale(dst, dst_dtype, src, src_dtype, n, 1.0f);
  }
  void scale(void* dst, Dtype dst_dtype, const void* src, Dtype src_dtype, std::int64_t n, float s) const {
    detail::check_scale(dst, dst_dtype, src, src_dtype, n);
    check(scale_(dst, abi::code(dst_dtype), src, abi::code(src_dtype), n, s, threads_), "scale");
  }
  void l2norm(std::span<const TensorRef> tensors, float* total, float* per_tensor = nullptr) const {
    detail::check_output("l2norm", "total", total);
    run_l2norm(detail::tensor_refs("l2norm", tensors), total, per_tensor);
  }
  void all_finite(std::span<const TensorRef> tensors, int* flag) const {
    detail::check_output("all_finite", "flag", flag);
    run_all_finite(detail::tensor_refs("all_finite", tensors), flag);
  }

  // Checked-argument forms for stream tasks.
  void run_l2norm(const std::vector<abi::TensorRef>& t, float* total, float* per_tensor) const {
    check(l2norm_(t.data(), static_cast<long long>(t.size()), total, per_tensor, threads_), "l2norm");
  }
  void run_all_finite(const std::vector<abi::TensorRef>& t, int* flag) const {
    check(isfinite_(t.data(), static_cast<long long>(t.size()), flag, threads_), "all_finite");
  }

  [[nodiscard]] const LoadedOp& op() const noexcept { return op_; }

 private:
  static void check(int rc, const char* what) {
    if (rc != 0) {
      throw InvalidArgumentError(std::string("tensor_ops ") + what + " (cpu): the kernel rejected its arguments (code " +
                                 std::to_string(rc) + ")");
    }
  }

  LoadedOp op_;
  int (*fill_)(void*, int, long long, float, int);
  int (*scale_)(void*, int, const void*, int, long long, float, int);
  int (*l2norm_)(const abi::TensorRef*, long long, float*, float*, int);
  int (*isfinite_)(const abi::TensorRef*, long long, int*, int);
  int threads_ = 0;
};

}  // namespace accel::ops
