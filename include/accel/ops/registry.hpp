// accel/ops/registry.hpp — the ops accel ships, the per-backend op table, and DeepSpeed's op report.
//
// Op tags name an op at compile time (B::get_op_builder<accel::ops::FusedAdam>()); op names and
// DeepSpeed class names name it at run time (B::create_op_builder("fused_adam") or
// ("FusedAdamBuilder")). An unknown name throws InvalidArgumentError listing the backend's ops — never
// a None or a builder that fails later at load().
//
//   op           kind on cpu / on cuda      what
//   fused_adam   host / cuda (NVRTC)        multi-tensor Adam/AdamW (kernels/{cpu,cuda}/fused_adam.*)
//   cpu_adam     host / host                the CPU kernel under DeepSpeed's CPUAdam name; on the CUDA
//                                           backend this is the host optimizer for ZeRO-Offload
//   tensor_ops   host / cuda (NVRTC)        fill, cast, scale, multi-tensor L2 norm and isfinite
//   nn_ops       host / cuda (NVRTC)        embedding, LayerNorm (+ residual), residual add, GELU,
//                                           cross-entropy, dropout, clipping: forward and backward, launched through
//                                           ops/launch.hpp (ops/nn_ops.hpp: NnKernels<B>)
//   random_fill  - / cuda (NVRTC)           Philox4x32-10 fills (bits, uniform, normal) behind the
//                                           CUDA backend's RngApi; the CPU backend's fills are the
//                                           header-only random/fill.hpp, no op
//
// op_table(registry) gives ds_report's rows: name, kind, compatible (with reasons), cached.
#pragma once

#include <accel/core/error.hpp>
#include <accel/ops/op_builder.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace accel::ops {

/// Compile-time op tags.
struct FusedAdam {
  static constexpr std::string_view name = "fused_adam";
};
struct CpuAdam {
  static constexpr std::string_view name = "cpu_adam";
};
struct TensorOps {
  static constexpr std::string_view name = "tensor_ops";
};
struct RandomFill {
  static constexpr std::string_view name = "random_fill";
};

