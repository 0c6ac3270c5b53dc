// accel-report — like DeepSpeed's ds_report: what this build of accel has, and what this machine offers.
//
//   accel-report           human-readable text
//   accel-report --json    the same facts as one JSON object
#include <accel/accel.hpp>
#include <accel/core/cpu_features.hpp>
#include <accel/random/fill.hpp>
#include <accel/op_builders.hpp>  // op_table() and format_op_table(): the op builders are opt-in
#if defined(ACCEL_HAS_MPI) || defined(ACCEL_HAS_NCCL)
#include <accel/comm.hpp>  // communication_backend_version(): the engines' versions come with accel/comm
#endif

#include <boost/version.hpp>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

std::string json_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string quoted(std::string_view text) { return "\"" + json_escape(text) + "\""; }

std::string gib(std::size_t bytes) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return os.str();
}

struct DeviceFacts {
  std::string name;
  std::size_t total_memory = 0;
  std::size_t available_memory = 0;
};

struct BackendFacts {
  std::string name;
  bool built = false;
  bool available = false;
  std::string reason;
  int device_count = 0;
  std::vector<DeviceFacts> devices;
  std::vector<std::string> dtypes;
  bool fp16 = false, bf16 = false;
  bool flags[4] = {};
  std::string communication_backend;
  std::string communication_backend_version;
  std::vector<std::string> visible_devices_envs;
  std::vector<accel::ops::OpStatus> ops;
};

template <accel::Accelerator B>
BackendFacts probe(B backend) {
  BackendFacts facts;
  facts.name = std::string(B::name());
  facts.built = true;
  const accel::Availability availability = backend.availability();
  facts.available = availability.available;
  facts.reason = availability.reason;
  facts.device_count = backend.device_count();
  facts.flags[0] = B::is_synchronized_device;
  facts.flags[1] = B::use_host_timers;
  facts.flags[2] = B::resolves_data_dependency;
  facts.flags[3] = B::handles_memory_backpressure;
  facts.communication_backend = std::string(backend.communication_backend_name());
  facts.communication_backend_version = backend.communication_backend_version();
  facts.visible_devices_envs = backend.visible_devices_envs();
  facts.ops = backend.op_table();
  if (!facts.available) return facts;
  for (int i = 0; i < facts.device_count; ++i) {
    const accel::MemoryInfo info = backend.get_memory_info(i);
    facts.devices.push_back({backend.device_name(i), info.total, info.free});
  }
  facts.fp16 = backend.is_fp16_supported();
  facts.bf16 = backend.is_bf16_supported();
  for (const accel::Dtype dtype : backend.supported_dtypes()) facts.dtypes.emplace_back(accel::name(dtype));
  return facts;
}

// Every backend of the build, in priority order (the same list AnyBackend and the tests use).
std::vector<BackendFacts> probe_all() {
  std::vector<BackendFacts> all;
  std::apply([&](auto... backends) { (all.push_back(probe(backends)), ...); }, accel::enabled_backends_t<std::tuple>{});
#if !defined(ACCEL_HAS_CUDA)
  all.insert(all.begin(), BackendFacts{.name = "cuda", .reason = "not built (configure with the CUDA toolkit "
                                                                 "present and ACCEL_ENABLE_CUDA=AUTO or ON)"});
#endif
  return all;
}

constexpr const char* flag_names[4] = {"is_synchronized_device", "use_host_timers", "resolves_data_dependency",
                                       "handles_memory_backpressure"};

