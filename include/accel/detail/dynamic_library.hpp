// accel/detail/dynamic_library.hpp — a shared library opened at run time (dlopen), and typed lookups of
// its symbols, with errors that name the library and what is missing.
//
// accel links no vendor library it can load instead (the CUDA driver, NVML, NVRTC, cuBLAS): a program
// built with CUDA must still start, and report CUDA unavailable, on a machine without it. Every such
// symbol table is built the same way:
//
//   DynamicLibrary lib = DynamicLibrary::try_open({"libcublas.so.13", "libcublas.so"});
//   if (!lib) return fail(lib.error());        // "libcublas.so.13: cannot open ...; libcublas.so: ..."
//   SymbolTable table(lib);
//   table.require(api.create, "cublasCreate_v2");
//   table.optional(api.status_string, "cublasGetStatusString");
//   if (!table.complete()) return fail(table.error());   // "libcublas.so.13 lacks cublasCreate_v2"
//
// DynamicLibrary is move-only RAII: the destructor closes the handle. Process-wide tables, which must
// outlive static destruction (the library may be called from other static destructors), keep theirs
// in an object that is never destroyed, or call release(). DynamicLibrary::process() looks symbols up
// in the whole process (the program and every library loaded with it), for an optional dependency
// that another library has already brought in.
#pragma once

#include <accel/core/error.hpp>

#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace accel::detail {

class DynamicLibrary {
 public:
  /// RTLD_NOW: a missing dependency fails here, not at the first call. RTLD_LOCAL: its symbols do not
  /// leak into the process's namespace.
  static constexpr int default_flags = RTLD_NOW | RTLD_LOCAL;

  /// An empty handle (nothing loaded, error() empty).
  DynamicLibrary() noexcept = default;

  /// The first of `candidates` (names or paths, as dlopen takes them) that loads; empty candidates are
  /// skipped (an unset environment override). Never throws for a missing library: check the result
  /// (operator bool) and error(), which lists every candidate with dlopen's reason.
  [[nodiscard]] static DynamicLibrary try_open(std::initializer_list<std::string_view> candidates,
                                               int flags = default_flags) noexcept {
    return try_open(candidates.begin(), candidates.end(), flags);
  }
  template <class It>
  [[nodiscard]] static DynamicLibrary try_open(It first, It last, int flags = default_flags) noexcept {
    DynamicLibrary out;
    try {
      for (; first != last; ++first) {
        const std::string name(*first);
        if (name.empty()) continue;
        if (void* h = ::dlopen(name.c_str(), flags)) {
          out.handle_ = h;
          out.name_ = name;
          out.error_.clear();
          return out;
        }
        const char* why = ::dlerror();
        out.error_ += (out.error_.empty() ? "" : "; ") + std::string(why != nullptr ? why : name + ": cannot be loaded");
      }
      if (out.error_.empty()) out.error_ = "no library name to load";
    } catch (...) {  // std::bad_alloc building the message: say as much as fits
      out.error_ = "dynamic library lookup failed (out of memory)";
    }
    return out;
  }

  /// Like try_open, but a library that cannot be loaded is a BackendUnavailableError that says
  /// `what` ("cuBLAS"), and lists the candidates tried and why each failed.
  [[nodiscard]] static DynamicLibrary open(std::string_view what, std::initializer_list<std::string_view> candidates,
                                           int flags = default_flags) {
    DynamicLibrary lib = try_open(candidates, flags);
    if (!lib) throw BackendUnavailableError(std::string(what) + " cannot be loaded: " + lib.error());
    return lib;
  }

  /// The symbols of the whole process: the program and the libraries loaded globally with it.
  [[nodiscard]] static DynamicLibrary process() noexcept {
    DynamicLibrary out;
    out.handle_ = ::dlopen(nullptr, RTLD_NOW);
    out.name_ = "the process";
    return out;
  }