/// The specs of accel's ops (sources relative to the kernel directory).
namespace specs {

inline OpSpec host_fused_adam(std::string name = "fused_adam", std::string class_name = "FusedAdamBuilder") {
  OpSpec s;
  s.name = std::move(name);
  s.class_name = std::move(class_name);
  s.description = "multi-tensor fused Adam/AdamW on the CPU (AVX-512/AVX2/scalar, OpenMP)";
  s.kind = OpKind::host;
  s.sources = {"cpu/fused_adam.cpp"};
  s.headers = {"cpu/cpu_common.h", "cpu/cpu_convert.h", "common/accel_ops_abi.h"};
  s.include_dirs = {"cpu", "common"};
  s.flags = {"-mprefer-vector-width=512"};
  s.entry_points = {"accel_fused_adam", "accel_ops_abi_version", "accel_ops_isa"};
  return s;
}

inline OpSpec host_tensor_ops() {
  OpSpec s;
  s.name = "tensor_ops";
  s.class_name = "TensorOpsBuilder";
  s.description = "fill, cast, scale, multi-tensor L2 norm and isfinite on the CPU";
  s.kind = OpKind::host;
  s.sources = {"cpu/tensor_ops.cpp"};
  s.headers = {"cpu/cpu_common.h", "cpu/cpu_convert.h", "common/accel_ops_abi.h"};
  s.include_dirs = {"cpu", "common"};
  s.flags = {"-mprefer-vector-width=512"};
  s.entry_points = {"accel_fill", "accel_cast", "accel_scale", "accel_l2norm", "accel_isfinite"};
  return s;
}

inline OpSpec host_nn_ops() {
  OpSpec s;
  s.name = "nn_ops";
  s.class_name = "NNOpsBuilder";
  s.description = "embedding, LayerNorm, GELU, softmax cross-entropy, dropout, clipping on the CPU (float32, bfloat16, float16)";
  s.kind = OpKind::host;
  s.sources = {"cpu/nn_ops.cpp"};
  s.headers = {"cpu/cpu_common.h", "cpu/cpu_convert.h", "common/accel_ops_abi.h", "common/accel_nn_abi.h"};
  s.include_dirs = {"cpu", "common"};
  s.flags = {"-mprefer-vector-width=512"};
  for (const char* k : {"embedding_forward", "embedding_backward", "layernorm_forward", "layernorm_backward",
                        "gelu_forward", "gelu_backward", "cross_entropy", "add", "dropout", "clip"}) {
    for (const char* d : {"_f32", "_bf16", "_f16"}) s.entry_points.push_back(std::string("accel_nn_") + k + d);
  }
  return s;
}

inline OpSpec cuda_nn_ops() {
  OpSpec s;
  s.name = "nn_ops";
  s.class_name = "NNOpsBuilder";
  s.description = "embedding, LayerNorm, GELU, softmax cross-entropy, dropout, clipping on CUDA (float32, bfloat16, float16)";
  s.kind = OpKind::cuda;
  s.sources = {"cuda/nn_ops.cu"};
  s.headers = {"cuda/cuda_common.cuh", "common/accel_ops_abi.h", "common/accel_nn_abi.h"};
  s.include_dirs = {"cuda", "common"};
  s.min_compute_capability = 70;
  for (const char* k : {"embedding_forward", "embedding_backward", "layernorm_forward", "layernorm_backward",
                        "layernorm_backward_reduce", "gelu_forward", "gelu_backward", "cross_entropy", "add",
                        "dropout", "clip"}) {
    for (const char* d : {"_f32", "_bf16", "_f16"}) s.entry_points.push_back(std::string("accel_nn_") + k + d);
  }
  return s;
}

inline OpSpec cuda_fused_adam() {
  OpSpec s;
  s.name = "fused_adam";
  s.class_name = "FusedAdamBuilder";
  s.description = "multi-tensor fused Adam/AdamW on CUDA (one launch per 256 tensors)";
  s.kind = OpKind::cuda;
  s.sources = {"cuda/fused_adam.cu"};
  s.headers = {"cuda/cuda_common.cuh", "common/accel_ops_abi.h"};
  s.include_dirs = {"cuda", "common"};
  s.min_compute_capability = 70;  // 32 KB kernel parameters, __grid_constant__
  for (const char* p : {"f32", "bf16"}) {
    for (const char* g : {"f32", "f16", "bf16"}) {
      for (const char* c : {"none", "f16", "bf16"}) {
        if (std::string_view(p) == "bf16" && std::string_view(c) != "none") continue;
        s.entry_points.push_back(std::string("accel_fused_adam_p") + p + "_g" + g + "_c" + c);
      }
    }
  }
  return s;
}

inline OpSpec cuda_tensor_ops() {
  OpSpec s;
  s.name = "tensor_ops";
  s.class_name = "TensorOpsBuilder";
  s.description = "fill, cast, scale, multi-tensor L2 norm and isfinite on CUDA";
  s.kind = OpKind::cuda;
  s.sources = {"cuda/tensor_ops.cu"};
  s.headers = {"cuda/cuda_common.cuh", "common/accel_ops_abi.h"};
  s.include_dirs = {"cuda", "common"};
  s.min_compute_capability = 70;
  s.entry_points = {"accel_fill", "accel_scale", "accel_l2norm_partial", "accel_l2norm_finalize", "accel_isfinite"};
  return s;
}

// The kernel includes accel's own headers (random/detail/block_fill.hpp, the host fills' math): they
// are found at <kernel dir>/../include, which is accel's include/ in the source tree, and in an
// installed tree needs <datadir>/accel/include beside <datadir>/accel/kernels. They are in the key.
inline OpSpec cuda_random_fill() {
  OpSpec s;
  s.name = "random_fill";
  s.class_name = "RandomFillBuilder";
  s.description = "Philox4x32-10 fills on CUDA (raw bits, uniform and normal float/double), cuRAND's layout";
  s.kind = OpKind::cuda;
  s.sources = {"cuda/random_fill.cu"};
  s.headers = {"../include/accel/random/detail/block_fill.hpp", "../include/accel/random/distributions.hpp",
               "../include/accel/random/detail/portable_math.hpp", "../include/accel/random/philox.hpp"};
  s.include_dirs = {"../include"};
  s.min_compute_capability = 70;
  s.entry_points = {"accel_random_bits", "accel_random_uniform_f32", "accel_random_uniform_f64",
                    "accel_random_normal_f32", "accel_random_normal_f64"};
  return s;
}

}  // namespace specs

