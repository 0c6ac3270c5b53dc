// The host JIT's dependency manifest as data (accel/ops/detail/dependency_manifest.hpp), without a
// compiler: the exact text manifest_text writes, parse_manifest taking that and nothing else (each field
// damaged in turn), and check_manifest's verdict and reason for each way a recorded file can change —
// the cheap size-and-mtime path included, down to one nanosecond; and the Make-syntax depfile parser the
// compiler's dependency list is read with. test_jit_deps.cpp drives the same code through real builds.
#include "ops_test_support.hpp"

#include <accel/ops/detail/dependency_manifest.hpp>
#include <accel/ops/detail/depfile.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>

namespace {

namespace fs = std::filesystem;
using accel::ops::detail::check_manifest;
using accel::ops::detail::DependencyManifest;
using accel::ops::detail::manifest_text;
using accel::ops::detail::ManifestState;
using accel::ops::detail::mtime_ns_of;
using accel::ops::detail::parse_manifest;
using accel::ops::detail::record_dependency;
using accel::ops::detail::RecordedDependency;

const std::string sha_a(64, 'a');
const std::string sha_b = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

DependencyManifest two_files() {
  DependencyManifest m;
  m.payload_size = 12345;
  m.payload_checksum = 0x00ab00cd00ef0012ULL;
  m.files.push_back(RecordedDependency{"/k/my dir/a.h", 42, 1700000000123456789LL, sha_a});
  m.files.push_back(RecordedDependency{"/k/line\nbreak.h", 0, -5, sha_b});
  return m;
}

/// `text` with its first `what` replaced by `with` (which must occur).
std::string replaced(std::string text, const std::string& what, const std::string& with) {
  const auto at = text.find(what);
  REQUIRE(at != std::string::npos);
  return text.replace(at, what.size(), with);
}

/// Sets `file`'s mtime to `ns` since the epoch (to the nanosecond, as the manifest records it).
void set_mtime_ns(const fs::path& file, std::int64_t ns) {
  const struct timespec times[2] = {{ns / 1000000000, ns % 1000000000}, {ns / 1000000000, ns % 1000000000}};
  REQUIRE(::utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
}

std::int64_t mtime_now_ns(const fs::path& file) {
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  return mtime_ns_of(st);
}

/// A directory holding dep.h (recorded) and its manifest for a payload of 100 bytes, checksum 7.
struct RecordedHeader {
  fs::path dir = ops_test::temp_dir("manifest");
  fs::path header = dir / "dep.h";
  fs::path manifest = dir / "entry.so.deps";
  RecordedHeader() {
    ops_test::write_text(header, "#define DEP_VALUE 6\n");
    set_mtime_ns(header, 1600000000000000500LL);
    const std::optional<RecordedDependency> d = record_dependency(header);
    REQUIRE(d.has_value());
    DependencyManifest m;
    m.payload_size = 100;
    m.payload_checksum = 7;
    m.files.push_back(*d);
    ops_test::write_text(manifest, manifest_text(m));
  }
  [[nodiscard]] ManifestState check(std::string& why) const { return check_manifest(manifest, 100, 7, &why); }
};

}  // namespace

TEST_CASE("jit manifest: the text written, field by field, and read back the same") {
  const DependencyManifest m = two_files();
  const std::string text = manifest_text(m);
  CHECK(text == "accel-jit-deps 1 12345 00ab00cd00ef0012\n" + sha_a + " 42 1700000000123456789 13 /k/my dir/a.h\n" +
                    sha_b + " 0 -5 15 /k/line\nbreak.h\nend 2\n");
  DependencyManifest back;
  back.files.resize(3);  // parsing starts from nothing
  REQUIRE(parse_manifest(text, back));
  CHECK(back.payload_size == 12345);
  CHECK(back.payload_checksum == 0x00ab00cd00ef0012ULL);
  REQUIRE(back.files.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    CHECK(back.files[i].path == m.files[i].path);
    CHECK(back.files[i].size == m.files[i].size);
    CHECK(back.files[i].mtime_ns == m.files[i].mtime_ns);
    CHECK(back.files[i].sha256 == m.files[i].sha256);
  }
  // No files, and the largest values each field holds.
  DependencyManifest edge;
  edge.payload_size = UINT64_MAX;
  edge.payload_checksum = UINT64_MAX;
  edge.files.push_back(RecordedDependency{"/x", UINT64_MAX, INT64_MIN, sha_a});
  REQUIRE(parse_manifest(manifest_text(edge), back));
  CHECK(back.payload_size == UINT64_MAX);
  CHECK(back.payload_checksum == UINT64_MAX);
  REQUIRE(back.files.size() == 1);
  CHECK(back.files[0].size == UINT64_MAX);
  CHECK(back.files[0].mtime_ns == INT64_MIN);
  CHECK(manifest_text(DependencyManifest{}) == "accel-jit-deps 1 0 0000000000000000\nend 0\n");
  REQUIRE(parse_manifest(manifest_text(DependencyManifest{}), back));
  CHECK(back.files.empty());
}

TEST_CASE("jit manifest: any text but what manifest_text writes is refused") {
  const std::string good = manifest_text(two_files());
  const std::string record = sha_b + " 0 -5 15 /k/line\nbreak.h\n";
  // A length that, added to the offset of the path it measures, wraps around to the newline before its
  // own record: a parser without the bound would read that record again, and again. (20 digits in place
  // of "15" move the path 18 characters on.)
  const std::size_t path_at = good.find(" 15 /k/line") + 4 + 18;
  const std::size_t line_at = good.find(sha_b);
  const std::string wrapping = std::to_string(std::uint64_t{0} - (path_at - (line_at - 1)));
  REQUIRE(wrapping.size() == 20);
  const std::vector<std::string> bad = {
      replaced(good, "accel-jit-deps", "accel-jit-depz"),
      replaced(good, "deps 1 ", "deps 2 "),
      replaced(good, " 12345 ", " 12x45 "),
      replaced(good, " 12345 ", " -1 "),
      replaced(good, " 12345 ", " +12345 "),
      replaced(good, " 12345 ", " 18446744073709551616 "),  // 2^64
      replaced(good, "00ab00cd00ef0012", "0ab00cd00ef0012"),
      replaced(good, "00ab00cd00ef0012", "00ab00cd00ef00120"),
      replaced(good, "00ab00cd00ef0012", " 0ab00cd00ef0012"),
      replaced(good, "00ab00cd00ef0012", "00ab00cd00ef001g"),
      replaced(good, sha_a, sha_a.substr(1)),
      replaced(good, sha_a, sha_a + "a"),
      replaced(good, sha_b, "0123456789ABCDEF" + sha_b.substr(16)),
      replaced(good, sha_b, "0123456789abcdeg" + sha_b.substr(16)),
      replaced(good, " 42 ", " -42 "),
      replaced(good, " 42 ", " 4.2 "),
      replaced(good, " 42 ", " 18446744073709551616 "),
      replaced(good, " 1700000000123456789 ", " 17e8 "),
      replaced(good, " 1700000000123456789 ", " 9223372036854775808 "),  // 2^63
      replaced(good, " 13 /k/my dir/a.h\n", " 0 \n"),  // an empty path
      replaced(good, " 13 /k/", " 12 /k/"),   // the path not followed by its newline
      replaced(good, " 13 /k/", " 14 /k/"),
      replaced(good, "/k/my dir/a.h\n", "/k/my dir/a.hX"),  // the next record right after a path
      replaced(good, " 15 /k/", " 99 /k/"),   // past the end
      replaced(good, " 15 /k/", " 22 /k/"),   // to the very end: no newline after it
      replaced(good, " 15 /k/", " " + wrapping + " /k/"),
      replaced(good, "end 2\n", "end 1\n"),
      replaced(good, "end 2\n", "end 3\n"),
      replaced(good, "end 2\n", "end +2\n"),
      replaced(good, "end 2\n", "end  2\n"),
      replaced(good, "end 2\n", "end 2"),
      good + "x",
      good + record,
      good.substr(0, good.size() - 1),
      replaced(good, record, ""),  // a record missing: the count says 2
      "",
  };
  for (const std::string& text : bad) {
    CAPTURE(text);
    DependencyManifest m;
    CHECK_FALSE(parse_manifest(text, m));
  }
  DependencyManifest m;  // the text they were made from parses
  CHECK(parse_manifest(good, m));
}

TEST_CASE("jit manifest: a file recorded with its size, nanosecond mtime and SHA-256; one that cannot be read, not") {
  const fs::path dir = ops_test::temp_dir("manifest-record");
  ops_test::write_text(dir / "abc.h", "abc");
  set_mtime_ns(dir / "abc.h", 1234567890987654321LL);
  const std::optional<RecordedDependency> d = record_dependency(dir / "abc.h");
  REQUIRE(d.has_value());
  CHECK(d->path == (dir / "abc.h").string());
  CHECK(d->size == 3);
  CHECK(d->mtime_ns == 1234567890987654321LL);
  CHECK(d->sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK_FALSE(record_dependency(dir / "missing.h").has_value());
  CHECK_FALSE(record_dependency(dir).has_value());  // a directory has no bytes to hash
  std::string bytes = "kept";
  CHECK_FALSE(accel::ops::detail::read_file(dir, bytes));  // open(2) takes a directory; read(2) fails: not ""
  struct stat st {};
  st.st_mtim.tv_sec = 2;
  st.st_mtim.tv_nsec = 5;
  CHECK(mtime_ns_of(st) == 2000000005);
  st.st_mtim.tv_sec = -1;
  st.st_mtim.tv_nsec = 999999999;
  CHECK(mtime_ns_of(st) == -1);
}

TEST_CASE("jit manifest: check — absent, unreadable, malformed, another build's") {
  const RecordedHeader h;
  std::string why = "untouched";
  CHECK(check_manifest(h.dir / "none.deps", 100, 7, &why) == ManifestState::absent);
  CHECK(why == "untouched");
  fs::create_directory(h.dir / "dir.deps");
  CHECK(check_manifest(h.dir / "dir.deps", 100, 7, &why) == ManifestState::stale);
  CHECK(why == "its dependency manifest " + (h.dir / "dir.deps").string() + " cannot be read");
  fs::create_symlink("loop.deps", h.dir / "loop.deps");  // there, but no stat(2) gets through it
  why.clear();
  CHECK(check_manifest(h.dir / "loop.deps", 100, 7, &why) == ManifestState::stale);
  CHECK(why == "its dependency manifest " + (h.dir / "loop.deps").string() + " cannot be read");
  ops_test::write_text(h.dir / "bad.deps", "accel-jit-deps 1 100\n");
  CHECK(check_manifest(h.dir / "bad.deps", 100, 7, &why) == ManifestState::stale);
  CHECK(why == "its dependency manifest " + (h.dir / "bad.deps").string() + " is malformed");
  why.clear();
  CHECK(h.check(why) == ManifestState::fresh);
  CHECK(why.empty());
  CHECK(check_manifest(h.manifest, 101, 7, &why) == ManifestState::stale);
  CHECK(why == "its dependency manifest " + h.manifest.string() + " belongs to another build");
  why.clear();
  CHECK(check_manifest(h.manifest, 100, 8, &why) == ManifestState::stale);
  CHECK(why == "its dependency manifest " + h.manifest.string() + " belongs to another build");
  CHECK(check_manifest(h.manifest, 100, 7) == ManifestState::fresh);  // no reason asked for
}

TEST_CASE("jit manifest: check — a touched file is fresh; other bytes are stale however little else changed") {
  const std::int64_t recorded = 1600000000000000500LL;
  std::string why;
  SUBCASE("touched: a new mtime, the same bytes") {
    const RecordedHeader h;
    set_mtime_ns(h.header, recorded + 3000000000LL);
    CHECK(h.check(why) == ManifestState::fresh);
    CHECK(why.empty());
  }
  SUBCASE("the same size, other bytes, a new mtime") {
    const RecordedHeader h;
    ops_test::write_text(h.header, "#define DEP_VALUE 7\n");
    set_mtime_ns(h.header, recorded + 1000000000LL);
    CHECK(h.check(why) == ManifestState::stale);
    CHECK(why == "the file " + h.header.string() + " it was built from has changed");
  }
  SUBCASE("the same size, other bytes, the mtime one nanosecond on") {
    const RecordedHeader h;
    ops_test::write_text(h.header, "#define DEP_VALUE 7\n");
    set_mtime_ns(h.header, recorded + 1);
    if (mtime_now_ns(h.header) == recorded + 1) {  // a file system that keeps nanoseconds
      CHECK(h.check(why) == ManifestState::stale);
      CHECK(why == "the file " + h.header.string() + " it was built from has changed");
    }
  }
  SUBCASE("another size, the mtime put back exactly") {
    const RecordedHeader h;
    ops_test::write_text(h.header, "#define DEP_VALUE 77\n");
    set_mtime_ns(h.header, recorded);
    REQUIRE(mtime_now_ns(h.header) == recorded);
    CHECK(h.check(why) == ManifestState::stale);
    CHECK(why == "the file " + h.header.string() + " it was built from has changed");
  }
  SUBCASE("the same size and mtime, other bytes: not seen (as make and ninja)") {
    const RecordedHeader h;
    ops_test::write_text(h.header, "#define DEP_VALUE 7\n");
    set_mtime_ns(h.header, recorded);
    CHECK(h.check(why) == ManifestState::fresh);
  }
  SUBCASE("gone") {
    const RecordedHeader h;
    fs::remove(h.header);
    CHECK(h.check(why) == ManifestState::stale);
    CHECK(why == "the file " + h.header.string() + " it was built from is gone");
  }
  SUBCASE("no longer readable (a directory in its place)") {
    const RecordedHeader h;
    fs::remove(h.header);
    fs::create_directory(h.header);
    CHECK(h.check(why) == ManifestState::stale);
    CHECK(why == "the file " + h.header.string() + " it was built from cannot be read");
  }
}

TEST_CASE("jit deps: the depfile parser takes Make's escapes, continuations and several rules") {
  using accel::ops::detail::parse_depfile;
  std::vector<std::string> deps;
  // g++ -MD: target, escaped spaces, "$$", a continuation, a '#' escape, a tab.
  CHECK(parse_depfile("/c/out\\ dir/x.so.tmp.1.0: /k/tiny.cpp /k/my\\ dir/a\\ b.h \\\n"
                      " /usr/include/c$$d.h\t/k/\\#hash.h \\\n  /k/last.h\n",
                      deps));
  CHECK(deps == std::vector<std::string>{"/k/tiny.cpp", "/k/my dir/a b.h", "/usr/include/c$d.h", "/k/#hash.h",
                                         "/k/last.h"});
  // CRLF line ends; a backslash not before a space or a line end is part of the name; a colon inside a
  // prerequisite is kept; -MP's empty phony rules add nothing; a second rule (gcc appending) adds its own.
  CHECK(parse_depfile("a.o: x\\y.h \\\r\n k:v.h\r\nx\\y.h:\r\n\r\nb.o: b.cpp x\\y.h\n", deps));
  CHECK(deps == std::vector<std::string>{"x\\y.h", "k:v.h", "b.cpp"});
  // A backslash before a space that is itself escaped: "\\ " is a backslash then a separator (GNU make).
  CHECK(parse_depfile("t: a\\\\ b\n", deps));
  CHECK(deps == std::vector<std::string>{"a\\", "b"});
  // What g++ 12 wrote for the files a\#b.h, c\\ d.h (two backslashes, then a space) and e#f.h, built
  // into o:ut.o: the '#' after a backslash escaped with one more; 2n+1 backslashes before a space.
  CHECK(parse_depfile("o:ut.o: t.c a\\\\#b.h c\\\\\\\\\\ d.h e\\#f.h\n", deps));
  CHECK(deps == std::vector<std::string>{"t.c", "a\\#b.h", "c\\\\ d.h", "e#f.h"});
  // A continuation joins without a blank of its own; a backslash ending the text continues into nothing;
  // backslashes not before a blank or '#' are kept, however many; a name of one escaped space is a name.
  CHECK(parse_depfile("t: a.h\\\nb.h c\\\\d.h \\ \n", deps));
  CHECK(deps == std::vector<std::string>{"a.h", "b.h", "c\\\\d.h", " "});
  CHECK(parse_depfile("t: a.h \\", deps));
  CHECK(deps == std::vector<std::string>{"a.h"});
  // The target ends at the first ':' before a blank or the line's end: a ':' inside the target (a cache
  // directory may hold one) and a name ending in ':' after it stay where they are; -MP's "name:" rules
  // end at the line's end.
  CHECK(parse_depfile("/c/a:b/x.so: /k/tiny.cpp /k/odd: /k/last.h\n/k/last.h:\n", deps));
  CHECK(deps == std::vector<std::string>{"/k/tiny.cpp", "/k/odd:", "/k/last.h"});
  // No rule at all, or a rule with no target, is malformed; so is a line without a rule after good ones,
  // and then nothing of the good ones is kept.
  CHECK_FALSE(parse_depfile("just words\n", deps));
  CHECK_FALSE(parse_depfile(": a.h\n", deps));
  CHECK(parse_depfile("", deps) == false);
  deps = {"stale"};
  CHECK_FALSE(parse_depfile("a.o: a.h\ngarbage\n", deps));
  CHECK(deps.empty());
  deps = {"stale"};
  CHECK_FALSE(parse_depfile("a.o: a.h\n: b.h\n", deps));
  CHECK(deps.empty());
}
