// accel/ops/host_compiler.hpp — the host toolchain: C++ kernels compiled to a shared object, dlopen'ed.
//
// Compiler: the first word of $CXX (further words are passed first, so CXX="ccache g++" works), else
// c++, g++, clang++ on PATH; every word of $CXX that names an executable is identified in the key by its
// file (path, size, mtime), so the compiler behind a wrapper counts. No compiler: load() throws
// BackendUnavailableError naming $CXX, before any cache directory is created. Command:
//   <cxx> -O3 -march=native -fopenmp -shared -fPIC -std=c++17 -fno-math-errno -ffp-contract=off
//         -I<kernel dir>/<include dirs> <op flags> <extra flags> <sources> -o <entry>.tmp.<pid>.<n>
// (build_command() shows this; the JIT compile adds -MD -MF <temporary>.0.d before -o: see below).
// -ffp-contract=off and -fno-math-errno: the kernels write their fused multiply-adds explicitly
// (fmaf), so vector bodies and scalar tails compute the same bits, whatever the thread count; and
// sqrtf vectorises. -march=native selects the kernels' SIMD path (AVX-512, else AVX2, else scalar);
// the CPU model and the raw CPUID leaves -march=native is expanded from (host_cpu_signature) are part of
// the cache key, so a cache shared between machines never hands one CPU another's code.
//
// A compile is killed after ACCEL_JIT_COMPILE_TIMEOUT seconds (default 900; 0: no limit) with a
// CompileError naming the command and the limit. A cache directory on a noexec mount is refused with
// BackendUnavailableError saying so (set ACCEL_CACHE_DIR elsewhere), before compiling; an entry there
// that fails to load is kept, not evicted.
//
// The compiler runs under accel/detail/subprocess.hpp: its output is captured through a pipe (a full disk
// loses no log), its real exit status is known whatever the program does with SIGCHLD, and it dies — with
// everything it started — when the loading process dies. A compile that exits 0 is checked before it is
// committed: the temporary is dlopen'ed, so a compiler that writes a broken shared object commits nothing
// (CompileError). A committed entry that fails to load (written by something else, damaged in a way its
// checksum cannot see) is evicted and built once more; if that fails too, the error says so. When a
// compile fails for want of disk space, the error names the directory that is full.
//
// Dependencies: the compile writes its dependency list (-MD -MF, system headers included: a package
// upgrade can change them while the compiler's identity stays the same; with several sources, one -M scan
// per source after the compile, since -MF would keep only the last source's list). Every file on it
// other than the spec's sources and listed headers (those are in the key) goes into the entry's
// dependency manifest, checked on every hit (ops/jit_cache.hpp): editing a header the spec does not list
// makes the entry stale, and load() rebuilds it. A compiler (wrapper) that writes no dependency file, or
// one that does not parse, gives an entry without a manifest (logged with ACCEL_JIT_VERBOSE): only the
// spec's listed headers are tracked for it, as before. "deps:-MD" is a key field, so entries an older
// accel wrote without a manifest are not reused. NVRTC has no such list (ops/nvrtc.hpp).
//
// Loaded libraries stay mapped for the life of the process (RTLD_NODELETE). dlopen matches a library
// already loaded by its path *name* before it looks at the file, so after a rebuild renamed a new file
// over <key>.so, dlopen("<key>.so") would return the old code. load() therefore keeps a per-process
// table (LoadedLibraries) of what it loaded, by (device, inode) and by name: the library dlopen'ed as a
// temporary before the commit is the one load() returns for that file; a file not loaded yet is
// dlopen'ed by its path, or, when the path already names another loaded file (another process rebuilt
// the entry), through a hard link with a fresh name, removed at once.
//
// Ahead-of-time builds: <aot dir>/<op name>.so (see OpBuilder::aot_dir()). It is used when it exports
// accel_ops_abi_version() == ops::abi_version and its accel_ops_isa() is runnable here; otherwise the
// note in is_compatible() says why it was skipped, and the op is JIT-compiled. is_cached() is true for a
// usable AOT build too (load() would not compile).
#pragma once