/// One op a backend offers: its spec and the toolchain that builds it.
struct RegistryEntry {
  OpSpec spec;
  const Toolchain* toolchain;
};

/// A backend's ops, looked up by name or DeepSpeed class name.
class Registry {
 public:
  Registry(std::string backend, std::vector<RegistryEntry> entries)
      : backend_(std::move(backend)), entries_(std::move(entries)) {}

  [[nodiscard]] const std::string& backend() const noexcept { return backend_; }
  [[nodiscard]] const std::vector<RegistryEntry>& entries() const noexcept { return entries_; }

  /// The op names, in table order.
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e.spec.name);
    return out;
  }

  [[nodiscard]] bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }

  /// A builder for `name` ("fused_adam" or "FusedAdamBuilder"); InvalidArgumentError listing the known
  /// ops otherwise.
  [[nodiscard]] OpBuilder create(std::string_view name) const {
    if (const RegistryEntry* e = find(name)) return OpBuilder(e->spec, e->toolchain, backend_);
    std::string known;
    for (const auto& e : entries_) {
      if (!known.empty()) known += ", ";
      known += e.spec.name + " (" + e.spec.class_name + ")";
    }
    throw InvalidArgumentError(backend_ + ": unknown op '" + std::string(name) + "': the " + backend_ +
                               " backend's ops are " + known);
  }

 private:
  [[nodiscard]] const RegistryEntry* find(std::string_view name) const noexcept {
    for (const auto& e : entries_) {
      if (e.spec.name == name || e.spec.class_name == name) return &e;
    }
    return nullptr;
  }

  std::string backend_;
  std::vector<RegistryEntry> entries_;
};

/// ds_report's op table for a backend: is each op compatible here (and why not), is it cached.
[[nodiscard]] inline std::vector<OpStatus> op_table(const Registry& registry) {
  std::vector<OpStatus> rows;
  for (const auto& name : registry.names()) {
    OpBuilder b = registry.create(name);
    OpStatus row;
    row.name = b.name();
    row.class_name = b.spec().class_name;
    row.kind = b.kind();
    try {
      row.compatible = b.is_compatible();
    } catch (const std::exception& e) {  // like DeepSpeed's probe_is_compatible: a probe never throws
      row.compatible.fail(e.what());
    }
    if (row.compatible.ok) {
      try {
        row.cached = b.is_cached();
      } catch (const std::exception&) {
        row.cached = false;
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

/// The table as text, DeepSpeed's layout:
///   op name ................ kind .. compatible .. cached
///   fused_adam ............. host .. [OKAY] ...... [YES]
/// with each incompatible op's reasons on the lines below it.
[[nodiscard]] inline std::string format_op_table(const std::vector<OpStatus>& rows) {
  const auto pad = [](std::string s, std::size_t width) {
    s += ' ';
    while (s.size() < width) s += '.';
    return s + ' ';
  };
  std::string out = pad("op name", 24) + pad("kind", 8) + pad("compatible", 14) + "cached\n";
  for (const auto& r : rows) {
    out += pad(r.name, 24) + pad(std::string(to_string(r.kind)), 8) + pad(r.compatible.ok ? "[OKAY]" : "[NO]", 14) +
           (r.cached ? "[YES]" : "[NO]") + "\n";
    for (const auto& why : r.compatible.reasons) out += "    " + why + "\n";
    for (const auto& note : r.compatible.notes) out += "    note: " + note + "\n";
  }
  return out;
}

}  // namespace accel::ops
