// engine — trains nanoGPT's GPT on a text file with accel, on the backend ACCEL_BACKEND selects.
//
//   engine --size tiny --sample 300                     (see --help)
//
// main() parses and checks the command line, then enters Engine<B> once through accel::visit: every
// call inside is a direct call on the concrete backend (CpuBackend or CudaBackend). --dispatch any runs
// the same Engine as Engine<AnyBackend> instead, dispatching every call at run time. (engine::train
// is Engine<B>(backend, config).run(), each instantiation compiled once: train.hpp.) Exit status: 0
// when training ran (to the end, to --time, or to a signal with a checkpoint written), 2 for bad input
// (nothing allocated, nothing written), 1 for a failure while running.
#include "checkpoint.hpp"
#include "config.hpp"
#include "train.hpp"

#include <accel/accel.hpp>
#if defined(ENGINE_HAS_COMM)
#include <accel/comm.hpp>
#endif

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace {

/// Prints the error (with the rank, on several) and returns the status. On several ranks a rank that
/// fails ends the job with that status (accel::comm::abort: the others' collectives fail naming this
/// rank instead of waiting for it until the timeout, then MPI_Abort ends them).
int fail(int status, const char* kind, const char* what) {
#if defined(ENGINE_HAS_COMM)
  if (accel::comm::is_initialized() && accel::comm::launch_info().world_size > 1) {
    const int rank = accel::comm::launch_info().rank;
    std::fprintf(stderr, "engine: rank %d: %s: %s\n", rank, kind, what);
    std::fflush(stderr);
    accel::comm::abort("engine: rank " + std::to_string(rank) + ": " + what, status);
  }
#endif
  std::fprintf(stderr, "engine: %s: %s\n", kind, what);
  return status;
}

/// An error every rank found together (AgreedUsageError): rank 0 prints it, and each rank returns the
/// status, so that the job ends as the ranks finalize, without an abort's flight recorders.
int agreed_failure(int status, const char* what) {
  int rank = 0;
#if defined(ENGINE_HAS_COMM)
  if (accel::comm::is_initialized()) rank = accel::comm::launch_info().rank;
#endif
  if (rank == 0) std::fprintf(stderr, "engine: error: %s\n", what);
  return status;
}

/// accel reads part of its configuration from the environment at first use: ACCEL_BACKEND when the
/// backend is selected, ACCEL_ALLOC_CONF at a device's first allocation, ACCEL_CPU_SPIN_US at the first
/// wait on a CPU stream, ACCEL_COMM_* when a communicator is made (the launcher's RANK / WORLD_SIZE at
/// accel::comm::init). A typo there is bad input like a bad flag (exit status 2, before anything is
/// allocated or written), so they are read here first. (No CUDA stream or allocation here: a rank's
/// device is chosen later, by its communicator, and a context made now would land on device 0.)
struct EnvironmentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

accel::AnyBackend select_backend() {
  try {
    return accel::get_accelerator();
  } catch (const accel::InvalidArgumentError& e) {
    throw EnvironmentError(e.what());
  }
}

template <class B>
void check_environment(B) {
  try {
    (void)accel::AllocatorConfig::from_env();
    if constexpr (std::is_same_v<B, accel::CpuBackend>) {
      typename B::Stream stream;
      stream.enqueue([] {});
      stream.synchronize();
    }
  } catch (const accel::InvalidArgumentError& e) {
    throw EnvironmentError(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
#if defined(ENGINE_HAS_COMM)
    try {
      accel::comm::init(argc, argv);  // under mpirun: MPI first (it may take its own arguments)
      (void)accel::comm::CommConfig::from_env();  // read at the first communicator, minutes later
    } catch (const accel::InvalidArgumentError& e) {  // a malformed RANK / WORLD_SIZE or ACCEL_COMM_*
      throw EnvironmentError(e.what());
    }
#endif
    const auto cfg = engine::parse_args(argc, argv);
    if (!cfg) return 0;
    if (!cfg->zero_to_fp32.empty()) return engine::zero_to_fp32(cfg->zero_to_fp32, cfg->zero_to_fp32_out);
    const accel::AnyBackend backend = select_backend();
    accel::visit(backend, [](auto b) { check_environment(b); });
    if (cfg->dispatch == "any") return engine::train(backend, *cfg);
    return accel::visit(backend, [&](auto b) { return engine::train(b, *cfg); });
  } catch (const engine::AgreedUsageError& e) {
    return agreed_failure(2, e.what());
  } catch (const engine::UsageError& e) {
    return fail(2, "error", e.what());
  } catch (const accel::BackendUnavailableError& e) {
    return fail(2, "error", e.what());
  } catch (const EnvironmentError& e) {
    return fail(2, "error", e.what());
  } catch (const std::exception& e) {
    return fail(1, "failed", e.what());
  }
}