#include <accel/core/cpu_features.hpp>
#include <accel/core/error.hpp>
#include <accel/detail/subprocess.hpp>
#include <accel/ops/abi.hpp>
#include <accel/ops/detail/depfile.hpp>
#include <accel/ops/detail/files.hpp>
#include <accel/ops/detail/sha256.hpp>
#include <accel/ops/jit_cache.hpp>
#include <accel/ops/op_builder.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace accel::ops {

/// The SIMD path a CPU kernel compiled with -march=native takes on this machine.
enum class HostIsa { scalar = 0, avx2 = 1, avx512 = 2 };

[[nodiscard]] constexpr std::string_view to_string(HostIsa isa) noexcept {
  switch (isa) {
    case HostIsa::scalar: return "scalar";
    case HostIsa::avx2: return "avx2";
    case HostIsa::avx512: return "avx512";
  }
  return "unknown";
}

/// AVX-512 (F, BW, VL) > AVX2 (+FMA) > scalar, from accel::cpu_features().
[[nodiscard]] inline HostIsa host_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vl) return HostIsa::avx512;
  if (f.avx2 && f.fma) return HostIsa::avx2;
  return HostIsa::scalar;
}

namespace detail {

/// "<canonical path> <size> <mtime>" of an executable: it changes when the file does.
[[nodiscard]] inline std::string file_identity(const std::filesystem::path& p) {
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(p, ec);
  const std::string rp = ec ? p.string() : real.string();
  struct stat st {};
  if (::stat(rp.c_str(), &st) != 0) return rp;
  return rp + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace detail

/// The host C++ compiler the JIT uses.
struct HostCompiler {
  std::vector<std::string> command;  ///< program (resolved path) + leading arguments from $CXX
  std::string identity;              ///< the identity of every program in the command: changes when any does
  std::string name;                  ///< the program as named ($CXX's first word, else "c++")
  std::string why_missing;           ///< when not found

  [[nodiscard]] bool found() const noexcept { return !command.empty(); }

  /// $CXX, else c++, g++, clang++ on PATH.
  [[nodiscard]] static HostCompiler find() {
    HostCompiler c;
    const std::string cxx = detail::env_string("CXX");
    std::vector<std::string> words;
    {
      std::istringstream in(cxx);
      for (std::string w; in >> w;) words.push_back(w);
    }
    std::vector<std::string> candidates;
    if (!words.empty()) {
      candidates.push_back(words[0]);
    } else {
      candidates = {"c++", "g++", "clang++"};
    }
    c.name = candidates.front();
    for (const auto& name : candidates) {
      const std::filesystem::path p = detail::find_on_path(name);
      if (p.empty()) continue;
      c.name = name;
      c.command.push_back(p.string());
      c.identity = detail::file_identity(p);
      // A wrapper (CXX="ccache g++", "distcc clang++", a script given the compiler as an argument) runs
      // the later words: every one that names an executable is identified by its file, not its name,
      // so upgrading the compiler behind the wrapper changes the key.
      for (std::size_t i = 1; i < words.size(); ++i) {
        c.command.push_back(words[i]);
        const std::filesystem::path w =
            words[i].starts_with('-') ? std::filesystem::path() : detail::find_on_path(words[i]);
        c.identity += " " + (w.empty() ? words[i] : "{" + detail::file_identity(w) + "}");
      }
      return c;
    }
    c.why_missing = words.empty() ? "no host C++ compiler found: none of c++, g++, clang++ is on PATH (set CXX)"
                                  : "CXX='" + cxx + "' names no executable on PATH";
    return c;
  }
};

namespace detail {

inline const std::vector<std::string>& host_base_flags() {
  static const std::vector<std::string> flags{"-O3",        "-march=native",    "-fopenmp",
                                              "-shared",    "-fPIC",            "-std=c++17",
                                              "-fno-math-errno", "-ffp-contract=off"};
  return flags;
}

/// The CPU as -march=native sees it: the raw CPUID leaves GCC and Clang expand it from for code
/// generation (vendor, family/model/stepping, the feature leaves 1, 7.0, 7.1, 0xd.1, 0x80000001,
/// 0x80000008, AVX10's 0x24) and the OS-enabled register state (XCR0: no AVX-512 code where the OS does
/// not save zmm). Per-core fields (APIC ids, core counts) are masked out. Left out, to keep it cheap: the
/// cache-size leaves (they tune, never change what runs) and leaves of features no compiler emits by
/// itself (PT, Key Locker). Computed once per process: each CPUID traps under a hypervisor (~10 us).
[[nodiscard]] inline const std::string& host_cpu_signature() {
  static const std::string signature = [] {
    std::string out;
#if defined(__x86_64__) || defined(__i386__)
    char hex[48];
    unsigned a = 0, b = 0, c = 0, d = 0;
    // One leaf's registers, each ANDed with its mask; returns eax.
    const auto leaf = [&](unsigned l, unsigned sub, unsigned mb = ~0u, unsigned mc = ~0u) {
      __cpuid_count(l, sub, a, b, c, d);
      std::snprintf(hex, sizeof hex, "%x.%x:%x,%x,%x,%x;", l, sub, a, b & mb, c & mc, d);
      out += hex;
      return a;
    };
    const unsigned max_leaf = leaf(0, 0);
    if (max_leaf >= 1) {
      leaf(1, 0, 0x0000ff00u);  // ebx: only the CLFLUSH line size (the rest is this core's APIC id)
      const bool osxsave = (c & (1u << 27)) != 0;
      if (max_leaf >= 7 && leaf(7, 0) >= 1) leaf(7, 1);
      if (max_leaf >= 0xd) leaf(0xd, 1, 0);  // ebx: the save area's size, which follows XCR0 (below)
      if (max_leaf >= 0x24) leaf(0x24, 0);
      if (osxsave) {  // xgetbv is allowed
        unsigned lo = 0, hi = 0;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        std::snprintf(hex, sizeof hex, "xcr0:%x%08x;", hi, lo);
        out += hex;
      }
    }
    const unsigned max_ext = leaf(0x80000000u, 0);
    if (max_ext >= 0x80000001u) leaf(0x80000001u, 0);
    if (max_ext >= 0x80000008u) leaf(0x80000008u, 0, ~0u, 0);  // ecx: this VM's core count
#endif
    return out;
  }();
  return signature;
}

inline std::string host_arch_string() {
  std::string model = cpu_model_name();
  return "x86_64 " + std::string(to_string(host_isa())) + " [" + cpu_features().str() + "] (" + model + ")";
}

inline BuildCommand host_build_command(const OpBuilder& b) {
  BuildCommand cmd;
  cmd.op = b.name();
  cmd.kind = OpKind::host;
  const HostCompiler cxx = HostCompiler::find();
  cmd.compiler = cxx.found() ? cxx.command.front() : cxx.name;
  if (cxx.found()) {
    cmd.argv = cxx.command;
  } else {  // the command as $CXX names it, so the user sees what was not found
    std::istringstream in(env_string("CXX"));
    for (std::string w; in >> w;) cmd.argv.push_back(w);
    if (cmd.argv.empty()) cmd.argv.push_back(cxx.name);
  }
  for (const auto& f : host_base_flags()) cmd.argv.push_back(f);
  for (const auto& d : b.include_dirs()) cmd.argv.push_back("-I" + d.string());
  for (const auto& f : b.spec().flags) cmd.argv.push_back(f);
  for (const auto& f : b.extra_flags()) cmd.argv.push_back(f);
  for (const auto& s : b.sources()) cmd.argv.push_back(s.string());
  cmd.arch = host_arch_string();

  Sha256 h;
  h.field("accel-jit/1").field(std::to_string(abi_version)).field(b.name()).field("host");
  b.hash_sources(h);
  for (const auto& f : host_base_flags()) h.field(f);
  for (const auto& f : b.spec().include_dirs) h.field("-I" + f);
  for (const auto& f : b.spec().flags) h.field(f);
  for (const auto& f : b.extra_flags()) h.field(f);
  h.field(cxx.identity).field(cmd.arch).field(host_cpu_signature());
  // Entries are built with a dependency manifest (see the header comment); this field keeps this accel
  // from taking an entry an older one wrote without a manifest, which would never notice an edit to a
  // header the spec does not list.
  h.field("deps:-MD");
  cmd.key = h.hex();
  cmd.output = JitCache(b.cache_dir()).entry_path(b.name(), cmd.key, "so");
  cmd.argv.push_back("-o");
  cmd.argv.push_back(cmd.output.string());
  return cmd;
}

inline void* host_lookup(void* handle, const char* name) { return ::dlsym(handle, name); }

/// The files op `b`'s compile read that its key does not cover: the prerequisites in `depfiles` (what
/// the compiler wrote with -MD / -M) other than the spec's sources and listed headers, as absolute paths
/// (a relative one is relative to this process's directory, where the compiler ran). nullopt, with
/// `why`, when a depfile is missing or does not parse: then no manifest is kept, and the entry is judged
/// by its key alone, as before.
inline BuildDependencies host_dependencies(const OpBuilder& b, const std::vector<std::filesystem::path>& depfiles,
                                           std::string& why) {
  std::error_code ec;
  const auto same_file = [&](const std::filesystem::path& p) {
    std::filesystem::path c = std::filesystem::weakly_canonical(std::filesystem::absolute(p, ec), ec);
    return ec ? std::filesystem::absolute(p, ec).lexically_normal().string() : c.string();
  };
  std::set<std::string> covered;  // in the key already
  for (const auto& s : b.sources()) covered.insert(same_file(s));
  for (const auto& h : b.spec().headers) covered.insert(same_file(b.kernel_dir() / h));
  std::vector<std::filesystem::path> out;
  std::set<std::string> seen;
  for (const auto& depfile : depfiles) {
    std::string text;
    std::vector<std::string> prerequisites;
    if (!read_file(depfile, text)) {
      why = "the compiler wrote no dependency file " + depfile.string();
      return std::nullopt;
    }
    if (!parse_depfile(text, prerequisites)) {
      why = "the compiler's dependency file " + depfile.string() + " does not parse";
      return std::nullopt;
    }
    for (const auto& p : prerequisites) {
      const std::filesystem::path file = std::filesystem::absolute(p, ec).lexically_normal();
      if (ec) continue;
      if (covered.count(same_file(file)) != 0 || !seen.insert(file.string()).second) continue;
      out.push_back(file);
    }
  }
  return out;
}

/// The shared objects this process has loaded from the JIT cache, by file and by the path they were
/// dlopen'ed under. Needed because dlopen matches an already-loaded library by its path *name* before it
/// looks at the file: once <key>.so is loaded (and RTLD_NODELETE keeps it), dlopen("<key>.so") returns
/// that library even after a rebuild renamed a new file over the path. So a file is loaded once, by
/// inode; one whose path already names another loaded file is loaded through a fresh name (a hard link,
/// removed again at once). The mappings keep every recorded inode alive, so none is reused meanwhile.
struct LoadedLibraries {
  using FileId = std::pair<std::uint64_t, std::uint64_t>;  // (st_dev, st_ino)
  std::mutex mutex;
  std::map<FileId, std::shared_ptr<void>> by_file;
  std::map<std::string, FileId> by_name;

  static LoadedLibraries& instance() {
    static LoadedLibraries* const libraries = new LoadedLibraries;  // never destroyed: used until exit
    return *libraries;
  }
};

[[nodiscard]] inline std::pair<std::uint64_t, std::uint64_t> file_id_of(const struct stat& st) noexcept {
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

inline std::shared_ptr<void> host_dlopen(const std::filesystem::path& path, std::string* error) {
  ::dlerror();
  // RTLD_NODELETE: a kernel library is never unmapped (as torch never unloads an extension). Its
  // OpenMP runtime keeps worker threads parked inside libgomp, which would otherwise be unloaded
  // with the last op that uses it, under those threads' feet.
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (h == nullptr) {
    const char* why = ::dlerror();
    *error = why != nullptr ? why : "unknown dlopen error";
    return nullptr;
  }
  return std::shared_ptr<void>(h, [](void* p) { ::dlclose(p); });
}

/// Records `handle`, just dlopen'ed from the file `path` names, as that file's library (see LoadedLibraries).
inline void remember_library(const std::filesystem::path& path, const std::shared_ptr<void>& handle) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  auto& libs = LoadedLibraries::instance();
  const std::lock_guard<std::mutex> guard(libs.mutex);
  libs.by_file.emplace(file_id_of(st), handle);
}

/// dlopen of the cache entry get_or_build returned — the very file it checked, never a library that the
/// same path named earlier in this process (see LoadedLibraries).
inline std::shared_ptr<void> host_open_entry(const CacheEntry& entry, std::string* error) {
  auto& libs = LoadedLibraries::instance();
  const LoadedLibraries::FileId id{entry.file_device, entry.file_inode};
  const std::lock_guard<std::mutex> guard(libs.mutex);
  if (const auto it = libs.by_file.find(id); it != libs.by_file.end()) return it->second;
  const std::string name = entry.path.string();
  if (const auto named = libs.by_name.find(name); named == libs.by_name.end() || named->second == id) {
    std::shared_ptr<void> h = host_dlopen(entry.path, error);
    if (h) {
      libs.by_name[name] = id;
      libs.by_file[id] = h;
    }
    return h;
  }
  // The path names a library loaded from an earlier file (the entry was rebuilt by another process).
  // The link's name holds ".tmp.": should this process die before the unlink, the next build of the op
  // removes it as a leftover.
  static std::atomic<std::uint64_t> sequence{0};
  const std::filesystem::path alias =
      name + ".tmp." + std::to_string(::getpid()) + ".load." + std::to_string(sequence.fetch_add(1));
  if (::link(entry.path.c_str(), alias.c_str()) != 0) {
    *error = "cannot link " + name + " to " + alias.string() + " (to load the rebuilt entry under a new name): " +
             std::strerror(errno);
    return nullptr;
  }
  struct stat st {};
  std::shared_ptr<void> h;
  if (::stat(alias.c_str(), &st) == 0 && file_id_of(st) == id) {
    h = host_dlopen(alias, error);
  } else {
    *error = name + " was replaced while it was being loaded";
  }
  (void)::unlink(alias.c_str());
  if (h) libs.by_file[id] = h;
  return h;
}

/// Why an AOT build at `path` is unusable here (empty: usable).
inline std::string host_aot_problem(const std::shared_ptr<void>& handle) {
  auto* version = reinterpret_cast<int (*)()>(::dlsym(handle.get(), "accel_ops_abi_version"));
  if (version == nullptr) return "it does not export accel_ops_abi_version";
  if (version() != abi_version) {
    return "its ABI version is " + std::to_string(version()) + ", this accel expects " + std::to_string(abi_version);
  }
  auto* isa = reinterpret_cast<int (*)()>(::dlsym(handle.get(), "accel_ops_isa"));
  if (isa != nullptr && isa() > static_cast<int>(host_isa())) {
    return "it was built for " + std::string(to_string(static_cast<HostIsa>(isa()))) + " and this CPU has " +
           std::string(to_string(host_isa()));
  }
  return {};
}

inline Compatibility host_is_compatible(const OpBuilder& b) {
  Compatibility c;
  const std::filesystem::path aot = b.aot_dir().empty() ? std::filesystem::path() : b.aot_dir() / (b.name() + ".so");
  const bool has_aot = !aot.empty() && std::filesystem::exists(aot);
  const HostCompiler cxx = HostCompiler::find();
  if (!cxx.found()) {
    if (has_aot) {
      c.notes.push_back(cxx.why_missing + ", but an AOT build exists: " + aot.string());
    } else {
      c.fail(cxx.why_missing);
    }
  }
  for (const auto& s : b.sources()) {
    if (!has_aot && !std::filesystem::exists(s)) {
      c.fail("kernel source " + s.string() + " is missing (set ACCEL_KERNEL_DIR)");
    }
  }
  switch (host_isa()) {
    case HostIsa::avx512: c.notes.push_back("AVX-512 path"); break;
    case HostIsa::avx2: c.notes.push_back("AVX2 path (no AVX-512 on this CPU)"); break;
    case HostIsa::scalar: c.notes.push_back("scalar path (no AVX2/FMA on this CPU)"); break;
  }
  if (has_aot) {
    c.notes.push_back("AOT build " + aot.string());
  } else if (const std::string noexec = noexec_problem(b.cache_dir()); !noexec.empty()) {
    c.fail(noexec);
  }
  return c;
}

/// The op's AOT build, loaded, when it exists and is usable here; else null, and `problem` (when the
/// file exists) says why it was skipped. One check for load() and is_cached(), so they agree.
inline std::shared_ptr<void> host_aot(const OpBuilder& b, std::filesystem::path& path, std::string& problem) {
  if (b.aot_dir().empty()) return nullptr;
  path = b.aot_dir() / (b.name() + ".so");
  if (!std::filesystem::exists(path)) return nullptr;
  std::string error;
  std::shared_ptr<void> h = host_dlopen(path, &error);
  problem = h ? host_aot_problem(h) : "dlopen failed: " + error;
  return problem.empty() ? h : nullptr;
}

/// Toolchain::is_cached: a usable AOT build, else a valid cache entry (what load() would take).
inline bool host_is_cached(const OpBuilder& b) {
  std::filesystem::path aot;
  std::string problem;
  if (host_aot(b, aot, problem)) return true;
  return entry_is_cached(b);
}

inline LoadedOp host_load(const OpBuilder& b) {
  const auto start = std::chrono::steady_clock::now();
  const std::string who = b.backend() + " op '" + b.name() + "'";
  // 1. An ahead-of-time build.
  {
    std::filesystem::path aot;
    std::string problem;
    if (std::shared_ptr<void> h = host_aot(b, aot, problem)) {
      jit_log(b.name() + ": AOT build " + aot.string());
      return LoadedOp(b.name(), OpKind::host, LoadSource::aot, aot, std::move(h), host_lookup, seconds_since(start));
    }
    if (!problem.empty()) jit_log(b.name() + ": ignoring AOT build " + aot.string() + ": " + problem);
  }
  // 2. The JIT cache, compiling on a miss. Without a compiler no entry can match (its identity is in the
  // key): say so before touching the cache directory.
  const BuildCommand cmd = host_build_command(b);
  const HostCompiler cxx = HostCompiler::find();
  if (!cxx.found()) {
    throw BackendUnavailableError(who + " cannot be built: " + cxx.why_missing + " (command: " + cmd.str() + ")");
  }
  const double timeout = compile_timeout_seconds();
  JitCache cache(b.cache_dir());
  const auto build = [&](const std::filesystem::path& tmp) -> BuildDependencies {
    // A noexec mount would take the whole compile and then fail to map its output: refuse first.
    if (const std::string noexec = noexec_problem(tmp.parent_path()); !noexec.empty()) {
      throw BackendUnavailableError(who + " cannot be built: " + noexec);
    }
    std::vector<std::string> argv = cmd.argv;
    argv.back() = tmp.string();  // -o <temporary>
    // The dependency list: -MD (not -MMD) so that system headers count too: a package upgrade can change
    // Boost's or libstdc++'s headers while the compiler's identity in the key stays the same, and checking
    // them costs a stat each. With one source the compile writes it (-MF <temporary>.d); with several,
    // -MF would keep only the last source's list, so each source is scanned after the compile (-M).
    const std::size_t n_sources = b.sources().size();
    std::vector<std::filesystem::path> depfiles;
    for (std::size_t i = 0; i < std::max<std::size_t>(n_sources, 1); ++i) {
      depfiles.push_back(tmp.string() + "." + std::to_string(i) + ".d");
    }
    struct RemoveFiles {
      const std::vector<std::filesystem::path>& files;
      ~RemoveFiles() {
        std::error_code ignored;
        for (const auto& f : files) std::filesystem::remove(f, ignored);
      }
    } const remove_depfiles{depfiles};
    if (n_sources == 1) argv.insert(argv.end() - 2, {"-MD", "-MF", depfiles.front().string()});
    jit_log(b.name() + ": compiling for " + cmd.arch + ": " + join_command(argv));
    accel::detail::SubprocessOptions options;
    options.timeout_seconds = timeout;
    const accel::detail::SubprocessResult r = accel::detail::run_program(argv, options);
    const auto space = [&] { return disk_space_problem({tmp.parent_path(), compiler_temp_dir()}, r.output); };
    if (!r.ok()) {
      std::string message = who + ": compile failed: " + cxx.command.front() + " " + r.describe();
      if (r.outcome == accel::detail::SubprocessOutcome::timed_out) {
        message += " (the limit is ACCEL_JIT_COMPILE_TIMEOUT, in seconds; 0: none)";
      }
      if (const std::string s = space(); !s.empty()) message += ": " + s;
      jit_log(b.name() + ": " + message);
      throw CompileError(message, join_command(argv), r.output);
    }
    // Exit status 0 is not enough: a compiler killed half-way by something it ignores, a full disk it did
    // not notice, a wrapper that swallows errors. dlopen the temporary before it is committed.
    std::string error;
    const std::shared_ptr<void> loaded = host_dlopen(tmp, &error);
    if (!loaded) {
      std::string message = who + ": the compiler exited with status 0, but its output " + tmp.string() +
                            " cannot be loaded (" + error + "); nothing was committed to the cache";
      if (const std::string s = space(); !s.empty()) message += ": " + s;
      jit_log(b.name() + ": " + message);
      throw CompileError(message, join_command(argv), r.output);
    }
    remember_library(tmp, loaded);  // what load() returns once the temporary is the entry
    jit_log(b.name() + ": compiled in " + std::to_string(r.seconds) + " s");
    if (n_sources > 1) {  // -M per source: the preprocessor only, with the compile's flags
      std::vector<std::string> scan(cmd.argv.begin(), cmd.argv.end() - 2 - static_cast<std::ptrdiff_t>(n_sources));
      std::erase(scan, std::string("-shared"));
      for (std::size_t i = 0; i < n_sources; ++i) {
        std::vector<std::string> one = scan;
        one.insert(one.end(), {"-M", "-MF", depfiles[i].string(), b.sources()[i].string()});
        const accel::detail::SubprocessResult m = accel::detail::run_program(one, options);
        if (!m.ok()) jit_log(b.name() + ": dependency scan failed: " + join_command(one) + ": " + m.describe());
      }
    }
    std::string why;
    BuildDependencies deps = host_dependencies(b, depfiles, why);
    if (!deps) jit_log(b.name() + ": " + why + ": only the spec's listed headers are tracked for this entry");
    return deps;
  };
  CacheEntry entry = cache.get_or_build(b.name(), cmd.key, "so", build);
  std::string error;
  std::shared_ptr<void> h = host_open_entry(entry, &error);
  if (!h && !entry.compiled) {
    // A valid entry on a noexec mount is not at fault: keep it (it loads once the mount allows it).
    if (const std::string noexec = noexec_problem(entry.path.parent_path()); !noexec.empty()) {
      throw BackendUnavailableError(who + ": cannot load the cache entry " + entry.path.string() + " (" + error +
                                    "): " + noexec);
    }
    // A committed entry that does not load: evict it and build it once more.
    const std::string first_error = error;
    const std::string what = who + ": the cache entry " + entry.path.string() + " cannot be loaded (" + first_error + ")";
    jit_log(what + ": evicting it and rebuilding");
    (void)cache.evict(b.name(), cmd.key, "so", entry);
    try {
      entry = cache.get_or_build(b.name(), cmd.key, "so", build);
    } catch (const CompileError& e) {
      throw CompileError(what + "; it was evicted, and rebuilding it failed: " + e.what(), e.command(), e.log());
    }
    h = host_open_entry(entry, &error);
    if (!h) {
      throw Error(Errc::runtime_failure,
                  what + "; it was evicted and rebuilt once, and the rebuilt entry cannot be loaded either: " + error);
    }
  }
  if (!h) {
    throw Error(Errc::runtime_failure, who + ": cannot load " + entry.path.string() + ": " + error);
  }
  const double seconds = seconds_since(start);
  if (!entry.compiled) jit_log(b.name() + ": cache hit " + entry.path.string() + " (" + std::to_string(seconds * 1e3) + " ms)");
  return LoadedOp(b.name(), OpKind::host, entry.compiled ? LoadSource::compiled : LoadSource::cache_hit, entry.path,
                  std::move(h), host_lookup, seconds);
}

}  // namespace detail

/// The host toolchain (OpKind::host).
inline constexpr Toolchain host_toolchain{"host",           detail::host_is_compatible,
                                          detail::host_build_command, detail::host_load,
                                          "so",             detail::host_is_cached};

}  // namespace accel::ops
