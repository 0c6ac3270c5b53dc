// accel::ops::Registry, op_table and format_op_table over toolchains whose answers the test sets: the
// lookup by op and by DeepSpeed class name, the unknown-name message, ds_report's rows when a probe says
// no, throws, or finds a cache entry, and the table's exact text. Also the small value types the report
// is made of (Compatibility::str, LoadedOp's refusals). No compiler runs.
#include <accel/ops/registry.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace registry_test {

accel::ops::BuildCommand no_build(const accel::ops::OpBuilder& b) {
  accel::ops::BuildCommand c;
  c.op = b.name();
  return c;
}
accel::ops::LoadedOp no_load(const accel::ops::OpBuilder& b) {
  throw accel::InvalidStateError("op '" + b.name() + "': the test toolchain loads nothing");
}

// What the fake toolchain answers, per op name.
accel::ops::Compatibility compatible_unless_named(const accel::ops::OpBuilder& b) {
  accel::ops::Compatibility c;
  if (b.name() == "no_compiler") {
    c.fail("no C++ compiler found");
    c.fail("CXX names a missing program");
  } else if (b.name() == "probe_throws") {
    throw std::runtime_error("the probe itself failed");
  } else {
    c.notes.push_back("AVX2 path");
  }
  return c;
}
bool cached_when_named(const accel::ops::OpBuilder& b) {
  if (b.name() == "cache_throws") throw std::runtime_error("unreadable cache");
  return b.name() == "cached_op" || b.name() == "no_compiler";  // an incompatible op's is never asked
}

constexpr accel::ops::Toolchain test_toolchain{"test", &compatible_unless_named, &no_build, &no_load, "so",
                                               &cached_when_named};

accel::ops::OpSpec spec(std::string name, std::string class_name, accel::ops::OpKind kind = accel::ops::OpKind::host) {
  accel::ops::OpSpec s;
  s.name = std::move(name);
  s.class_name = std::move(class_name);
  s.kind = kind;
  s.sources = {"dir/" + s.name + ".cpp", "common/shared.cpp"};
  s.include_dirs = {"dir", "common"};
  return s;
}

accel::ops::Registry make_registry() {
  return accel::ops::Registry("testdev", {{spec("cached_op", "CachedOpBuilder"), &test_toolchain},
                                          {spec("no_compiler", "NoCompilerBuilder", accel::ops::OpKind::cuda), &test_toolchain},
                                          {spec("probe_throws", "ProbeThrowsBuilder"), &test_toolchain},
                                          {spec("cache_throws", "CacheThrowsBuilder"), &test_toolchain},
                                          {spec("fresh_op", "FreshOpBuilder"), &test_toolchain}});
}

}  // namespace registry_test

using registry_test::make_registry;

}  // namespace

TEST_CASE("ops::Registry: names in table order, found by op name or class name, unknown names listing all") {
  const auto registry = make_registry();
  CHECK(registry.backend() == "testdev");
  CHECK(registry.entries().size() == 5);
  CHECK(registry.names() ==
        std::vector<std::string>{"cached_op", "no_compiler", "probe_throws", "cache_throws", "fresh_op"});
  CHECK(registry.contains("fresh_op"));
  CHECK(registry.contains("FreshOpBuilder"));
  CHECK_FALSE(registry.contains("fresh"));          // whole names only
  CHECK_FALSE(registry.contains("freshopbuilder"));  // case matters, as in DeepSpeed's ALL_OPS
  CHECK_FALSE(registry.contains(""));

  const auto by_class = registry.create("NoCompilerBuilder");
  CHECK(by_class.name() == "no_compiler");
  CHECK(by_class.kind() == accel::ops::OpKind::cuda);
  CHECK(by_class.backend() == "testdev");
  CHECK(by_class.toolchain().name == "test");
  CHECK(registry.create("fresh_op").spec().class_name == "FreshOpBuilder");

  const std::string expected =
      "testdev: unknown op 'fused_lamb': the testdev backend's ops are cached_op (CachedOpBuilder), no_compiler "
      "(NoCompilerBuilder), probe_throws (ProbeThrowsBuilder), cache_throws (CacheThrowsBuilder), fresh_op "
      "(FreshOpBuilder)";
  CHECK_THROWS_WITH_AS((void)registry.create("fused_lamb"), expected.c_str(), accel::InvalidArgumentError);

  const accel::ops::Registry empty("nothing", {});
  CHECK(empty.names().empty());
  const std::string none = "nothing: unknown op 'x': the nothing backend's ops are ";
  CHECK_THROWS_WITH_AS((void)empty.create("x"), none.c_str(), accel::InvalidArgumentError);
}