  DynamicLibrary(DynamicLibrary&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)), name_(std::move(other.name_)), error_(std::move(other.error_)) {}
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept {
    if (this != &other) {
      close();
      handle_ = std::exchange(other.handle_, nullptr);
      name_ = std::move(other.name_);
      error_ = std::move(other.error_);
    }
    return *this;
  }
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  ~DynamicLibrary() { close(); }

  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  [[nodiscard]] bool loaded() const noexcept { return handle_ != nullptr; }
  /// The candidate that loaded ("libcublas.so.13"); empty when none did.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// Why no candidate loaded; empty when one did.
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  [[nodiscard]] void* native_handle() const noexcept { return handle_; }

  /// The symbol as a pointer of type F (a function pointer type), or nullptr when it is missing or
  /// nothing is loaded.
  template <class F>
  [[nodiscard]] F find(const char* symbol) const noexcept {
    static_assert(std::is_pointer_v<F>, "DynamicLibrary::find<F>: F is the symbol's pointer type");
    if (handle_ == nullptr) return nullptr;
    return reinterpret_cast<F>(::dlsym(handle_, symbol));
  }

  /// The symbol as F; a missing one is a BackendUnavailableError "<library> lacks <symbol>".
  template <class F>
  [[nodiscard]] F get(const char* symbol) const {
    if (handle_ == nullptr) {
      throw BackendUnavailableError(std::string("cannot look up ") + symbol + ": the library is not loaded" +
                                    (error_.empty() ? "" : " (" + error_ + ")"));
    }
    if (F f = find<F>(symbol)) return f;
    throw BackendUnavailableError(name_ + " lacks " + symbol + " (an older or a stub library?)");
  }

  /// Gives up ownership: the handle stays open for the life of the process. Returns it.
  void* release() noexcept { return std::exchange(handle_, nullptr); }

 private:
  void close() noexcept {
    if (handle_ != nullptr) ::dlclose(std::exchange(handle_, nullptr));
  }

  void* handle_ = nullptr;
  std::string name_;
  std::string error_;
};

/// The names a CUDA toolkit library is tried under, in order: the value of `override_var` (when set),
/// `soname`, `stem`.so, then `soname` under $CUDA_HOME/lib64, $CUDA_PATH/lib64 and /usr/local/cuda/lib64.
[[nodiscard]] inline std::vector<std::string> toolkit_library_candidates(const char* override_var, const std::string& stem,
                                                                         const std::string& soname) {
  std::vector<std::string> names;
  if (const char* p = std::getenv(override_var); p != nullptr && *p != '\0') names.emplace_back(p);
  names.push_back(soname);
  names.push_back(stem + ".so");
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* d = std::getenv(var); d != nullptr && *d != '\0') names.push_back(std::string(d) + "/lib64/" + soname);
  }
  names.push_back("/usr/local/cuda/lib64/" + soname);
  return names;
}

/// Fills a table of function pointers from one library and collects what is missing, so that a table
/// reports every missing entry point in one message rather than the first one only.
class SymbolTable {
 public:
  explicit SymbolTable(const DynamicLibrary& library) noexcept : library_(library) {}

  /// `out` = the symbol; a missing one makes the table incomplete.
  template <class F>
  SymbolTable& require(F& out, const char* symbol) noexcept {
    out = library_.find<F>(symbol);
    if (out == nullptr) note_missing(symbol);
    return *this;
  }
  /// `out` = the symbol, or nullptr when this version of the library lacks it.
  template <class F>
  SymbolTable& optional(F& out, const char* symbol) noexcept {
    out = library_.find<F>(symbol);
    return *this;
  }

  /// True when the library is loaded and every required symbol was found.
  [[nodiscard]] bool complete() const noexcept { return library_.loaded() && missing_.empty() && !failed_; }
  /// "libcublas.so.13 lacks cublasGemmEx, cublasSetWorkspace_v2", or why the library did not load.
  [[nodiscard]] std::string error() const {
    if (!library_.loaded()) return library_.error().empty() ? "the library is not loaded" : library_.error();
    if (failed_) return library_.name() + ": symbol lookup failed (out of memory)";
    if (missing_.empty()) return {};
    return library_.name() + " lacks " + missing_;
  }
  /// Throws BackendUnavailableError(error()) unless complete().
  void check() const {
    if (!complete()) throw BackendUnavailableError(error());
  }

 private:
  void note_missing(const char* symbol) noexcept {
    try {
      missing_ += (missing_.empty() ? "" : ", ") + std::string(symbol);
    } catch (...) {
      failed_ = true;
    }
  }

  const DynamicLibrary& library_;
  std::string missing_;
  bool failed_ = false;
};

}  // namespace accel::detail
