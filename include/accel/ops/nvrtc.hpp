// accel/ops/nvrtc.hpp — NVRTC: CUDA C++ to PTX or a cubin at run time, through the JIT cache.
//
// NVRTC is loaded at run time on first use (detail/dynamic_library.hpp: $ACCEL_NVRTC_LIBRARY, then
// libnvrtc.so.13, .12, .11.2 and libnvrtc.so, then under $CUDA_HOME, $CUDA_PATH and
// /usr/local/cuda), so this header needs no CUDA header and a program that includes it starts
// on machines without the CUDA toolkit; nvrtc().loaded says whether it was found, and why not.
// NVRTC needs no GPU and no driver: a cubin for any architecture it supports is built on any machine
// (OpBuilder::set_arch(90)); only loading the cubin needs a device (cuda/detail/nvrtc_toolchain.hpp).
//
// Options of every op compile: --gpu-architecture=sm_XY -std=c++17 --fmad=false -DACCEL_NVRTC=1
// -I<kernel dir>/<include dirs> <op flags> <extra flags>. --fmad=false keeps a*b+c unfused unless the
// kernel writes fmaf, so CUDA and CPU kernels compute the same bits (sqrt and division are IEEE by
// default: no --use_fast_math).
//
//   nvrtc()                          the loaded API (or why it is missing)
//   nvrtc_compile(src, name, opts)   one compile without the cache (PTX and, for sm_XY, a cubin);
//                                    a failure throws CompileError with NVRTC's log and the options
//   nvrtc_build_command(b, sm)       what the op's compile is: options, key, cache entry
//   nvrtc_build(b, sm[, check])      the cubin of op b for sm_XY from the cache, compiling on a miss
//   cubin_problem(bytes)             why bytes are not a CUDA ELF cubin or fatbinary (empty: they are)
//   cubin_abi_version(bytes)         a cubin's ABI tag (accel_ops_abi_version), if it carries one
//   cubin_abi_problem(bytes, needed) why an ahead-of-time cubin is not for this accel's ABI (empty: it is)
//
// A cubin is checked before it is committed to the cache (its ELF or fatbinary header here; the CUDA
// backend also loads it as a module on the device, through nvrtc_build's `check`), so an output that
// cannot load commits nothing. A cached cubin whose header is wrong is evicted and compiled once more.
// NVRTC gives no dependency list, so a cubin entry has no dependency manifest: the files in the spec's
// OpSpec::headers are all the key knows of, and a spec must list every file its source includes (the
// host toolchain also tracks unlisted ones, ops/host_compiler.hpp).
//   nvrtc_toolchain                  a Toolchain that builds for OpBuilder::arch() and cannot load
//                                    (the CUDA backend's, cuda/detail/nvrtc_toolchain.hpp, loads)
#pragma once

#include <accel/core/error.hpp>
#include <accel/detail/dynamic_library.hpp>
#include <accel/ops/abi.hpp>
#include <accel/ops/detail/files.hpp>
#include <accel/ops/detail/sha256.hpp>
#include <accel/ops/jit_cache.hpp>
#include <accel/ops/op_builder.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>


namespace accel::ops {

namespace detail {
struct NvrtcProgramOpaque;
using NvrtcProgram = NvrtcProgramOpaque*;
}  // namespace detail

/// The NVRTC entry points accel uses (the C API, declared here so no CUDA header is needed).
struct NvrtcApi {
  using Result = int;  // nvrtcResult; NVRTC_SUCCESS == 0
  bool loaded = false;
  std::string error;    ///< why NVRTC could not be loaded
  std::string library;  ///< the name or path that was loaded
  int major = 0, minor = 0;
  std::vector<int> supported_archs;  ///< e.g. {75, 80, 86, 87, 89, 90, 100, 120}

  Result (*version)(int*, int*) = nullptr;
  const char* (*get_error_string)(Result) = nullptr;
  Result (*create_program)(detail::NvrtcProgram*, const char*, const char*, int, const char* const*,
                           const char* const*) = nullptr;
  Result (*destroy_program)(detail::NvrtcProgram*) = nullptr;
  Result (*compile_program)(detail::NvrtcProgram, int, const char* const*) = nullptr;
  Result (*get_ptx_size)(detail::NvrtcProgram, std::size_t*) = nullptr;
  Result (*get_ptx)(detail::NvrtcProgram, char*) = nullptr;
  Result (*get_cubin_size)(detail::NvrtcProgram, std::size_t*) = nullptr;
  Result (*get_cubin)(detail::NvrtcProgram, char*) = nullptr;
  Result (*get_log_size)(detail::NvrtcProgram, std::size_t*) = nullptr;
  Result (*get_log)(detail::NvrtcProgram, char*) = nullptr;
  Result (*get_num_supported_archs)(int*) = nullptr;
  Result (*get_supported_archs)(int*) = nullptr;

