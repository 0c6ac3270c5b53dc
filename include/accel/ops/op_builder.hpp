// accel/ops/op_builder.hpp — accel::ops::OpBuilder: DeepSpeed's OpBuilder, without Python or ninja.
//
// An op is a set of kernel sources under the kernel directory (op_builder_dir(): $ACCEL_KERNEL_DIR,
// else the ACCEL_KERNEL_DIR the CMake target defines), described by an OpSpec: its name
// ("fused_adam"), DeepSpeed's class name ("FusedAdamBuilder"), sources, headers, flags and entry
// points. An OpBuilder is an OpSpec plus the toolchain that builds it:
//
//   OpKind::host   the host C++ compiler ($CXX, else c++, g++, clang++ on PATH) with
//                  -O3 -march=native -fopenmp -shared -fPIC, loaded with dlopen (ops/host_compiler.hpp)
//   OpKind::cuda   NVRTC to a cubin for the device's sm_XY, loaded with cuModuleLoadData
//                  (ops/nvrtc.hpp compiles, cuda/detail/nvrtc_toolchain.hpp loads)
//
//   is_compatible()   yes/no with reasons (no compiler, no NVRTC, compute capability too low) and notes
//                     (which SIMD path a CPU kernel takes: AVX-512, else AVX2, else scalar — a missing
//                     feature picks a slower path, it never makes the op incompatible)
//   build_command()   the exact compile it would run (DeepSpeed's builder()/build_extension()), and the
//                     cache key and entry path
//   load()            an ahead-of-time build when one exists ($ACCEL_OPS_AOT_DIR/<name>.so or
//                     <name>.sm_XY.cubin), else the disk cache (ops/jit_cache.hpp), else a compile;
//                     a compile error throws accel::CompileError with the log and the command
//   is_cached()       whether load() would find an AOT build or a cache entry without compiling
//
// The cache key is SHA-256 over: "accel-jit/1", the ABI version (ops/abi.hpp), op name, kind, each
// source and header (relative path and bytes), every flag in order, the compiler identity (host: the
// resolved path, size and mtime of every program $CXX names, a wrapper's compiler included; NVRTC: its
// version) and the architecture (host: CPU model and the CPUID leaves -march=native is expanded from;
// CUDA: sm_XY).
//
// Headers: the files in OpSpec::headers are hashed into the key. Beyond them:
//   host   the compiler's own dependency list (-MD) is recorded beside the entry, in its dependency
//          manifest (<entry>.deps: each other file the compile read, system headers included, with its
//          size, mtime and SHA-256), and checked on every hit: a file whose size or mtime changed is
//          hashed again, and if its bytes differ (or it is gone) the entry is stale and is rebuilt, under
//          the key's lock (ops/jit_cache.hpp). So a header a spec does not list still counts; listing it
//          only moves it from the manifest into the key. An entry without a manifest (an AOT build, or a
//          compiler wrapper that wrote no dependency file) is judged by its key alone.
//   cuda   NVRTC gives no dependency list: the spec must list EVERY file its source includes, directly
//          or through another header (accel's own headers included). A header left out is not in the
//          key: editing it leaves the old cubin in use.
// tests/ops/test_jit_keys.cpp checks the built-in specs against their sources' include closure (for
// both toolchains, so an AOT build, which has no manifest, is keyed right too).
//
// Builders are cheap values (a spec, a toolchain pointer and options); loading is thread-safe.
// A backend's registry (ops/registry.hpp) hands them out: B::create_op_builder("fused_adam").
//
// This header holds the types only, and is light: every backend's OpApi names them, so every
// translation unit that includes a backend parses it. The machinery behind them (the toolchains, the
// JIT cache, hashing, processes) is reached through Toolchain's function pointers and lives in the
// headers that <accel/op_builders.hpp> includes — the op builders are opt-in (see accel/op_builders.hpp).
#pragma once

#include <accel/core/error.hpp>
#include <accel/ops/detail/environment.hpp>
#include <accel/ops/detail/kernel_dir.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace accel::ops {

namespace detail {
// Defined in ops/detail/files.hpp, which every toolchain includes (hash_sources is instantiated there).
inline bool read_file(const std::filesystem::path& path, std::string& out);
}  // namespace detail

/// How an op is built and loaded.
enum class OpKind {
  host,  ///< host C++ compiler, shared object, dlopen
  cuda,  ///< NVRTC, cubin, CUDA driver module
};

