// accel/dispatch/backend_list.hpp — the enabled backends as ordinary C++ types.
//
//   accel::enabled_backends_t<std::tuple>             std::tuple<CudaBackend, CpuBackend> (CUDA builds)
//   accel::enabled_backends_t<MyList, MyBackend>      the enabled ones, then a user's own
#pragma once

#include <accel/dispatch/detail/backend_list.hpp>

namespace accel {

template <template <class...> class Into, class... Extra>
using enabled_backends_t = detail::apply_enabled_backends<Into, Extra...>;

}  // namespace accel
