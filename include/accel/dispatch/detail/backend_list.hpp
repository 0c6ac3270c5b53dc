// accel/dispatch/detail/backend_list.hpp — the one compile-time list of enabled backends.
//
// Priority order: get_accelerator() picks the first available entry. AnyBackend, the conformance
// suites' type list, the benchmarks and accel-report are all derived from this list, so enabling a
// backend is one line here. Boost.Hana stays in this folder: nothing public names a Hana type.
#pragma once

#include <accel/cpu/backend.hpp>
#if defined(ACCEL_HAS_CUDA)
#include <accel/cuda/backend.hpp>
#endif

#include <boost/hana/append.hpp>
#include <boost/hana/basic_tuple.hpp>
#include <boost/hana/concat.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <boost/hana/unpack.hpp>

#include <utility>

namespace accel::detail {

namespace hana = boost::hana;

inline constexpr auto enabled_backends = hana::tuple_t<
#if defined(ACCEL_HAS_CUDA)
    CudaBackend,
#endif
    CpuBackend>;

/// Into<enabled backends..., Extra...>, e.g. std::variant<CudaBackend, CpuBackend>.
template <template <class...> class Into, class... Extra>
using apply_enabled_backends = typename decltype(hana::unpack(
    hana::concat(enabled_backends, hana::tuple_t<Extra...>), hana::template_<Into>))::type;

}  // namespace accel::detail