TEST_CASE("ops::op_table: a probe that says no or throws makes the op incompatible, and only compatible ops are asked for a cache entry") {
  const auto rows = accel::ops::op_table(make_registry());
  REQUIRE(rows.size() == 5);

  CHECK(rows[0].name == "cached_op");
  CHECK(rows[0].class_name == "CachedOpBuilder");
  CHECK(rows[0].kind == accel::ops::OpKind::host);
  CHECK(rows[0].compatible.ok);
  CHECK(rows[0].compatible.notes == std::vector<std::string>{"AVX2 path"});
  CHECK(rows[0].cached);

  CHECK(rows[1].name == "no_compiler");
  CHECK(rows[1].kind == accel::ops::OpKind::cuda);
  CHECK_FALSE(rows[1].compatible.ok);
  CHECK(rows[1].compatible.reasons == std::vector<std::string>{"no C++ compiler found", "CXX names a missing program"});
  CHECK_FALSE(rows[1].cached);  // the fake says cached; an op that cannot build is not asked

  CHECK(rows[2].name == "probe_throws");  // like DeepSpeed's probe: the exception becomes the reason
  CHECK_FALSE(rows[2].compatible.ok);
  CHECK(rows[2].compatible.reasons == std::vector<std::string>{"the probe itself failed"});
  CHECK_FALSE(rows[2].cached);

  CHECK(rows[3].name == "cache_throws");  // compatible; a cache that cannot be read counts as not cached
  CHECK(rows[3].compatible.ok);
  CHECK_FALSE(rows[3].cached);

  CHECK(rows[4].name == "fresh_op");
  CHECK(rows[4].compatible.ok);
  CHECK_FALSE(rows[4].cached);
}

TEST_CASE("ops::format_op_table: DeepSpeed's dotted columns, each incompatible op's reasons and each op's notes below it") {
  const std::string text = accel::ops::format_op_table(accel::ops::op_table(make_registry()));
  const std::string expected =
      "op name ................ kind ... compatible ... cached\n"
      "cached_op .............. host ... [OKAY] ....... [YES]\n"
      "    note: AVX2 path\n"
      "no_compiler ............ cuda ... [NO] ......... [NO]\n"
      "    no C++ compiler found\n"
      "    CXX names a missing program\n"
      "probe_throws ........... host ... [NO] ......... [NO]\n"
      "    the probe itself failed\n"
      "cache_throws ........... host ... [OKAY] ....... [NO]\n"
      "    note: AVX2 path\n"
      "fresh_op ............... host ... [OKAY] ....... [NO]\n"
      "    note: AVX2 path\n";
  CHECK(text == expected);

  // A name as long as its column or longer pushes the row right, a blank on each side of where the dots were.
  accel::ops::OpStatus longer;
  longer.name = "a_very_long_op_name_over_24";
  CHECK(accel::ops::format_op_table({longer}).find("\na_very_long_op_name_over_24  host ... [OKAY] ....... [NO]\n") !=
        std::string::npos);
  CHECK(accel::ops::format_op_table({}) == "op name ................ kind ... compatible ... cached\n");
}

TEST_CASE("ops::Compatibility::str: yes with notes in brackets, no with its reasons") {
  accel::ops::Compatibility c;
  CHECK(c.str() == "yes");
  CHECK(static_cast<bool>(c));
  c.notes = {"AVX-512 path", "AOT build found"};
  CHECK(c.str() == "yes (AVX-512 path; AOT build found)");
  c.fail("NVRTC is missing");
  CHECK_FALSE(static_cast<bool>(c));
  CHECK(c.str() == "no: NVRTC is missing");  // the notes are not the answer any more
  c.fail("compute capability 6.0 < 7.0");
  CHECK(c.str() == "no: NVRTC is missing; compute capability 6.0 < 7.0");
}

