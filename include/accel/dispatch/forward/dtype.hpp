// accel/dispatch/forward/dtype.hpp — DtypeApi (concepts/dtype.hpp) of BasicAnyBackend<Bs...>: the
// active backend's answers.
#pragma once

#include <accel/core/dtype.hpp>
#include <accel/dispatch/detail/forward.hpp>

#include <vector>

namespace accel {

template <class... Bs>
struct AnyDtypeApi {
  [[nodiscard]] bool is_fp16_supported() const {
    return detail::on_active(*this, [](auto b) { return b.is_fp16_supported(); });
  }
  [[nodiscard]] bool is_bf16_supported() const {
    return detail::on_active(*this, [](auto b) { return b.is_bf16_supported(); });
  }
  [[nodiscard]] std::vector<Dtype> supported_dtypes() const {
    return detail::on_active(*this, [](auto b) { return b.supported_dtypes(); });
  }
  [[nodiscard]] bool is_triton_supported() const {
    return detail::on_active(*this, [](auto b) { return b.is_triton_supported(); });
  }
};

}  // namespace accel
