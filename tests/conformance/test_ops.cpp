// OpApi conformance: every backend names, describes and reports its op builders the same way
// (DeepSpeed's op_builder_dir / create_op_builder / get_op_builder / op report). Nothing is compiled:
// what a build would run and its cache key are checked, the builds themselves are tests/ops.
#include "backends.hpp"

#include <accel/op_builders.hpp>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace {

bool is_hex_key(const std::string& key) {
  return key.size() == 64 && std::all_of(key.begin(), key.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

template <class B>
accel::ops::OpKind gpu_kind(const B& b) {
  return b.device_type() == accel::DeviceType::cpu ? accel::ops::OpKind::host : accel::ops::OpKind::cuda;
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("ops: names, builders by name and by DeepSpeed class name", B, op_names) {
  const B b;
  const std::vector<std::string> names = b.op_names();
  // Every backend offers DeepSpeed's three and nn_ops (ops/nn_ops.hpp); the CUDA backend adds its random fills.
  for (const char* op : {"fused_adam", "cpu_adam", "tensor_ops", "nn_ops"}) {
    CHECK_MESSAGE(std::count(names.begin(), names.end(), op) == 1, op);
  }
  CHECK(names.size() == (b.device_type() == accel::DeviceType::cpu ? 4U : 5U));
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());

  for (const std::string& name : names) {
    CAPTURE(name);
    const accel::ops::OpBuilder builder = b.create_op_builder(name);
    CHECK(builder.name() == name);
    CHECK(builder.backend() == b.name());
    const std::string class_name = builder.spec().class_name;
    CHECK(class_name.ends_with("Builder"));
    CHECK(b.create_op_builder(class_name).name() == name);  // DeepSpeed's class name finds the same op
    CHECK_FALSE(builder.spec().sources.empty());
    CHECK_FALSE(builder.spec().entry_points.empty());
  }
  CHECK(b.create_op_builder("fused_adam").kind() == gpu_kind(b));
  CHECK(b.create_op_builder("tensor_ops").kind() == gpu_kind(b));
  CHECK(b.create_op_builder("nn_ops").kind() == gpu_kind(b));
  CHECK(b.create_op_builder("CPUAdamBuilder").kind() == accel::ops::OpKind::host);  // ZeRO-Offload's, everywhere

  // The typed builders of the compile-time tags are the same ops.
  const accel::ops::OpBuilder adam = b.template get_op_builder<accel::ops::FusedAdam>();
  CHECK(adam.name() == "fused_adam");
  CHECK(adam.spec().class_name == "FusedAdamBuilder");
  const accel::ops::OpBuilder tensor_ops = b.template get_op_builder<accel::ops::TensorOps>();
  CHECK(tensor_ops.name() == "tensor_ops");
  CHECK(tensor_ops.kind() == gpu_kind(b));
  const accel::ops::OpBuilder cpu_adam = b.template get_op_builder<accel::ops::CpuAdam>();  // ZeRO-Offload's
  CHECK(cpu_adam.name() == "cpu_adam");
  CHECK(cpu_adam.spec().class_name == "CPUAdamBuilder");
  CHECK(cpu_adam.kind() == accel::ops::OpKind::host);
}

TEST_CASE_TEMPLATE_DEFINE("ops: an unknown op is an error listing the backend's ops", B, op_unknown) {
  const B b;
  try {
    (void)b.create_op_builder("fused_lamb");
    FAIL("create_op_builder(\"fused_lamb\") returned a builder");
  } catch (const accel::InvalidArgumentError& e) {
    const std::string what = e.what();
    CHECK(what.find("'fused_lamb'") != std::string::npos);
    for (const std::string& name : b.op_names()) CHECK_MESSAGE(what.find(name) != std::string::npos, name);
  }
  CHECK_THROWS_AS((void)b.build_extension("FusedLambBuilder"), accel::InvalidArgumentError);
  CHECK_THROWS_AS((void)b.create_op_builder(""), accel::InvalidArgumentError);
}

TEST_CASE_TEMPLATE_DEFINE("ops: the kernel directory holds every op's sources", B, op_dir) {
  const B b;
  const std::filesystem::path dir = b.op_builder_dir();
  REQUIRE_FALSE(dir.empty());
  CHECK(dir == std::filesystem::path(accel::ops::default_kernel_dir()));
  for (const std::string& name : b.op_names()) {
    const accel::ops::OpBuilder builder = b.create_op_builder(name);
    for (const std::string& file : builder.spec().sources) {
      CHECK_MESSAGE(std::filesystem::is_regular_file(dir / file), name << ": " << (dir / file).string());
    }
    for (const std::string& file : builder.spec().headers) {
      CHECK_MESSAGE(std::filesystem::is_regular_file(dir / file), name << ": " << (dir / file).string());
    }
  }
}

TEST_CASE_TEMPLATE_DEFINE("ops: build_extension is the builder's command, keyed by its inputs", B, op_build) {
  const B b;
  for (const std::string& name : b.op_names()) {
    CAPTURE(name);
    const accel::ops::OpBuilder builder = b.create_op_builder(name);
    const accel::ops::BuildCommand command = b.build_extension(name);
    CHECK(command.op == name);
    CHECK(command.kind == builder.kind());
    CHECK(is_hex_key(command.key));
    CHECK_FALSE(command.argv.empty());
    CHECK_FALSE(command.compiler.empty());
    CHECK(command.output.filename().string().find(command.key.substr(0, 16)) != std::string::npos);
    // Deterministic: the same inputs give the same command and key, by name or by class name.
    const accel::ops::BuildCommand again = b.build_extension(builder.spec().class_name);
    CHECK(again.key == command.key);
    CHECK(again.argv == command.argv);
    CHECK(builder.build_command().key == command.key);
  }
  // Different ops (different sources) never share a key.
  std::set<std::string> keys;
  for (const std::string& name : b.op_names()) keys.insert(b.build_extension(name).key);
  CHECK(keys.size() == b.op_names().size());
}

TEST_CASE_TEMPLATE_DEFINE("ops: op_table is ds_report's rows, one per op in table order", B, op_table) {
  const B b;
  const std::vector<std::string> names = b.op_names();
  const std::vector<accel::ops::OpStatus> rows = b.op_table();
  REQUIRE(rows.size() == names.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(names[i]);
    const accel::ops::OpBuilder builder = b.create_op_builder(names[i]);
    CHECK(rows[i].name == names[i]);
    CHECK(rows[i].class_name == builder.spec().class_name);
    CHECK(rows[i].kind == builder.kind());
    const accel::ops::Compatibility compatible = builder.is_compatible();
    CHECK(rows[i].compatible.ok == compatible.ok);
    CHECK(rows[i].compatible.reasons == compatible.reasons);
    // An incompatible op says why; a cached one is compatible.
    if (!rows[i].compatible.ok) CHECK_FALSE(rows[i].compatible.reasons.empty());
    if (rows[i].cached) CHECK(rows[i].compatible.ok);
    if (rows[i].compatible.ok) CHECK(rows[i].cached == builder.is_cached());
  }
  // Without a device, a CUDA op is incompatible and says so; a host op does not depend on one.
  if (!b.is_available()) {
    for (const auto& row : rows) {
      if (row.kind == accel::ops::OpKind::cuda) CHECK_FALSE(row.compatible.ok);
    }
  }
  const std::string text = accel::ops::format_op_table(rows);
  for (const std::string& name : names) CHECK(text.find(name) != std::string::npos);
}

TEST_CASE_TEMPLATE_DEFINE("ops: a user's own op — create_op_builder(spec) takes the backend's toolchain; launch_kernel refuses an empty kernel",
                          B, op_user) {
  const B b;
  accel::ops::OpSpec spec;
  spec.name = "my_op";
  spec.class_name = "MyOpBuilder";
  spec.kind = gpu_kind(b);
  spec.sources = {"my_op.src"};
  spec.entry_points = {"my_kernel"};
  const accel::ops::OpBuilder builder = b.create_op_builder(spec);
  CHECK(builder.name() == "my_op");
  CHECK(builder.kind() == gpu_kind(b));
  CHECK(builder.backend() == b.name());
  CHECK(builder.spec().entry_points == std::vector<std::string>{"my_kernel"});
  if (b.device_type() == accel::DeviceType::cpu) {  // the CPU builds host ops only
    spec.kind = accel::ops::OpKind::cuda;
    CHECK_THROWS_WITH_AS((void)b.create_op_builder(spec), "cpu: op 'my_op' is a cuda op, which the cpu backend does not build",
                         accel::InvalidArgumentError);
  }
  ACCEL_SKIP_UNLESS_AVAILABLE(B);
  typename B::Stream s;
  const int arg = 7;
  CHECK_THROWS_WITH_AS(b.launch_kernel(typename B::StreamRef(s), accel::ops::Kernel{}, accel::ops::LaunchShape::linear(1, 1), arg),
                       (std::string(b.name()) + ": launch_kernel of an empty ops::Kernel").c_str(),
                       accel::InvalidArgumentError);
  s.synchronize();  // nothing was enqueued that could fail
}

TEST_CASE_TEMPLATE_APPLY(op_names, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(op_user, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(op_unknown, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(op_dir, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(op_build, ConformanceBackends);
TEST_CASE_TEMPLATE_APPLY(op_table, ConformanceBackends);