[[nodiscard]] constexpr std::string_view to_string(OpKind k) noexcept { return k == OpKind::host ? "host" : "cuda"; }

/// Where load() found the op.
enum class LoadSource {
  aot,        ///< an ahead-of-time build
  cache_hit,  ///< the JIT cache
  compiled,   ///< compiled by this load()
};

[[nodiscard]] constexpr std::string_view to_string(LoadSource s) noexcept {
  switch (s) {
    case LoadSource::aot: return "aot";
    case LoadSource::cache_hit: return "cache_hit";
    case LoadSource::compiled: return "compiled";
  }
  return "unknown";
}

/// The static description of an op: what to compile and what it exports.
struct OpSpec {
  std::string name;                       ///< "fused_adam": DeepSpeed's NAME
  std::string class_name;                 ///< "FusedAdamBuilder": DeepSpeed's builder class name
  std::string description;
  OpKind kind = OpKind::host;
  std::vector<std::string> sources;       ///< relative to the kernel directory (NVRTC: exactly one)
  std::vector<std::string> headers;       ///< files the sources include, hashed into the key (cuda: every one,
                                          ///< transitively; host: the compiler's -MD list covers the rest)
  std::vector<std::string> include_dirs;  ///< relative to the kernel directory
  std::vector<std::string> flags;         ///< the op's own compiler flags
  std::vector<std::string> entry_points;  ///< extern "C" functions (host) or __global__ kernels (cuda)
  int min_compute_capability = 0;         ///< cuda: lowest supported major*10+minor (e.g. 70)
};

/// is_compatible()'s answer: `ok`, and why not (`reasons`) or what it will do (`notes`).
struct Compatibility {
  bool ok = true;
  std::vector<std::string> reasons;  ///< why the op cannot be built or run here
  std::vector<std::string> notes;    ///< facts that do not prevent it (SIMD path chosen, AOT build found)

  explicit operator bool() const noexcept { return ok; }
  void fail(std::string why) {
    ok = false;
    reasons.push_back(std::move(why));
  }
  /// "yes (AVX-512 path)" / "no: NVRTC is missing (...)".
  [[nodiscard]] std::string str() const {
    std::string out = ok ? "yes" : "no";
    const auto& list = ok ? notes : reasons;
    for (std::size_t i = 0; i < list.size(); ++i) out += (i == 0 ? (ok ? " (" : ": ") : "; ") + list[i];
    if (ok && !list.empty()) out += ")";
    return out;
  }
};

/// The compile a builder runs (or would run): DeepSpeed's build_extension(), as data.
struct BuildCommand {
  std::string op;
  OpKind kind = OpKind::host;
  std::string compiler;            ///< the compiler program (host) or "nvrtc <version>"
  std::vector<std::string> argv;   ///< host: the full command line; cuda: the NVRTC options + source
  std::string arch;                ///< "x86_64 avx512 (<cpu model>)" / "sm_90"
  std::string key;                 ///< the cache key (64 hex digits)
  std::filesystem::path output;    ///< the cache entry it produces
  /// The command as a shell would take it.
  [[nodiscard]] std::string str() const { return detail::join_command(argv); }
};

/// A loaded op: the shared object or CUDA module, kept alive while any copy exists.
class LoadedOp {
 public:
  using Lookup = void* (*)(void* handle, const char* name);

  LoadedOp() = default;
  LoadedOp(std::string name, OpKind kind, LoadSource source, std::filesystem::path path,
           std::shared_ptr<void> handle, Lookup lookup, double seconds, int device = -1)
      : name_(std::move(name)),
        kind_(kind),
        source_(source),
        path_(std::move(path)),
        handle_(std::move(handle)),
        lookup_(lookup),
        seconds_(seconds),
        device_(device) {}

  [[nodiscard]] bool valid() const noexcept { return handle_ != nullptr; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] OpKind kind() const noexcept { return kind_; }
  [[nodiscard]] LoadSource source() const noexcept { return source_; }
  /// The file loaded (cache entry or AOT build).
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  /// Seconds load() took (compile included when it compiled).
  [[nodiscard]] double load_seconds() const noexcept { return seconds_; }
  /// The device a cuda op's module is loaded on; -1 for host ops.
  [[nodiscard]] int device() const noexcept { return device_; }
  /// The dlopen handle (host) or CUmodule (cuda).
  [[nodiscard]] void* native_handle() const noexcept { return handle_.get(); }

