// accel/ops/fused_adam.hpp — fused Adam/AdamW: options, tensors, and the host (CPU) kernel's caller.
//
//   AdamOptions    torch.optim.Adam/AdamW's hyper-parameters (lr, betas, eps, weight_decay, amsgrad,
//                  maximize) plus DeepSpeed's adamw_mode and bias_correction; doubles, like Python's
//   AdamTensor     one parameter tensor: param, grad, exp_avg, exp_avg_sq, optional max_exp_avg_sq
//                  (AMSGrad) and optional model_copy (a float16/bfloat16 copy of the updated param,
//                  written in the same pass: fp32 master weights feeding a half-precision model)
//   AdamDtypes     param (float32 | bfloat16; the states share it), grad (float32 | float16 |
//                  bfloat16), model_copy (float16 | bfloat16, float32 params only)
//   adam_hparams() the kernel arguments for step `step` (1 for the first step, as torch counts):
//                  step_size = lr / (1 - beta1^step), inv_bc2_sqrt = 1 / sqrt(1 - beta2^step),
//                  computed in double
//   HostFusedAdam  the loaded CPU kernel; step_sync() runs it on the calling thread (cpu::FusedAdamOp
//                  enqueues it on a stream instead)
//
// The update, per element (torch's): g = grad (negated if maximize); Adam: g += wd * p; AdamW:
// p *= 1 - lr*wd; m = beta1*m + (1-beta1)*g; v = beta2*v + (1-beta2)*g*g; AMSGrad: vmax = max(vmax, v)
// and v is replaced by vmax below; p -= step_size * m / (sqrt(v) * inv_bc2_sqrt + eps).
#pragma once

#include <accel/core/dtype.hpp>
#include <accel/core/error.hpp>
#include <accel/detail/format_number.hpp>
#include <accel/ops/abi.hpp>
#include <accel/ops/detail/thread_count.hpp>
#include <accel/ops/op_builder.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace accel::ops {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool adamw = false;            ///< decoupled weight decay (torch.optim.AdamW; DeepSpeed's adamw_mode)
  bool amsgrad = false;
  bool bias_correction = true;
  bool maximize = false;
};

struct AdamTensor {
  void* param = nullptr;
  const void* grad = nullptr;
  void* exp_avg = nullptr;
  void* exp_avg_sq = nullptr;
  void* max_exp_avg_sq = nullptr;  ///< AMSGrad only
  void* model_copy = nullptr;      ///< optional
  std::int64_t numel = 0;
};

struct AdamDtypes {
  Dtype param = Dtype::float32;
  Dtype grad = Dtype::float32;
  std::optional<Dtype> model_copy;  ///< float16 or bfloat16 when the tensors carry a model copy
};

/// The kernel arguments of step `step` (>= 1). Throws InvalidArgumentError for a bad combination.
[[nodiscard]] inline abi::AdamHParams adam_hparams(const AdamOptions& o, std::int64_t step, const AdamDtypes& d) {
  if (step < 1) throw InvalidArgumentError("fused_adam: step must be >= 1 (torch counts from 1), got " + std::to_string(step));
  if (d.param != Dtype::float32 && d.param != Dtype::bfloat16) {
    throw InvalidArgumentError("fused_adam: param dtype must be float32 or bfloat16, got " + std::string(name(d.param)));
  }
  if (d.grad != Dtype::float32 && d.grad != Dtype::float16 && d.grad != Dtype::bfloat16) {
    throw InvalidArgumentError("fused_adam: grad dtype must be float32, float16 or bfloat16, got " +
                               std::string(name(d.grad)));
  }
  if (d.model_copy && *d.model_copy != Dtype::float16 && *d.model_copy != Dtype::bfloat16) {
    throw InvalidArgumentError("fused_adam: model copy dtype must be float16 or bfloat16, got " +
                               std::string(name(*d.model_copy)));
  }
  if (d.model_copy && d.param != Dtype::float32) {
    throw InvalidArgumentError("fused_adam: a model copy needs float32 (master) params");
  }
  // Each hyper-parameter by name (NaN fails every test, as it should).
  const auto bad = [](const char* what, double v, const char* range) {
    return InvalidArgumentError(std::string("fused_adam: ") + what + " = " + accel::detail::format_number(v) +
                                " must be " + range);
  };
  if (!(o.lr >= 0)) throw bad("lr", o.lr, ">= 0");
  if (!(o.beta1 >= 0 && o.beta1 < 1)) throw bad("beta1", o.beta1, "in [0, 1)");
  if (!(o.beta2 >= 0 && o.beta2 < 1)) throw bad("beta2", o.beta2, "in [0, 1)");
  if (!(o.eps >= 0)) throw bad("eps", o.eps, ">= 0");
  if (!(o.weight_decay >= 0)) throw bad("weight_decay", o.weight_decay, ">= 0");
  abi::AdamHParams h{};
  h.lr = static_cast<float>(o.lr);
  h.beta1 = static_cast<float>(o.beta1);
  h.beta2 = static_cast<float>(o.beta2);
  h.eps = static_cast<float>(o.eps);
  h.weight_decay = static_cast<float>(o.weight_decay);
  const double s = static_cast<double>(step);
  const double bc1 = o.bias_correction ? 1.0 - std::pow(o.beta1, s) : 1.0;
  const double bc2 = o.bias_correction ? 1.0 - std::pow(o.beta2, s) : 1.0;
  h.step_size = static_cast<float>(o.lr / bc1);
  h.inv_bc2_sqrt = static_cast<float>(1.0 / std::sqrt(bc2));
  h.decay_factor = static_cast<float>(o.adamw ? 1.0 - o.lr * o.weight_decay : 1.0);
  h.adamw = o.adamw ? 1 : 0;
  h.amsgrad = o.amsgrad ? 1 : 0;
  h.param_dtype = abi::code(d.param);
  h.grad_dtype = abi::code(d.grad);
  h.model_copy_dtype = d.model_copy ? abi::code(*d.model_copy) : abi::no_dtype;
  h.maximize = o.maximize ? 1 : 0;
  h.one_minus_beta1 = static_cast<float>(1.0 - o.beta1);
  h.one_minus_beta2 = static_cast<float>(1.0 - o.beta2);
  return h;
}

