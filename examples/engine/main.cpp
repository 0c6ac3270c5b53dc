// engine — trains nanoGPT's GPT on a text file with accel, on the backend ACCEL_BACKEND selects.
//
//   engine --size tiny --sample 300                     (see --help)
//
// main() parses and checks the command line, then enters Engine<B> once through accel::visit: every
// call inside is a direct call on the concrete backend (CpuBackend or CudaBackend). --dispatch any runs
// the same Engine as Engine<AnyBackend> instead, dispatching every call at run time. Exit status: 0
// when training ran (to the end, to --time, or to a signal with a checkpoint written), 2 for bad input
// (nothing allocated, nothing written), 1 for a failure while running.
#include "config.hpp"
#include "run.hpp"

#include <accel/accel.hpp>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  try {
    const auto cfg = engine::parse_args(argc, argv);
    if (!cfg) return 0;
    const accel::AnyBackend backend = accel::get_accelerator();
    if (cfg->dispatch == "any") return engine::Engine<accel::AnyBackend>(backend, *cfg).run();
    return accel::visit(backend, [&](auto b) { return engine::Engine<decltype(b)>(b, *cfg).run(); });
  } catch (const engine::UsageError& e) {
    std::fprintf(stderr, "engine: error: %s\n", e.what());
    return 2;
  } catch (const accel::BackendUnavailableError& e) {
    std::fprintf(stderr, "engine: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine: failed: %s\n", e.what());
    return 1;
  }
}