  [[nodiscard]] std::string describe(Result r) const {
    const char* s = get_error_string != nullptr ? get_error_string(r) : nullptr;
    return s != nullptr ? std::string(s) : "nvrtcResult " + std::to_string(r);
  }
  /// "NVRTC 13.0".
  [[nodiscard]] std::string identity() const { return "NVRTC " + std::to_string(major) + "." + std::to_string(minor); }
};

namespace detail {

inline NvrtcApi load_nvrtc() {
  NvrtcApi api;
  std::vector<std::string> names;
  if (std::string p = env_string("ACCEL_NVRTC_LIBRARY"); !p.empty()) names.push_back(p);
  for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}) names.emplace_back(n);
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (std::string d = env_string(var); !d.empty()) names.push_back(d + "/lib64/libnvrtc.so");
  }
  names.emplace_back("/usr/local/cuda/lib64/libnvrtc.so");
  names.emplace_back("/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so");
  // Never closed: compiles may run from static destructors.
  static const auto* const library =
      new accel::detail::DynamicLibrary(accel::detail::DynamicLibrary::try_open(names.begin(), names.end()));
  if (!*library) {
    api.error = "NVRTC is missing: libnvrtc.so could not be loaded (install the CUDA toolkit's NVRTC, or set "
                "ACCEL_NVRTC_LIBRARY): " + library->error();
    return api;
  }
  api.library = library->name();
  accel::detail::SymbolTable table(*library);
  table.require(api.version, "nvrtcVersion")
      .optional(api.get_error_string, "nvrtcGetErrorString")
      .require(api.create_program, "nvrtcCreateProgram")
      .require(api.destroy_program, "nvrtcDestroyProgram")
      .require(api.compile_program, "nvrtcCompileProgram")
      .require(api.get_ptx_size, "nvrtcGetPTXSize")
      .require(api.get_ptx, "nvrtcGetPTX")
      .require(api.get_cubin_size, "nvrtcGetCUBINSize")
      .require(api.get_cubin, "nvrtcGetCUBIN")
      .require(api.get_log_size, "nvrtcGetProgramLogSize")
      .require(api.get_log, "nvrtcGetProgramLog")
      .optional(api.get_num_supported_archs, "nvrtcGetNumSupportedArchs")
      .optional(api.get_supported_archs, "nvrtcGetSupportedArchs");
  if (!table.complete()) {
    api.error = table.error() + " (NVRTC 11.2 or newer is required)";
    return api;
  }
  (void)api.version(&api.major, &api.minor);
  if (api.get_num_supported_archs != nullptr && api.get_supported_archs != nullptr) {
    int n = 0;
    if (api.get_num_supported_archs(&n) == 0 && n > 0) {
      api.supported_archs.resize(static_cast<std::size_t>(n));
      if (api.get_supported_archs(api.supported_archs.data()) != 0) api.supported_archs.clear();
    }
  }
  api.loaded = true;
  return api;
}

}  // namespace detail

/// The process's NVRTC, loaded on first use (thread-safe), never unloaded.
[[nodiscard]] inline const NvrtcApi& nvrtc() {
  static const NvrtcApi* const api = new NvrtcApi(detail::load_nvrtc());
  return *api;
}

/// What one NVRTC compile produced.
struct NvrtcOutput {
  std::string ptx;
  std::string cubin;  ///< empty unless the architecture was a real one (sm_XY)
  std::string log;    ///< NVRTC's log (warnings)
};