  /// The address of an exported function (host) or the CUfunction of a kernel (cuda), or nullptr.
  [[nodiscard]] void* find_symbol(std::string_view symbol) const {
    if (!valid()) throw InvalidStateError("op '" + name_ + "': symbol lookup on an op that is not loaded");
    return lookup_(handle_.get(), std::string(symbol).c_str());
  }
  /// As find_symbol, but a missing symbol throws InvalidArgumentError.
  [[nodiscard]] void* symbol(std::string_view symbol) const {
    void* p = find_symbol(symbol);
    if (p == nullptr) {
      throw InvalidArgumentError("op '" + name_ + "' (" + path_.string() + ") has no entry point '" +
                                 std::string(symbol) + "'");
    }
    return p;
  }
  /// A host function pointer of type F* (host ops only).
  template <class F>
  [[nodiscard]] F* function(std::string_view name) const {
    if (kind_ != OpKind::host) throw InvalidStateError("op '" + name_ + "': function<F>() on a cuda op");
    return reinterpret_cast<F*>(symbol(name));
  }

 private:
  std::string name_;
  OpKind kind_ = OpKind::host;
  LoadSource source_ = LoadSource::compiled;
  std::filesystem::path path_;
  std::shared_ptr<void> handle_;
  Lookup lookup_ = nullptr;
  double seconds_ = 0;
  int device_ = -1;
};

/// One row of the op report (ops::op_table in ops/registry.hpp; B::op_table()).
struct OpStatus {
  std::string name;
  std::string class_name;
  OpKind kind = OpKind::host;
  Compatibility compatible;
  bool cached = false;  ///< load() would find a usable AOT build or a valid cache entry without compiling
};

class OpBuilder;

/// How a kind of op is checked, described and built; one static instance per toolchain.
struct Toolchain {
  std::string_view name;  ///< "host", "nvrtc"
  Compatibility (*is_compatible)(const OpBuilder&);
  BuildCommand (*build_command)(const OpBuilder&);
  LoadedOp (*load)(const OpBuilder&);
  std::string_view entry_extension;  ///< "so", "cubin"
  bool (*is_cached)(const OpBuilder&);  ///< a usable AOT build or a valid cache entry exists
};

/// $ACCEL_KERNEL_DIR, else the ACCEL_KERNEL_DIR macro (the CMake target defines it), else empty.
[[nodiscard]] inline std::filesystem::path default_kernel_dir() { return detail::kernel_dir_string(); }

/// $ACCEL_OPS_AOT_DIR, else the ACCEL_OPS_AOT_DIR macro, else empty (no AOT builds).
[[nodiscard]] inline std::filesystem::path default_aot_dir() {
  if (std::string d = detail::env_string("ACCEL_OPS_AOT_DIR"); !d.empty()) return d;
#ifdef ACCEL_OPS_AOT_DIR
  return ACCEL_OPS_AOT_DIR;
#else
  return {};
#endif
}

/// An op's spec, the toolchain that builds it, and per-builder options.
class OpBuilder {
 public:
  OpBuilder(OpSpec spec, const Toolchain* toolchain, std::string backend)
      : spec_(std::move(spec)), toolchain_(toolchain), backend_(std::move(backend)) {}

  [[nodiscard]] const OpSpec& spec() const noexcept { return spec_; }
  [[nodiscard]] const std::string& name() const noexcept { return spec_.name; }
  [[nodiscard]] OpKind kind() const noexcept { return spec_.kind; }
  /// The backend that created the builder ("cpu", "cuda").
  [[nodiscard]] const std::string& backend() const noexcept { return backend_; }
  [[nodiscard]] const Toolchain& toolchain() const noexcept { return *toolchain_; }

