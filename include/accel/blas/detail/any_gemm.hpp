// accel/blas/detail/any_gemm.hpp — GEMM on AnyBackend: the stream's backend runs it, so that code
// written once for a backend B, Engine<AnyBackend> included, multiplies matrices the same way.
//
// The dispatch types are only declared here (dispatch/ defines them); nothing of them is used before a
// GEMM on AnyBackend is instantiated, by code that has included them.
#pragma once

#include <accel/blas/detail/arguments.hpp>
#include <accel/blas/detail/gemm_impl.hpp>

#include <cstddef>
#include <string>
#include <tuple>
#include <utility>

namespace accel {
template <class... Bs>
class BasicAnyBackend;
template <class... Bs>
class AnyStreamRef;
}  // namespace accel

namespace accel::blas::detail {

template <class... Bs>
struct GemmImpl<BasicAnyBackend<Bs...>> {
  /// What some backend of the list runs; on a stream of a backend that does not, a NotSupportedError
  /// at the call (run_on).
  template <class T>
  static constexpr bool supports = (GemmImpl<Bs>::template supports<T> || ...);

  template <class T>
  static void run(const Call& call, const AnyStreamRef<Bs...>& stream, const GemmArgs<T>& g) {
    run_on(std::index_sequence_for<Bs...>{}, call, stream, g);
  }

 private:
  template <class T, std::size_t... I>
  static void run_on(std::index_sequence<I...>, const Call& call, const AnyStreamRef<Bs...>& stream,
                     const GemmArgs<T>& g) {
    const std::size_t index = stream.index();
    (void)((index == I && (run_one<std::tuple_element_t<I, std::tuple<Bs...>>>(call, std::get<I>(stream.variant()), g),
                           true)) ||
           ...);
  }

  template <class B, class T, class S>
  static void run_one(const Call& call, const S& stream, const GemmArgs<T>& g) {
    if constexpr (GemmImpl<B>::template supports<T>) {
      GemmImpl<B>::run(call, stream, g);
    } else {
      throw NotSupportedError(call.str() + ": " + type_name<T>() + " GEMM is not available on the " +
                              std::string(B::name()) + " backend");
    }
  }
};

}  // namespace accel::blas::detail