/// Compiles `source` (named `name` in diagnostics) with `options`. Throws BackendUnavailableError when
/// NVRTC is missing and CompileError (log + options) when the compile fails.
[[nodiscard]] inline NvrtcOutput nvrtc_compile(const std::string& source, const std::string& name,
                                               const std::vector<std::string>& options) {
  const NvrtcApi& api = nvrtc();
  if (!api.loaded) throw BackendUnavailableError(api.error);
  std::string command = "nvrtc";
  for (const auto& o : options) command += " " + detail::shell_quote(o);
  command += " " + detail::shell_quote(name);
  detail::NvrtcProgram program = nullptr;
  if (const auto r = api.create_program(&program, source.c_str(), name.c_str(), 0, nullptr, nullptr); r != 0) {
    throw CompileError("nvrtcCreateProgram failed for " + name, command, api.describe(r));
  }
  struct Destroy {
    const NvrtcApi& api;
    detail::NvrtcProgram& p;
    ~Destroy() { (void)api.destroy_program(&p); }
  } destroy{api, program};
  std::vector<const char*> opts;
  opts.reserve(options.size());
  for (const auto& o : options) opts.push_back(o.c_str());
  const auto status = api.compile_program(program, static_cast<int>(opts.size()), opts.data());
  NvrtcOutput out;
  std::size_t log_size = 0;
  if (api.get_log_size(program, &log_size) == 0 && log_size > 1) {
    out.log.resize(log_size);
    (void)api.get_log(program, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (status != 0) {
    throw CompileError("NVRTC failed to compile " + name + " (" + api.describe(status) + ")", command, out.log);
  }
  std::size_t size = 0;
  if (api.get_ptx_size(program, &size) == 0 && size > 0) {
    out.ptx.resize(size);
    (void)api.get_ptx(program, out.ptx.data());
    out.ptx.resize(size - 1);
  }
  size = 0;
  if (api.get_cubin_size != nullptr && api.get_cubin_size(program, &size) == 0 && size > 0) {
    out.cubin.resize(size);
    (void)api.get_cubin(program, out.cubin.data());
  }
  return out;
}

namespace detail {

inline std::vector<std::string> nvrtc_options(const OpBuilder& b, int sm) {
  std::vector<std::string> o{"--gpu-architecture=sm_" + std::to_string(sm), "-std=c++17", "--fmad=false",
                             "-DACCEL_NVRTC=1"};
  for (const auto& d : b.include_dirs()) o.push_back("-I" + d.string());
  for (const auto& f : b.spec().flags) o.push_back(f);
  for (const auto& f : b.extra_flags()) o.push_back(f);
  return o;
}

inline Compatibility nvrtc_arch_check(const OpBuilder& b, int sm) {
  Compatibility c;
  const NvrtcApi& api = nvrtc();
  if (!api.loaded) {
    c.fail(api.error);
    return c;
  }
  if (b.spec().sources.size() != 1) c.fail("an NVRTC op has exactly one source");
  if (sm < b.spec().min_compute_capability) {
    c.fail("needs compute capability >= " + std::to_string(b.spec().min_compute_capability / 10) + "." +
           std::to_string(b.spec().min_compute_capability % 10) + ", the target is sm_" + std::to_string(sm));
  }
  if (!api.supported_archs.empty() &&
      std::find(api.supported_archs.begin(), api.supported_archs.end(), sm) == api.supported_archs.end()) {
    c.fail(api.identity() + " cannot compile for sm_" + std::to_string(sm));
  }
  for (const auto& s : b.sources()) {
    if (!std::filesystem::exists(s)) c.fail("kernel source " + s.string() + " is missing (set ACCEL_KERNEL_DIR)");
  }
  c.notes.push_back(api.identity() + ", sm_" + std::to_string(sm));
  return c;
}

}  // namespace detail

/// The compile of op `b` for sm_XY: NVRTC options + source, cache key and entry.
[[nodiscard]] inline BuildCommand nvrtc_build_command(const OpBuilder& b, int sm) {
  BuildCommand cmd;
  cmd.op = b.name();
  cmd.kind = OpKind::cuda;
  const NvrtcApi& api = nvrtc();
  cmd.compiler = api.loaded ? api.identity() : std::string("NVRTC (missing)");
  cmd.argv = {"nvrtc"};
  for (auto& o : detail::nvrtc_options(b, sm)) cmd.argv.push_back(std::move(o));
  for (const auto& s : b.sources()) cmd.argv.push_back(s.string());
  cmd.arch = "sm_" + std::to_string(sm);
  detail::Sha256 h;
  h.field("accel-jit/1").field(std::to_string(abi_version)).field(b.name()).field("cuda");
  b.hash_sources(h);
  for (std::size_t i = 1; i < cmd.argv.size() - b.spec().sources.size(); ++i) {
    const std::string& o = cmd.argv[i];
    // Include directories are hashed relative to the kernel directory (via the sources and headers).
    if (o.starts_with("-I")) continue;
    h.field(o);
  }
  for (const auto& d : b.spec().include_dirs) h.field("-I" + d);
  h.field(cmd.compiler).field(cmd.arch);
  cmd.key = h.hex();
  cmd.output = JitCache(b.cache_dir()).entry_path(b.name(), cmd.key, "cubin");
  return cmd;
}

namespace detail {
/// A little-endian unsigned integer at byte `at` of `bytes` (an ELF field; the caller checks the bounds).
template <class T>
[[nodiscard]] T read_le(std::string_view bytes, std::uint64_t at) {
  T v = 0;
  std::memcpy(&v, bytes.data() + at, sizeof v);
  return v;
}
}  // namespace detail

/// Why `bytes` are not a CUDA cubin (a 64-bit little-endian ELF for EM_CUDA whose section header table
/// lies inside it) or a CUDA fatbinary (magic 0xBA55ED50); empty when they are one. Reads only `bytes`.
[[nodiscard]] inline std::string cubin_problem(std::string_view bytes) {
  const auto u16 = [&](std::uint64_t at) { return detail::read_le<std::uint16_t>(bytes, at); };
  const auto u32 = [&](std::uint64_t at) { return detail::read_le<std::uint32_t>(bytes, at); };
  const auto u64 = [&](std::uint64_t at) { return detail::read_le<std::uint64_t>(bytes, at); };
  if (bytes.size() >= 16 && u32(0) == 0xBA55ED50u) return {};  // a fatbinary: the driver checks the rest
  if (bytes.size() < 4 || bytes.substr(0, 4) != std::string_view("\x7f" "ELF", 4)) {
    std::string start;
    for (std::size_t i = 0; i < bytes.size() && i < 8; ++i) {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(bytes[i]));
      start += hex;
    }
    return "neither a CUDA ELF cubin nor a fatbinary (" + std::to_string(bytes.size()) + " bytes, starting " +
           (start.empty() ? std::string("with nothing") : "0x" + start) + ")";
  }
  constexpr std::size_t ehdr = 64;  // Elf64_Ehdr
  if (bytes.size() < ehdr) return "an ELF file cut short (" + std::to_string(bytes.size()) + " bytes, its header has 64)";
  if (bytes[4] != 2 || bytes[5] != 1) return "an ELF file that is not 64-bit little-endian, as cubins are";
  constexpr std::uint16_t em_cuda = 190;
  if (const std::uint16_t machine = u16(18); machine != em_cuda) {
    return "an ELF file for machine " + std::to_string(machine) + ", not a CUDA cubin (EM_CUDA = 190)";
  }
  const std::uint64_t shoff = u64(40);
  const std::uint64_t shentsize = u16(58), shnum = u16(60);
  if (shoff > bytes.size() || shnum * shentsize > bytes.size() - shoff) {
    return "a CUDA ELF file cut short (" + std::to_string(bytes.size()) + " bytes; its section headers end at " +
           std::to_string(shoff + shnum * shentsize) + ")";
  }
  return {};
}

/// The ABI tag of a CUDA ELF cubin: the value of its 4-byte device variable `accel_ops_abi_version`
/// (kernels/cuda/cuda_common.cuh defines it in the module of each of accel's CUDA ops, from
/// ACCEL_OPS_ABI_VERSION). nullopt for bytes that cubin_problem() refuses, for a fatbinary (its cubins
/// are compressed or not for this architecture) and for a cubin without the variable.
[[nodiscard]] inline std::optional<int> cubin_abi_version(std::string_view bytes) {
  if (!cubin_problem(bytes).empty() || bytes.substr(0, 4) != std::string_view("\x7f" "ELF", 4)) return std::nullopt;
  const auto u16 = [&](std::uint64_t at) { return detail::read_le<std::uint16_t>(bytes, at); };
  const auto u32 = [&](std::uint64_t at) { return detail::read_le<std::uint32_t>(bytes, at); };
  const auto u64 = [&](std::uint64_t at) { return detail::read_le<std::uint64_t>(bytes, at); };
  const auto within = [&](std::uint64_t offset, std::uint64_t size) {
    return offset <= bytes.size() && size <= bytes.size() - offset;
  };
  // Elf64_Shdr: sh_type at 4, sh_addr 16, sh_offset 24, sh_size 32, sh_link 40, sh_entsize 56.
  const std::uint64_t shoff = u64(40), shentsize = u16(58), shnum = u16(60);  // in bounds: cubin_problem
  if (shentsize < 64) return std::nullopt;
  const auto section = [&](std::uint64_t i) { return shoff + i * shentsize; };
  constexpr std::uint32_t sht_symtab = 2, sht_nobits = 8;
  constexpr std::string_view tag = "accel_ops_abi_version";
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const std::uint64_t sh = section(i);
    if (u32(sh + 4) != sht_symtab) continue;
    const std::uint64_t sym_off = u64(sh + 24), sym_size = u64(sh + 32), sym_ent = u64(sh + 56);
    const std::uint64_t strtab_index = u32(sh + 40);
    if (sym_ent < 24 || !within(sym_off, sym_size) || strtab_index >= shnum) return std::nullopt;
    const std::uint64_t str_off = u64(section(strtab_index) + 24), str_size = u64(section(strtab_index) + 32);
    if (!within(str_off, str_size)) return std::nullopt;
    // Elf64_Sym: st_name at 0, st_shndx 6, st_value 8, st_size 16.
    for (std::uint64_t at = sym_off; at + sym_ent <= sym_off + sym_size; at += sym_ent) {
      const std::uint64_t name = u32(at);
      if (name >= str_size || str_size - name <= tag.size()) continue;
      if (bytes.substr(str_off + name, tag.size() + 1) != std::string_view(tag.data(), tag.size() + 1)) continue;
      const std::uint64_t shndx = u16(at + 6);
      if (u64(at + 16) != 4 || shndx == 0 || shndx >= shnum) return std::nullopt;
      const std::uint64_t data = section(shndx);
      if (u32(data + 4) == sht_nobits) return std::nullopt;  // no initial value stored
      const std::uint64_t value = u64(at + 8), addr = u64(data + 16);
      if (value < addr || value - addr > u64(data + 32) || u64(data + 32) - (value - addr) < 4) return std::nullopt;
      const std::uint64_t offset = u64(data + 24) + (value - addr);
      if (!within(offset, 4)) return std::nullopt;
      return static_cast<int>(u32(offset));
    }
  }
  return std::nullopt;
}