/// The tensors in the kernel's layout; throws InvalidArgumentError naming the first bad tensor.
[[nodiscard]] inline std::vector<abi::AdamTensor> adam_tensors(std::span<const AdamTensor> tensors,
                                                               const AdamOptions& o, const AdamDtypes& d) {
  std::vector<abi::AdamTensor> out;
  out.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const AdamTensor& t = tensors[i];
    const std::string which = "fused_adam: tensor " + std::to_string(i) + ": ";
    if (t.numel < 0) throw InvalidArgumentError(which + "numel is negative");
    if (t.numel > 0) {
      for (const auto& [name, pointer] : {std::pair<const char*, const void*>{"param", t.param}, {"grad", t.grad},
                                          {"exp_avg", t.exp_avg}, {"exp_avg_sq", t.exp_avg_sq}}) {
        if (pointer == nullptr) {
          throw InvalidArgumentError(which + name + " is null (numel " + std::to_string(t.numel) + ")");
        }
      }
      if (o.amsgrad && t.max_exp_avg_sq == nullptr) throw InvalidArgumentError(which + "amsgrad needs max_exp_avg_sq");
      if (d.model_copy && t.model_copy == nullptr) {
        throw InvalidArgumentError(which + "a model copy dtype is set but model_copy is null");
      }
    }
    out.push_back(abi::AdamTensor{t.param, t.grad, t.exp_avg, t.exp_avg_sq, o.amsgrad ? t.max_exp_avg_sq : nullptr,
                                  d.model_copy ? t.model_copy : nullptr, t.numel, 0});
  }
  return out;
}

/// The CPU fused Adam kernel, loaded (kernels/cpu/fused_adam.cpp).
class HostFusedAdam {
 public:
  using Fn = int(const abi::AdamHParams*, const abi::AdamTensor*, long long, int);

  explicit HostFusedAdam(LoadedOp op) : op_(std::move(op)), fn_(op_.function<Fn>("accel_fused_adam")) {}

  /// OpenMP threads per step (0: all, omp_get_max_threads()). Results do not depend on it.
  void set_num_threads(int n) { threads_ = detail::checked_thread_count("HostFusedAdam", n); }
  [[nodiscard]] int num_threads() const noexcept { return threads_; }

  /// One step over all tensors, on the calling thread. Blocking.
  void step_sync(std::span<const AdamTensor> tensors, const AdamOptions& o, std::int64_t step,
                 const AdamDtypes& d = {}) const {
    const abi::AdamHParams h = adam_hparams(o, step, d);
    const std::vector<abi::AdamTensor> t = adam_tensors(tensors, o, d);
    run(h, t);
  }

  /// The raw call (arguments already checked).
  void run(const abi::AdamHParams& h, const std::vector<abi::AdamTensor>& t) const {
    if (const int rc = fn_(&h, t.data(), static_cast<long long>(t.size()), threads_); rc != 0) {
      throw InvalidArgumentError("fused_adam (cpu): the kernel rejected its arguments (code " + std::to_string(rc) + ")");
    }
  }

  [[nodiscard]] const LoadedOp& op() const noexcept { return op_; }

 private:
  LoadedOp op_;
  Fn* fn_;
  int threads_ = 0;
};

}  // namespace accel::ops