void print_text(const std::vector<BackendFacts>& all, const accel::BackendSelection& selection) {
  std::cout << "accel " << ACCEL_VERSION_STRING << " — accelerator report\n";
  std::cout << "----------------------------------------------------------------\n";
  std::cout << "compiler ............ " << __VERSION__ << "\n";
  std::cout << "Boost (Hana) ........ " << BOOST_VERSION / 100000 << "." << BOOST_VERSION / 100 % 1000 << "\n";
  std::cout << "NVTX ranges ......... " << (accel::profile::has_nvtx() ? "yes (NVTX: libnvtx3interop, loaded when a profiler attaches)" : "no") << "\n";
  std::cout << "CPU ................. " << accel::cpu_model_name() << "\n";
  std::cout << "CPU features ........ " << accel::cpu_features().str() << "\n";
  std::cout << "host random fills ... Philox, " << accel::rng::fill_kernel_name() << " kernel\n";
  std::cout << "selected backend .... " << selection.name << " (" << selection.reason << ")\n";
  for (const auto& b : all) {
    std::cout << "\n[" << b.name << "] ";
    if (!b.built) {
      std::cout << "unavailable: " << b.reason << "\n";
      continue;
    }
    std::cout << (b.available ? "available" : "unavailable: " + b.reason) << "\n";
    std::cout << "  devices ........... " << b.device_count << "\n";
    for (const auto& d : b.devices) {
      std::cout << "    " << d.name << ": " << gib(d.total_memory) << " total, " << gib(d.available_memory)
                << " available\n";
    }
    if (b.available) {
      std::cout << "  fp16 / bf16 ....... " << (b.fp16 ? "yes" : "no") << " / " << (b.bf16 ? "yes" : "no") << "\n";
      std::cout << "  dtypes ............ ";
      for (std::size_t i = 0; i < b.dtypes.size(); ++i) std::cout << (i ? ", " : "") << b.dtypes[i];
      std::cout << "\n";
    }
    for (int f = 0; f < 4; ++f) {
      std::cout << "  " << flag_names[f] << std::string(28 - std::strlen(flag_names[f]), ' ')
                << (b.flags[f] ? "true" : "false") << "\n";
    }
    std::cout << "  communication ..... " << b.communication_backend << ": " << b.communication_backend_version << "\n";
    std::cout << "  visible devices ... ";
    for (const auto& v : b.visible_devices_envs) std::cout << v << " ";
    std::cout << "\n  op builders:\n" << accel::ops::format_op_table(b.ops);
  }
}

void print_json(const std::vector<BackendFacts>& all, const accel::BackendSelection& selection) {
  std::ostringstream os;
  os << "{\"version\":" << quoted(ACCEL_VERSION_STRING) << ",\"compiler\":" << quoted(__VERSION__)
     << ",\"boost\":" << BOOST_VERSION << ",\"nvtx\":" << (accel::profile::has_nvtx() ? "true" : "false")
     << ",\"cpu_model\":" << quoted(accel::cpu_model_name()) << ",\"cpu_features\":"
     << quoted(accel::cpu_features().str()) << ",\"host_rng_kernel\":" << quoted(accel::rng::fill_kernel_name())
     << ",\"selected\":{\"name\":"
     << quoted(selection.name) << ",\"from_environment\":" << (selection.from_environment ? "true" : "false")
     << ",\"reason\":" << quoted(selection.reason) << "},\"backends\":[";
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& b = all[i];
    os << (i ? "," : "") << "{\"name\":" << quoted(b.name) << ",\"built\":" << (b.built ? "true" : "false")
       << ",\"available\":" << (b.available ? "true" : "false") << ",\"reason\":" << quoted(b.reason)
       << ",\"device_count\":" << b.device_count << ",\"devices\":[";
    for (std::size_t d = 0; d < b.devices.size(); ++d) {
      os << (d ? "," : "") << "{\"name\":" << quoted(b.devices[d].name)
         << ",\"total_memory\":" << b.devices[d].total_memory
         << ",\"available_memory\":" << b.devices[d].available_memory << "}";
    }
    os << "],\"fp16\":" << (b.fp16 ? "true" : "false") << ",\"bf16\":" << (b.bf16 ? "true" : "false")
       << ",\"dtypes\":[";
    for (std::size_t d = 0; d < b.dtypes.size(); ++d) os << (d ? "," : "") << quoted(b.dtypes[d]);
    os << "],\"flags\":{";
    for (int f = 0; f < 4; ++f) os << (f ? "," : "") << quoted(flag_names[f]) << ":" << (b.flags[f] ? "true" : "false");
    os << "},\"communication_backend\":" << quoted(b.communication_backend)
       << ",\"communication_backend_version\":" << quoted(b.communication_backend_version) << ",\"ops\":[";
    for (std::size_t o = 0; o < b.ops.size(); ++o) {
      const auto& op = b.ops[o];
      os << (o ? "," : "") << "{\"name\":" << quoted(op.name) << ",\"class\":" << quoted(op.class_name)
         << ",\"compatible\":" << (op.compatible.ok ? "true" : "false") << ",\"cached\":" << (op.cached ? "true" : "false")
         << "}";
    }
    os << "]}";
  }
  os << "]}";
  std::cout << os.str() << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << "usage: accel-report [--json]\n";
      return 0;
    } else {
      std::cerr << "accel-report: unknown argument '" << argv[i] << "' (usage: accel-report [--json])\n";
      return 2;
    }
  }
  try {
    const accel::BackendSelection& selection = accel::accelerator_selection();
    const auto all = probe_all();
    if (json) {
      print_json(all, selection);
    } else {
      print_text(all, selection);
    }
  } catch (const accel::Error& e) {
    std::cerr << "accel-report: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