/// Why an ahead-of-time cubin is not built for this accel's kernel ABI (ops/abi.hpp), empty when it is:
/// a tag (cubin_abi_version) must be abi_version; a cubin without one is refused when `tag_required`
/// (the op's kernels take accel's ABI structs: its spec lists common/accel_ops_abi.h), else accepted.
[[nodiscard]] inline std::string cubin_abi_problem(std::string_view bytes, bool tag_required) {
  if (const std::optional<int> tag = cubin_abi_version(bytes)) {
    if (*tag == abi_version) return {};
    return "its ABI version is " + std::to_string(*tag) + ", this accel expects " + std::to_string(abi_version) +
           " (built by another accel release: rebuild it with kernels/aot.cmake)";
  }
  if (!tag_required) return {};
  if (bytes.substr(0, 4) != std::string_view("\x7f" "ELF", 4)) {
    return "a fatbinary, whose ABI tag (accel_ops_abi_version) cannot be read: kernels/aot.cmake builds cubins";
  }
  return "it carries no ABI tag (the device variable accel_ops_abi_version): built by an accel release "
         "before the tags, or not from kernels/cuda; rebuild it with kernels/aot.cmake";
}

/// Whether op spec `s`'s kernels take accel's ABI structs (it lists common/accel_ops_abi.h): its
/// ahead-of-time cubins must then carry the ABI tag (cubin_abi_problem).
[[nodiscard]] inline bool uses_ops_abi(const OpSpec& s) {
  return std::any_of(s.headers.begin(), s.headers.end(), [](const std::string& h) {
    return std::string_view(h).ends_with("accel_ops_abi.h");
  });
}

