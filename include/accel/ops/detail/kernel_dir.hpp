// accel/ops/detail/kernel_dir.hpp — where the kernel sources live, as a string: $ACCEL_KERNEL_DIR, else
// the ACCEL_KERNEL_DIR macro the CMake target defines, else "".
//
// Every backend's op_builder_dir() returns this, so every translation unit that includes a backend
// parses this header: it needs <string> only, not <filesystem> (which brings locales and streams). The
// op builders proper take it as a std::filesystem::path (ops/op_builder.hpp: default_kernel_dir()).
#pragma once

#include <cstdlib>
#include <string>

namespace accel::ops::detail {

[[nodiscard]] inline std::string kernel_dir_string() {
  if (const char* dir = std::getenv("ACCEL_KERNEL_DIR"); dir != nullptr && *dir != '\0') return dir;
#ifdef ACCEL_KERNEL_DIR
  return ACCEL_KERNEL_DIR;
#else
  return {};
#endif
}

/// T, named through a template parameter: a member template whose return type is an op-builder type
/// declared but not yet defined (the op builders are opt-in, <accel/op_builders.hpp>) is only checked for
/// completeness where it is instantiated.
template <class Dependent, class T>
struct after {
  using type = T;
};
template <class Dependent, class T>
using after_t = typename after<Dependent, T>::type;

}  // namespace accel::ops::detail
