// The JIT cache directory rule (accel/ops/cache_dir.hpp) as data: check_cache_dir's verdict and its
// whole message for each owner and mode (a stat made up, so every combination is reachable without a
// second account), and make_cache_dir's creation and errors. test_jit_reliability.cpp covers the same
// rule through JitCache, with a second uid where it runs as root.
#include "ops_test_support.hpp"

#include <accel/ops/cache_dir.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using accel::ops::UnsafeCacheDirError;
using accel::ops::detail::check_cache_dir;

struct stat made_up_dir(uid_t owner, unsigned mode) {
  struct stat st {};
  st.st_mode = S_IFDIR | mode;
  st.st_uid = owner;
  return st;
}

unsigned permissions_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return static_cast<unsigned>(st.st_mode) & 07777u;
}

/// A uid no account has (so it is printed without a name).
constexpr uid_t nameless_uid = 3999123;

}  // namespace

TEST_CASE("jit cache dir: owned by this user and writable by nobody else passes, whatever else its mode says") {
  const uid_t me = ::geteuid();
  for (const unsigned mode : {0700u, 0755u, 0555u, 01700u, 02711u, 0000u}) {
    CAPTURE(mode);
    CHECK_NOTHROW(check_cache_dir("/c", made_up_dir(me, mode)));
  }
}

TEST_CASE("jit cache dir: each reason to refuse, said in full") {
  const uid_t me = ::geteuid();
  const std::string me_text = accel::ops::detail::uid_text(me);
  const std::string advice =
      ". Another account could plant a shared object there that load() would run in this process. Use a directory "
      "of your own that only you can write (ACCEL_CACHE_DIR), or fix this one: chown " +
      std::to_string(me) + " '/c' && chmod 700 '/c'";
  struct Case {
    uid_t owner;
    unsigned mode;
    std::string why;
  };
  const Case cases[] = {
      {me, 0720u, "its mode 0720 lets its group write into it"},
      {me, 0702u, "its mode 0702 lets all other users write into it"},
      {me, 0777u, "its mode 0777 lets its group and all other users write into it"},
      {me, 04722u, "its mode 4722 lets its group and all other users write into it"},
      {nameless_uid, 0700u, "it is owned by uid 3999123, not by this process's uid " + me_text + " (mode 0700)"},
      {nameless_uid, 0770u,
       "it is owned by uid 3999123, not by this process's uid " + me_text + ", and its mode 0770 lets its group write into it"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.why);
    try {
      check_cache_dir("/c", made_up_dir(c.owner, c.mode));
      FAIL("accepted");
    } catch (const UnsafeCacheDirError& e) {
      CHECK(std::string(e.what()) == "accel jit cache: refusing to use /c: " + c.why + advice);
      CHECK(e.code() == accel::Errc::invalid_argument);
      CHECK(e.path() == "/c");
      CHECK(e.owner_uid() == c.owner);
      CHECK(e.mode() == c.mode);
    }
  }
  struct stat file = made_up_dir(me, 0600u);
  file.st_mode = S_IFREG | 0600u;
  CHECK_THROWS_WITH_AS(check_cache_dir("/c", file), "accel jit cache: /c is not a directory", UnsafeCacheDirError);
}

TEST_CASE("jit cache dir: a uid with an account is named; a mode is four octal digits, its special bits kept") {
  CHECK(accel::ops::detail::uid_text(0) == "0 (root)");
  CHECK(accel::ops::detail::uid_text(nameless_uid) == "3999123");
  CHECK(accel::ops::detail::mode_text(0755u) == "0755");
  CHECK(accel::ops::detail::mode_text(S_IFDIR | 04755u) == "4755");
  CHECK(accel::ops::detail::mode_text(07u) == "0007");
}

TEST_CASE("jit cache dir: made 0700 whatever the umask, parents only when asked; what cannot be made is said") {
  using accel::ops::detail::cache_dir_exists;
  using accel::ops::detail::make_cache_dir;
  const fs::path base = ops_test::temp_dir("cache-dir");
  CHECK_FALSE(cache_dir_exists(base / "none"));
  const mode_t old_umask = ::umask(0277);  // a umask that would leave it 0500: not even its owner could write
  make_cache_dir(base / "flat", false);
  ::umask(old_umask);
  CHECK(permissions_of(base / "flat") == 0700u);
  CHECK(cache_dir_exists(base / "flat"));
  make_cache_dir(base / "flat", false);  // already there: fine
  // Without `parents`, a missing parent is an error naming the directory; nothing is made.
  const std::string no_parent = "accel jit cache: cannot create " + (base / "a" / "b").string() + ": No such file or directory";
  CHECK_THROWS_WITH_AS(make_cache_dir(base / "a" / "b", false), no_parent.c_str(), accel::Error);
  CHECK_FALSE(fs::exists(base / "a"));
  make_cache_dir(base / "a" / "b", true);
  CHECK(permissions_of(base / "a") == 0700u);
  CHECK(permissions_of(base / "a" / "b") == 0700u);
  // A parent that exists is left as it is (directories above the root are not the cache's).
  fs::create_directory(base / "open");
  fs::permissions(base / "open", fs::perms::all);
  make_cache_dir(base / "open" / "c", true);
  CHECK(permissions_of(base / "open") == 0777u);
  // A link to a directory not made yet: said so (mkdir(2) would not follow it), the target not made.
  fs::create_directory_symlink(base / "target", base / "link");
  const std::string dangling = "accel jit cache: " + (base / "link").string() + " is a symbolic link to " +
                               (base / "target").string() +
                               ", which does not exist: create that directory (mode 0700), or remove the link";
  CHECK_THROWS_WITH_AS(make_cache_dir(base / "link", true), dangling.c_str(), accel::Error);
  CHECK_FALSE(fs::exists(base / "target"));
  fs::create_directory(base / "target", base / "flat");  // made, with the mode of one that passes
  make_cache_dir(base / "link", true);
  CHECK(cache_dir_exists(base / "link"));
  // A file where a directory should be: refused, as not a directory or as a path that cannot be stat'ed.
  ops_test::write_text(base / "file", "x");
  const std::string not_dir = "accel jit cache: " + (base / "file").string() + " is not a directory";
  CHECK_THROWS_WITH_AS(make_cache_dir(base / "file", true), not_dir.c_str(), UnsafeCacheDirError);
  const std::string no_stat = "accel jit cache: cannot stat " + (base / "file" / "d").string() + ": Not a directory";
  CHECK_THROWS_WITH_AS(make_cache_dir(base / "file" / "d", true), no_stat.c_str(), accel::Error);
}