/// The cubin of op `b` for sm_XY: from the cache, or compiled now (CompileError on failure). A compiled
/// cubin is committed only when cubin_problem() and `check` (when given: the CUDA backend loads it as a
/// module; it returns why the cubin cannot be used, empty when it can) find nothing wrong. A cached cubin
/// that cubin_problem() refuses is evicted and compiled once more.
[[nodiscard]] inline CacheEntry nvrtc_build(const OpBuilder& b, int sm,
                                            const std::function<std::string(std::string_view)>& check = {}) {
  const Compatibility c = detail::nvrtc_arch_check(b, sm);
  if (!c.ok) {
    throw BackendUnavailableError(b.backend() + " op '" + b.name() + "' cannot be built: " + c.str());
  }
  const BuildCommand cmd = nvrtc_build_command(b, sm);
  JitCache cache(b.cache_dir());
  const auto build = [&](const std::filesystem::path& tmp) {
    const std::filesystem::path src = b.sources().front();
    std::string text;
    if (!detail::read_file(src, text)) {
      throw InvalidArgumentError("cannot read kernel source " + src.string());
    }
    detail::jit_log(b.name() + ": NVRTC compiling for " + cmd.arch + ": " + cmd.str());
    const auto t0 = std::chrono::steady_clock::now();
    const NvrtcOutput out = nvrtc_compile(text, src.string(), detail::nvrtc_options(b, sm));
    if (out.cubin.empty()) throw CompileError("NVRTC produced no cubin for " + cmd.arch, cmd.str(), out.log);
    std::string problem = cubin_problem(out.cubin);
    if (problem.empty() && check) problem = check(out.cubin);
    if (!problem.empty()) {
      throw CompileError(b.backend() + " op '" + b.name() + "': NVRTC reported success, but its cubin for " + cmd.arch +
                             " is unusable (" + problem + "); nothing was committed to the cache",
                         cmd.str(), out.log);
    }
    detail::jit_log(b.name() + ": NVRTC compiled in " + std::to_string(detail::seconds_since(t0)) + " s (" +
                    std::to_string(out.cubin.size()) + " bytes)");
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || !detail::write_all(fd, out.cubin.data(), out.cubin.size())) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      std::string message = "accel jit cache: cannot write " + tmp.string() + ": " + std::strerror(err);
      if (const std::string s = detail::disk_space_problem({tmp.parent_path()}, std::strerror(err)); !s.empty()) {
        message += " (" + s + ")";
      }
      throw Error(Errc::runtime_failure, message, err);
    }
    ::close(fd);
  };
  CacheEntry entry = cache.get_or_build(b.name(), cmd.key, "cubin", build, /*want_payload=*/true);
  if (!entry.compiled) {
    if (const std::string problem = cubin_problem(entry.payload); !problem.empty()) {
      const std::string what = b.backend() + " op '" + b.name() + "': the cache entry " + entry.path.string() +
                               " is not a usable cubin (" + problem + ")";
      detail::jit_log(what + ": evicting it and rebuilding");
      (void)cache.evict(b.name(), cmd.key, "cubin", entry);
      try {
        entry = cache.get_or_build(b.name(), cmd.key, "cubin", build, /*want_payload=*/true);
      } catch (const CompileError& e) {
        throw CompileError(what + "; it was evicted, and rebuilding it failed: " + e.what(), e.command(), e.log());
      }
      if (const std::string again = cubin_problem(entry.payload); !again.empty()) {
        throw Error(Errc::runtime_failure,
                    what + "; it was evicted and rebuilt once, and the rebuilt entry is unusable too: " + again);
      }
    }
  }
  return entry;
}

namespace detail {

inline Compatibility nvrtc_only_is_compatible(const OpBuilder& b) {
  if (b.arch() == 0) {
    Compatibility c = nvrtc_arch_check(b, 80);
    c.notes.push_back("no target architecture set: set_arch() picks one; loading needs the CUDA backend");
    return c;
  }
  return nvrtc_arch_check(b, b.arch());
}
inline BuildCommand nvrtc_only_build_command(const OpBuilder& b) { return nvrtc_build_command(b, b.arch() != 0 ? b.arch() : 80); }
inline LoadedOp nvrtc_only_load(const OpBuilder& b) {
  throw NotSupportedError("op '" + b.name() +
                          "': loading a CUDA op needs the CUDA backend (accel::CudaBackend::create_op_builder)");
}

}  // namespace detail

/// Builds CUDA ops for OpBuilder::arch() (sm_80 when unset) without a device; load() throws.
inline constexpr Toolchain nvrtc_toolchain{"nvrtc",
                                           detail::nvrtc_only_is_compatible,
                                           detail::nvrtc_only_build_command,
                                           detail::nvrtc_only_load,
                                           "cubin",
                                           detail::entry_is_cached<OpBuilder>};

}  // namespace accel::ops
