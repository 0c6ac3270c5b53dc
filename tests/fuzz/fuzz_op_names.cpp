// Op names (ops/registry.hpp: Registry::create, what B::create_op_builder(name) runs on a name from
// user code or a config file). The registry here is the CPU backend's table (cpu::Ops::op_registry),
// built from the same specs without the CPU stream headers. Whatever the text: a known op name or
// DeepSpeed class name gives that op's builder; anything else is an InvalidArgumentError that quotes
// the name and lists every op. Nothing else escapes, and nothing is compiled or loaded.
#include "fuzz_main.hpp"

#include <accel/ops/host_compiler.hpp>
#include <accel/ops/registry.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_op_names: invariant broken: %s\n", what);
  std::abort();
}

const accel::ops::Registry& registry() {
  namespace ops = accel::ops;
  static const ops::Registry r("cpu", {
                                          {ops::specs::host_fused_adam(), &ops::host_toolchain},
                                          {ops::specs::host_fused_adam("cpu_adam", "CPUAdamBuilder"), &ops::host_toolchain},
                                          {ops::specs::host_tensor_ops(), &ops::host_toolchain},
                                      });
  return r;
}

}  // namespace

void accel_fuzz_one(std::string_view text) {
  const accel::ops::Registry& r = registry();
  const accel::ops::RegistryEntry* known = nullptr;
  for (const auto& e : r.entries()) {
    if (e.spec.name == text || e.spec.class_name == text) known = &e;
  }
  if (r.contains(text) != (known != nullptr)) fail("contains() disagrees with the table");
  try {
    const accel::ops::OpBuilder builder = r.create(text);
    if (known == nullptr) fail("created a builder for an unknown name");
    if (builder.name() != known->spec.name) fail("the builder is for another op");
    if (builder.backend() != "cpu") fail("the builder names another backend");
  } catch (const accel::InvalidArgumentError& e) {
    if (known != nullptr) fail("a known name was rejected");
    // what() is a C string: a name with a NUL in it cuts the message short there (reported
    // separately), so the message checks apply to names without one.
    if (text.find('\0') != std::string_view::npos) return;
    const std::string what = e.what();
    if (what.find("unknown op '" + std::string(text) + "'") == std::string::npos) fail("the error does not quote the name");
    for (const auto& entry : r.entries()) {
      if (what.find(entry.spec.name) == std::string::npos) fail("the error does not list every op");
    }
  }
}