TEST_CASE("ops::OpBuilder: paths under the kernel directory it is given, options read back as set") {
  auto b = make_registry().create("cached_op");
  b.set_kernel_dir("/opt/kernels").set_cache_dir("/var/cache/accel").set_aot_dir("/opt/aot");
  CHECK(b.kernel_dir() == std::filesystem::path("/opt/kernels"));
  CHECK(b.cache_dir() == std::filesystem::path("/var/cache/accel"));
  CHECK(b.aot_dir() == std::filesystem::path("/opt/aot"));
  CHECK(b.sources() == std::vector<std::filesystem::path>{"/opt/kernels/dir/cached_op.cpp", "/opt/kernels/common/shared.cpp"});
  CHECK(b.include_dirs() == std::vector<std::filesystem::path>{"/opt/kernels/dir", "/opt/kernels/common"});
  CHECK(b.extra_flags().empty());
  b.add_flags({"-DONE"}).add_flags({"-DTWO", "-DTHREE"});
  CHECK(b.extra_flags() == std::vector<std::string>{"-DONE", "-DTWO", "-DTHREE"});
  CHECK(b.arch() == 0);
  CHECK(b.device() == -1);
  b.set_arch(90).set_device(1);
  CHECK(b.arch() == 90);
  CHECK(b.device() == 1);
  CHECK(b.build_command().op == "cached_op");  // through the toolchain
  CHECK(b.is_compatible().ok);
  CHECK(b.is_cached());
  const std::string no_load = "op 'cached_op': the test toolchain loads nothing";
  CHECK_THROWS_WITH_AS((void)b.load(), no_load.c_str(), accel::InvalidStateError);
}

TEST_CASE("ops::LoadedOp: an op not loaded refuses lookups; a missing entry point and a host function of a cuda op are named") {
  const accel::ops::LoadedOp none;
  CHECK_FALSE(none.valid());
  CHECK(none.native_handle() == nullptr);
  CHECK(none.device() == -1);
  const std::string not_loaded = "op '': symbol lookup on an op that is not loaded";
  CHECK_THROWS_WITH_AS((void)none.find_symbol("f"), not_loaded.c_str(), accel::InvalidStateError);

  static int table_entry = 7;
  const auto lookup = [](void*, const char* name) -> void* {
    return std::string(name) == "present" ? static_cast<void*>(&table_entry) : nullptr;
  };
  const std::shared_ptr<void> handle(static_cast<void*>(&table_entry), [](void*) {});
  const accel::ops::LoadedOp host("op_a", accel::ops::OpKind::host, accel::ops::LoadSource::cache_hit, "/cache/op_a.so",
                                  handle, lookup, 0.25);
  CHECK(host.valid());
  CHECK(host.name() == "op_a");
  CHECK(host.source() == accel::ops::LoadSource::cache_hit);
  CHECK(host.path() == std::filesystem::path("/cache/op_a.so"));
  CHECK(host.load_seconds() == 0.25);
  CHECK(host.native_handle() == &table_entry);
  CHECK(host.find_symbol("present") == &table_entry);
  CHECK(host.find_symbol("absent") == nullptr);
  CHECK(host.symbol("present") == &table_entry);
  const std::string missing = "op 'op_a' (/cache/op_a.so) has no entry point 'absent'";
  CHECK_THROWS_WITH_AS((void)host.symbol("absent"), missing.c_str(), accel::InvalidArgumentError);
  const bool same_function = host.function<int()>("present") == reinterpret_cast<int (*)()>(&table_entry);
  CHECK(same_function);

  const accel::ops::LoadedOp module("op_b", accel::ops::OpKind::cuda, accel::ops::LoadSource::aot, "/aot/op_b.sm_90.cubin",
                                    handle, lookup, 0.0, 3);
  CHECK(module.device() == 3);
  CHECK(module.symbol("present") == &table_entry);
  const std::string cuda_function = "op 'op_b': function<F>() on a cuda op";
  CHECK_THROWS_WITH_AS((void)module.function<int()>("present"), cuda_function.c_str(), accel::InvalidStateError);

  CHECK(accel::ops::to_string(accel::ops::LoadSource::aot) == "aot");
  CHECK(accel::ops::to_string(accel::ops::LoadSource::cache_hit) == "cache_hit");
  CHECK(accel::ops::to_string(accel::ops::LoadSource::compiled) == "compiled");
  CHECK(accel::ops::to_string(accel::ops::OpKind::host) == "host");
  CHECK(accel::ops::to_string(accel::ops::OpKind::cuda) == "cuda");
}
