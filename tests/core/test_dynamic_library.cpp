// accel/detail/dynamic_library.hpp: loading a library at run time, typed lookups, and the errors that
// name the library and what is missing.
#include "support/scoped_env.hpp"

#include <accel/detail/dynamic_library.hpp>

#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

using accel::detail::DynamicLibrary;
using accel::detail::SymbolTable;

namespace {
bool mentions(const std::string& text, const std::string& word) { return text.find(word) != std::string::npos; }
}  // namespace

TEST_CASE("DynamicLibrary: the first candidate that loads; typed lookups call the real function") {
  DynamicLibrary lib = DynamicLibrary::try_open({"", "libaccel-no-such-library.so.7", "libm.so.6"});
  REQUIRE_MESSAGE(lib, lib.error());
  CHECK(lib.loaded());
  CHECK(lib.name() == "libm.so.6");
  CHECK(lib.error().empty());
  auto* cosine = lib.find<double (*)(double)>("cos");
  REQUIRE((cosine != nullptr));
  CHECK(cosine(0.5) == std::cos(0.5));
  CHECK(lib.get<double (*)(double, double)>("pow")(2.0, 10.0) == 1024.0);
  CHECK((lib.find<void (*)()>("accel_no_such_symbol") == nullptr));
}

TEST_CASE("DynamicLibrary: a missing library or symbol is an error naming it") {
  const DynamicLibrary none = DynamicLibrary::try_open({"libaccel-missing-a.so", "libaccel-missing-b.so.2"});
  CHECK_FALSE(none);
  CHECK(none.name().empty());
  CHECK(mentions(none.error(), "libaccel-missing-a.so"));
  CHECK(mentions(none.error(), "libaccel-missing-b.so.2"));
  CHECK((none.find<void (*)()>("cos") == nullptr));
  CHECK_THROWS_AS((void)none.get<void (*)()>("cos"), accel::BackendUnavailableError);

  try {
    (void)DynamicLibrary::open("the test library", {"libaccel-missing-c.so"});
    FAIL("no exception");
  } catch (const accel::BackendUnavailableError& e) {
    CHECK(mentions(e.what(), "the test library cannot be loaded"));
    CHECK(mentions(e.what(), "libaccel-missing-c.so"));
    CHECK(e.code() == accel::Errc::backend_unavailable);
  }

  const DynamicLibrary libm = DynamicLibrary::open("libm", {"libm.so.6"});
  try {
    (void)libm.get<void (*)()>("accel_no_such_symbol");
    FAIL("no exception");
  } catch (const accel::BackendUnavailableError& e) {
    CHECK(mentions(e.what(), "libm.so.6 lacks accel_no_such_symbol"));
  }
  CHECK(DynamicLibrary().error().empty());  // empty, not failed
  CHECK_FALSE(DynamicLibrary());
}

TEST_CASE("SymbolTable: fills a table and reports every missing entry point at once") {
  const DynamicLibrary libm = DynamicLibrary::open("libm", {"libm.so.6"});
  double (*sine)(double) = nullptr;
  void (*missing1)() = nullptr;
  void (*missing2)() = nullptr;
  void (*optional_missing)() = reinterpret_cast<void (*)()>(1);
  SymbolTable table(libm);
  table.require(sine, "sin").require(missing1, "accel_missing_one").optional(optional_missing, "accel_optional");
  table.require(missing2, "accel_missing_two");
  CHECK((sine != nullptr));
  CHECK((optional_missing == nullptr));
  CHECK_FALSE(table.complete());
  CHECK(table.error() == "libm.so.6 lacks accel_missing_one, accel_missing_two");
  CHECK_THROWS_AS(table.check(), accel::BackendUnavailableError);

  SymbolTable good(libm);
  good.require(sine, "sin").optional(optional_missing, "accel_optional");
  CHECK(good.complete());
  CHECK(good.error().empty());
  good.check();

  const DynamicLibrary none = DynamicLibrary::try_open({"libaccel-missing-d.so"});
  SymbolTable unloaded(none);
  unloaded.require(sine, "sin");
  CHECK((sine == nullptr));
  CHECK_FALSE(unloaded.complete());
  CHECK(mentions(unloaded.error(), "libaccel-missing-d.so"));
}

