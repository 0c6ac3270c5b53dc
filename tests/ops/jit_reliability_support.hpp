// Shared by the JIT reliability tests: a tiny host op that compiles in a fraction of a second, fake
// compilers (shell scripts), scoped environment variables, and running a check as another user.
#pragma once

#include <doctest/doctest.h>

#include "ops_test_support.hpp"
#include "support/child_report.hpp"
#include "support/scoped_env.hpp"

#include <accel/ops/host_compiler.hpp>
#include <accel/ops/jit_cache.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace jit_test {

namespace fs = std::filesystem;

using ::ScopedEnv;

/// The host compiler a tiny op is built with when CXX is unset (resolved once, before a test sets CXX).
inline const std::string& real_cxx() {
  static const std::string cxx = [] {
    const ScopedEnv unset{{"CXX", nullptr}};
    const auto c = accel::ops::HostCompiler::find();
    return c.found() ? c.command.front() : std::string();
  }();
  return cxx;
}

/// True (with a SKIPPED message) when no host compiler exists: the cases that compile return at once.
inline bool no_compiler() {
  if (!real_cxx().empty()) return false;
  MESSAGE("SKIPPED: no host C++ compiler found (CXX, c++, g++): this JIT case needs one");
  return true;
}

/// A kernel directory holding tiny.cpp (`extern "C" int tiny_answer()` returning `answer`).
inline fs::path tiny_kernels(int answer = 42, const std::string& body = {}) {
  const fs::path dir = ops_test::temp_dir("tiny-kernels");
  ops_test::write_text(dir / "tiny.cpp", body.empty() ? "extern \"C\" int tiny_answer() { return " + std::to_string(answer) + "; }\n"
                                                      : body);
  return dir;
}

/// A host-compiled op "tiny" from `kernels`, caching in `cache`.
inline accel::ops::OpBuilder tiny_builder(const fs::path& kernels, const fs::path& cache) {
  accel::ops::OpSpec spec;
  spec.name = "tiny";
  spec.class_name = "TinyBuilder";
  spec.kind = accel::ops::OpKind::host;
  spec.sources = {"tiny.cpp"};
  spec.entry_points = {"tiny_answer"};
  accel::ops::OpBuilder b(spec, &accel::ops::host_toolchain, "cpu");
  b.set_kernel_dir(kernels).set_cache_dir(cache).set_aot_dir("");
  return b;
}

/// An executable shell script `name` in `dir` with `body` (after "#!/bin/sh"). In the body, $out is the
/// argument after -o (set by a prelude) and $REAL_CXX the real compiler.
inline fs::path fake_compiler(const fs::path& dir, const std::string& name, const std::string& body) {
  const fs::path path = dir / name;
  ops_test::write_text(path, "#!/bin/sh\nREAL_CXX='" + real_cxx() +
                                 "'\nprev=\nfor a in \"$@\"; do if [ \"$prev\" = -o ]; then out=$a; fi; prev=$a; done\n" +
                                 body + "\n");
  ::chmod(path.c_str(), 0755);
  return path;
}

/// Files in `dir` (recursively) whose name contains `part`.
inline std::vector<fs::path> files_containing(const fs::path& dir, const std::string& part) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().find(part) != std::string::npos) out.push_back(it->path());
  }
  return out;
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Runs `f` (returning a string) in a forked child that first becomes `uid` (gid the same), and returns
/// what f returned, or "EXCEPTION <type>: <what>" when it threw. Needs root; "SKIP ..." otherwise.
inline std::string run_as(uid_t uid, const std::function<std::string()>& f) {
  if (::geteuid() != 0) return "SKIP: switching to another uid needs root";
  return test_support::report_from_child([&]() -> std::string {
           if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) {
             return std::string("SKIP: cannot become uid ") + std::to_string(uid) + ": " + std::strerror(errno);
           }
           try {
             return f();
           } catch (const accel::ops::UnsafeCacheDirError& e) {
             return std::string("EXCEPTION UnsafeCacheDirError owner=") + std::to_string(e.owner_uid()) +
                    " mode=" + std::to_string(e.mode()) + " path=" + e.path().string() + ": " + e.what();
           } catch (const accel::Error& e) {
             return std::string("EXCEPTION accel::Error ") + std::string(accel::to_string(e.code())) + ": " + e.what();
           } catch (const std::exception& e) {
             return std::string("EXCEPTION std::exception: ") + e.what();
           }
         })
      .text;
}

/// Whether `pid` is gone: no such process, or a zombie nobody reaped yet (in a container, pid 1 may not reap).
inline bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const std::size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

/// A uid no account uses, distinct per test process (so parallel test runs do not meet).
inline uid_t spare_uid() { return static_cast<uid_t>(50000 + ::getpid() % 10000); }

}  // namespace jit_test
