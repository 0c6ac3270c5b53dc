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

// Only the light corner of Hana (basic_tuple, type, unpack): every translation unit that includes a
// dispatch header parses it (benchmarks/compile/compile_cost.sh measures the share).
#include <boost/hana/basic_tuple.hpp>
#include <boost/hana/type.hpp>
#include <boost/hana/unpack.hpp>

#include <utility>

namespace accel::detail {

namespace hana = boost::hana;

inline constexpr auto enabled_backends = hana::make_basic_tuple(
#if defined(ACCEL_HAS_CUDA)
    hana::type_c<CudaBackend>,
#endif
    hana::type_c<CpuBackend>);

template <template <class...> class Into, class... Extra>
struct apply_to {
  template <class... Bs>
  constexpr auto operator()(hana::basic_type<Bs>...) const {
    return hana::type_c<Into<Bs..., Extra...>>;
  }
};

/// Into<enabled backends..., Extra...>, e.g. std::variant<CudaBackend, CpuBackend>.
template <template <class...> class Into, class... Extra>
using apply_enabled_backends = typename decltype(hana::unpack(enabled_backends, apply_to<Into, Extra...>{}))::type;

}  // namespace accel::detail