  /// Where the sources are read from (default_kernel_dir() unless set).
  [[nodiscard]] std::filesystem::path kernel_dir() const {
    return kernel_dir_ ? *kernel_dir_ : default_kernel_dir();
  }
  OpBuilder& set_kernel_dir(std::filesystem::path dir) {
    kernel_dir_ = std::move(dir);
    return *this;
  }
  /// The JIT cache directory (JitCache::default_dir(), i.e. detail::default_cache_dir(), unless set).
  [[nodiscard]] std::filesystem::path cache_dir() const {
    return cache_dir_ ? *cache_dir_ : detail::default_cache_dir();
  }
  OpBuilder& set_cache_dir(std::filesystem::path dir) {
    cache_dir_ = std::move(dir);
    return *this;
  }
  /// Where AOT builds are looked for (default_aot_dir() unless set; empty: none).
  [[nodiscard]] std::filesystem::path aot_dir() const { return aot_dir_ ? *aot_dir_ : default_aot_dir(); }
  OpBuilder& set_aot_dir(std::filesystem::path dir) {
    aot_dir_ = std::move(dir);
    return *this;
  }
  /// Flags appended after the op's own (they change the cache key).
  [[nodiscard]] const std::vector<std::string>& extra_flags() const noexcept { return extra_flags_; }
  OpBuilder& add_flags(std::vector<std::string> flags) {
    for (auto& f : flags) extra_flags_.push_back(std::move(f));
    return *this;
  }
  /// CUDA: compile for this compute capability (major*10+minor, e.g. 90) instead of the current
  /// device's; with no device present, this is how a cubin is still built. 0: the current device.
  [[nodiscard]] int arch() const noexcept { return arch_; }
  OpBuilder& set_arch(int compute_capability) {
    arch_ = compute_capability;
    return *this;
  }
  /// CUDA: the device load() loads the module on (-1: the current device).
  [[nodiscard]] int device() const noexcept { return device_; }
  OpBuilder& set_device(int device) {
    device_ = device;
    return *this;
  }

  /// Absolute paths of the sources.
  [[nodiscard]] std::vector<std::filesystem::path> sources() const {
    std::vector<std::filesystem::path> out;
    for (const auto& s : spec_.sources) out.push_back(kernel_dir() / s);
    return out;
  }
  /// Absolute include directories.
  [[nodiscard]] std::vector<std::filesystem::path> include_dirs() const {
    std::vector<std::filesystem::path> out;
    for (const auto& s : spec_.include_dirs) out.push_back(kernel_dir() / s);
    return out;
  }

  [[nodiscard]] Compatibility is_compatible() const { return toolchain_->is_compatible(*this); }
  [[nodiscard]] BuildCommand build_command() const { return toolchain_->build_command(*this); }
  [[nodiscard]] LoadedOp load() const { return toolchain_->load(*this); }
  /// True when a usable AOT build or a valid cache entry for the current key exists (load() would not compile).
  [[nodiscard]] bool is_cached() const { return toolchain_->is_cached(*this); }

  /// Feeds the key fields that depend on the sources (see the header comment) to `h` (a
  /// detail::Sha256: h.field(bytes) for each source and header, relative path then bytes); throws
  /// InvalidArgumentError naming a source or header that cannot be read.
  template <class Hasher>
  void hash_sources(Hasher& h) const {
    const auto add = [&](const std::string& rel) {
      std::string bytes;
      if (!detail::read_file(kernel_dir() / rel, bytes)) {
        throw InvalidArgumentError(backend_ + " op '" + spec_.name + "': cannot read kernel source " +
                                   (kernel_dir() / rel).string() +
                                   " (set ACCEL_KERNEL_DIR to the directory holding accel's kernels/)");
      }
      h.field(rel).field(bytes);
    };
    for (const auto& s : spec_.sources) add(s);
    for (const auto& s : spec_.headers) add(s);
  }

 private:
  OpSpec spec_;
  const Toolchain* toolchain_;
  std::string backend_;
  std::optional<std::filesystem::path> kernel_dir_;
  std::optional<std::filesystem::path> cache_dir_;
  std::optional<std::filesystem::path> aot_dir_;
  std::vector<std::string> extra_flags_;
  int arch_ = 0;
  int device_ = -1;
};

/// A builder whose load() returns the typed op `Loaded` (constructed from the LoadedOp):
/// what B::get_op_builder<Op>() returns.
template <class Loaded>
class TypedOpBuilder : public OpBuilder {
 public:
  using loaded_type = Loaded;
  explicit TypedOpBuilder(OpBuilder builder) : OpBuilder(std::move(builder)) {}
  [[nodiscard]] Loaded load() const { return Loaded(OpBuilder::load()); }
  /// The untyped op.
  [[nodiscard]] LoadedOp load_untyped() const { return OpBuilder::load(); }
};

}  // namespace accel::ops