TEST_CASE("DynamicLibrary: move-only ownership; release() keeps the library loaded; the process's symbols") {
  DynamicLibrary a = DynamicLibrary::open("libm", {"libm.so.6"});
  void* handle = a.native_handle();
  DynamicLibrary b(std::move(a));
  CHECK_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  CHECK(b.native_handle() == handle);
  CHECK(b.name() == "libm.so.6");
  DynamicLibrary c;
  c = std::move(b);
  CHECK(c.native_handle() == handle);
  CHECK(c.release() == handle);
  CHECK_FALSE(c);
  // Released: still loaded (dlopen counts references; RTLD_NOLOAD finds it without loading it).
  void* again = ::dlopen("libm.so.6", RTLD_NOW | RTLD_NOLOAD);
  CHECK(again != nullptr);
  if (again != nullptr) ::dlclose(again);
  ::dlclose(handle);

  const DynamicLibrary process = DynamicLibrary::process();
  REQUIRE(process);
  CHECK(process.name() == "the process");
  CHECK((process.find<void* (*)(std::size_t)>("malloc") != nullptr));
}

TEST_CASE("DynamicLibrary: the error lists each candidate's reason in order; no candidate at all is said so") {
  const DynamicLibrary none = DynamicLibrary::try_open({"libaccel-missing-e.so", "", "libaccel-missing-f.so.3"});
  REQUIRE_FALSE(none);
  CHECK(none.error() == "libaccel-missing-e.so: cannot open shared object file: No such file or directory; "
                        "libaccel-missing-f.so.3: cannot open shared object file: No such file or directory");
  try {
    (void)none.get<void (*)()>("cos");
    FAIL("no exception");
  } catch (const accel::BackendUnavailableError& e) {
    CHECK(std::string(e.what()) == "cannot look up cos: the library is not loaded (" + none.error() + ")");
  }
  const DynamicLibrary nothing = DynamicLibrary::try_open({"", ""});
  CHECK_FALSE(nothing);
  CHECK(nothing.error() == "no library name to load");
  const std::vector<std::string> empty_list;
  CHECK(DynamicLibrary::try_open(empty_list.begin(), empty_list.end()).error() == "no library name to load");

  void (*optional_only)() = nullptr;
  SymbolTable table(none);  // nothing required, but nothing loaded either: not complete
  table.optional(optional_only, "cos");
  CHECK_FALSE(table.complete());
  CHECK(table.error() == none.error());
}

TEST_CASE("DynamicLibrary: assigning over a library closes it; assigning one to itself keeps it") {
  DynamicLibrary lib = DynamicLibrary::open("libm", {"libm.so.6"});
  void* handle = lib.native_handle();
  DynamicLibrary& same = lib;
  lib = std::move(same);
  CHECK(lib);
  CHECK(lib.native_handle() == handle);
  CHECK(lib.name() == "libm.so.6");

  // A library this program does not link: loaded by open, unloaded again once its handle is replaced.
  const char* const extra = "libresolv.so.2";
  if (void* already = ::dlopen(extra, RTLD_NOW | RTLD_NOLOAD)) {
    ::dlclose(already);
    MESSAGE(extra << " is loaded by the process already: the unloading is not observable here");
    return;
  }
  DynamicLibrary held = DynamicLibrary::open("libresolv", {extra});
  void* loaded = ::dlopen(extra, RTLD_NOW | RTLD_NOLOAD);
  CHECK(loaded != nullptr);
  if (loaded != nullptr) ::dlclose(loaded);
  held = std::move(lib);
  CHECK(held.name() == "libm.so.6");
  CHECK(::dlopen(extra, RTLD_NOW | RTLD_NOLOAD) == nullptr);
}

TEST_CASE("toolkit_library_candidates: the override, the soname, the stem, then CUDA_HOME, CUDA_PATH and /usr/local/cuda") {
  using accel::detail::toolkit_library_candidates;
  {
    const ScopedEnv env{{"ACCEL_TEST_LIBRARY", "/opt/lib/libx.so.9"}, {"CUDA_HOME", "/h"}, {"CUDA_PATH", "/p"}};
    CHECK(toolkit_library_candidates("ACCEL_TEST_LIBRARY", "libx", "libx.so.13") ==
          std::vector<std::string>{"/opt/lib/libx.so.9", "libx.so.13", "libx.so", "/h/lib64/libx.so.13",
                                   "/p/lib64/libx.so.13", "/usr/local/cuda/lib64/libx.so.13"});
  }
  {
    // Set but empty counts as unset.
    const ScopedEnv env{{"ACCEL_TEST_LIBRARY", ""}, {"CUDA_HOME", nullptr}, {"CUDA_PATH", ""}};
    CHECK(toolkit_library_candidates("ACCEL_TEST_LIBRARY", "libx", "libx.so.13") ==
          std::vector<std::string>{"libx.so.13", "libx.so", "/usr/local/cuda/lib64/libx.so.13"});
  }
}
