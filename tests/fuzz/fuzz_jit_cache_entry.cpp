// JIT cache entries (ops/jit_cache.hpp): an entry file is outside input — another process, a crash
// or a full disk may have left anything there. Input byte 0 picks a mode:
//   even: the rest is an entry file as found on disk. verify() never crashes, and says ok only for a
//         self-consistent entry: then the payload is the file minus its 48-byte footer. The same bytes
//         as a cubin payload: ops::cubin_problem() never reads outside them, and accepts only a
//         fatbinary or a 64-bit EM_CUDA ELF whose section headers lie inside it.
//   odd:  bytes 1..4 describe damage, the rest is a payload. get_or_build() commits the payload
//         (through the real write path); the damage is applied to the file (flip a byte, truncate, or
//         append); verify() must then refuse a flipped file and accept only a consistent one; and
//         get_or_build() must return the original payload again — rebuilding anything not ok —
//         leaving no temporary file behind.
// Files live in a private directory under /dev/shm (tmpfs: fsync is free).
#include "fuzz_main.hpp"

#include <accel/ops/detail/files.hpp>
#include <accel/ops/jit_cache.hpp>
#include <accel/ops/nvrtc.hpp>

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using accel::ops::EntryState;
using accel::ops::JitCache;

constexpr std::string_view key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
constexpr std::size_t footer = 48;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_jit_cache_entry: invariant broken: %s\n", what);
  std::abort();
}

// /dev/shm/accel-fuzz-jit-<pid>. libFuzzer ends without running atexit handlers, so each start
// first removes the directories of processes that no longer exist.
const fs::path& scratch() {
  static const fs::path dir = [] {
    const fs::path base = ::access("/dev/shm", W_OK) == 0 ? fs::path("/dev/shm") : fs::temp_directory_path();
    const std::string prefix = "accel-fuzz-jit-";
    std::error_code ec;
    for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.starts_with(prefix)) continue;
      const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
        std::error_code ignored;
        fs::remove_all(it->path(), ignored);
      }
    }
    fs::path mine = base / (prefix + std::to_string(::getpid()));
    fs::create_directories(mine, ec);
    if (ec) fail("cannot create a scratch directory");
    return mine;
  }();
  return dir;
}

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("cannot write a scratch file");
}

std::string read_file(const fs::path& path) {
  std::string bytes;
  if (!accel::ops::detail::read_file(path, bytes)) fail("cannot read a scratch file");
  return bytes;
}

// What verify() reported ok must be consistent with the file.
void check_ok_payload(const std::string& file, const std::string& payload, std::size_t payload_size) {
  if (file.size() < footer || payload_size != file.size() - footer) fail("ok with a wrong payload size");
  if (payload != file.substr(0, payload_size)) fail("ok with a payload that is not the file's");
}

// cubin_problem() on arbitrary bytes: empty only for what it documents as a cubin.
void check_cubin(std::string_view bytes) {
  const std::string problem = accel::ops::cubin_problem(bytes);
  if (!problem.empty()) return;
  std::uint32_t magic = 0;
  if (bytes.size() >= 16) std::memcpy(&magic, bytes.data(), 4);
  if (magic == 0xBA55ED50u) return;
  if (bytes.size() < 64 || bytes.substr(0, 4) != std::string_view("\x7f" "ELF", 4)) fail("a non-ELF cubin accepted");
  std::uint16_t machine = 0, shentsize = 0, shnum = 0;
  std::uint64_t shoff = 0;
  std::memcpy(&machine, bytes.data() + 18, 2);
  std::memcpy(&shoff, bytes.data() + 40, 8);
  std::memcpy(&shentsize, bytes.data() + 58, 2);
  std::memcpy(&shnum, bytes.data() + 60, 2);
  if (machine != 190) fail("an ELF file for another machine accepted as a cubin");
  if (shoff > bytes.size() || std::uint64_t{shnum} * shentsize > bytes.size() - shoff) {
    fail("a cubin whose section headers lie outside it accepted");
  }
}

}  // namespace

void accel_fuzz_one(std::string_view text) {
  if (text.empty()) return;
  const bool commit_mode = (static_cast<unsigned char>(text[0]) & 1) != 0;

  if (!commit_mode) {  // an arbitrary file where an entry should be
    const fs::path path = scratch() / "found.so";
    write_file(path, text.substr(1));
    std::string payload;
    std::size_t size = 0;
    std::string why;
    const EntryState s = JitCache::verify(path, key, &payload, &size, &why);
    if (s == EntryState::ok) {
      check_ok_payload(std::string(text.substr(1)), payload, size);
    } else if (why.empty()) {
      fail("refused without saying why");
    }
    check_cubin(text.substr(1));
    return;
  }

  if (text.size() < 5) return;
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned op = byte(1) % 4;  // 0 none, 1 flip, 2 truncate, 3 append
  const std::size_t where = byte(2) | (std::size_t{byte(3)} << 8);
  const unsigned char value = byte(4);
  const std::string original(text.substr(5));

  JitCache writer(scratch());
  std::error_code ec;
  fs::remove(writer.entry_path("fuzz", key, "so"), ec);  // each input starts from an empty cache
  const auto build = [&](const fs::path& tmp) { write_file(tmp, original); };
  accel::ops::CacheEntry first = writer.get_or_build("fuzz", key, "so", build, true);
  if (first.payload != original) fail("the committed payload differs from what the build wrote");
  const fs::path path = first.path;
  std::string file = read_file(path);
  if (file.size() != original.size() + footer) fail("the committed file is not payload + footer");
  if (JitCache::verify(path, key) != EntryState::ok) fail("a freshly committed entry is not ok");

  switch (op) {
    case 1: file[where % file.size()] = static_cast<char>(file[where % file.size()] ^ (value | 1)); break;
    case 2: file.resize(where % file.size()); break;
    case 3: file.append(1 + value % 64, static_cast<char>(value)); break;
    default: break;
  }
  write_file(path, file);
  std::string payload;
  std::size_t size = 0;
  const EntryState s = JitCache::verify(path, key, &payload, &size);
  if (op == 0 && s != EntryState::ok) fail("an untouched entry is not ok");
  if (op == 1 && s == EntryState::ok) fail("an entry with a flipped byte was accepted");
  if (s == EntryState::ok) check_ok_payload(file, payload, size);

  accel::ops::CacheEntry again = writer.get_or_build("fuzz", key, "so", build, true);
  if (s == EntryState::ok) {
    if (again.compiled || again.payload != payload) fail("an ok entry was not reused as it is");
  } else {
    if (!again.compiled || again.payload != original) fail("a damaged entry was not rebuilt");
    if (JitCache::verify(path, key) != EntryState::ok) fail("the rebuilt entry is not ok");
  }
  for (const auto& e : fs::directory_iterator(path.parent_path())) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) fail("a temporary file was left behind");
  }
}
