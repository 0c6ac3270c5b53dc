// The leftovers of interrupted checkpoint saves (examples/engine/checkpoint_leftovers.hpp): a crashed
// writer's temporary directory is removed by the next save, and so is `latest`'s replacement link a
// writer killed before renaming it leaves; a live writer's directory is not, nor one from an
// engine without lock files, nor an aside directory that may be the only copy of its step; nothing is
// followed out of the save directory. Each save's stderr is read back: what it says it removed.
#include "checkpoint.hpp"
#include "checkpoint_test_support.hpp"
#include "engine_test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

using engine_test::temp_dir;

const engine::ModelShape shape{1, 1, 16, 8, 1};
const engine::ParamLayout layout(shape, 8);

/// One rank's state of `step`, every value `v`.
engine::CheckpointState state(std::int64_t step, float v) { return engine_test::uniform_state(layout, step, v); }

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

/// Names in a directory that start with `prefix`, sorted.
std::vector<std::string> entries_with(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// write_checkpoint(save, state(step, v)) with its stderr captured: returns what it wrote there.
std::string save_logged(const fs::path& save, std::int64_t step, float v) {
  std::string failure;
  const std::string text = engine_test::stderr_of(save.parent_path() / (save.filename().string() + ".stderr"), [&] {
    try {
      const auto st = state(step, v);
      (void)engine::write_checkpoint(save, layout, st, st.params);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  REQUIRE(failure == "");  // a save never fails over its leftovers
  return text;
}

/// The step's checkpoint holds `v` everywhere (checksums verified) and is `latest`.
void check_checkpoint(const fs::path& save, std::int64_t step, float v) {
  const fs::path dir = save / engine::step_dir_name(step);
  CHECK(fs::read_symlink(save / "latest") == dir.filename());
  auto st = engine::read_checkpoint_manifest(dir);
  CHECK(st.step == step);
  engine::read_checkpoint_tensors(dir, layout.total, st, 0, layout.total);
  REQUIRE(st.params.size() == static_cast<std::size_t>(layout.total));
  CHECK(std::all_of(st.params.begin(), st.params.end(), [&](float x) { return x == v; }));
  CHECK(std::all_of(st.exp_avg_sq.begin(), st.exp_avg_sq.end(), [&](float x) { return x == v; }));
}

std::uintmax_t tree_bytes(const fs::path& dir) {
  std::uintmax_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

/// A writer of `step` (every value `v`) that dies, as a killed process does (no clean-up; its locks
/// dropped by the kernel), at the first rename where `rename` exits: run in a child process.
void crashed_writer(const fs::path& save, std::int64_t step, float v, engine::detail::RenameFn rename) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    engine::detail::rename_fn() = rename;
    try {
      const auto st = state(step, v);
      (void)engine::write_checkpoint(save, layout, st, st.params);
    } catch (...) {
    }
    ::_exit(1);  // published: not the crash under test
  }
  int status = -1;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}

/// Another process that holds flock(LOCK_EX) on `lock` (as a live writer does) until release().
struct LockHolder {
  explicit LockHolder(const fs::path& lock) {
    int ready[2], go[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(go) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // only async-signal-safe calls in the child
      ::close(ready[0]);
      ::close(go[1]);  // else its own copy would keep the read below from seeing the parent close its end
      const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
      const char ok = fd >= 0 && ::flock(fd, LOCK_EX) == 0 ? 'y' : 'n';
      (void)!::write(ready[1], &ok, 1);
      char c = 0;
      (void)!::read(go[0], &c, 1);  // returns when the parent writes or closes its end
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(go[0]);
    release_fd = go[1];
    char ok = 0;
    REQUIRE(::read(ready[0], &ok, 1) == 1);
    ::close(ready[0]);
    REQUIRE(ok == 'y');
  }
  void release() {
    if (pid <= 0) return;
    ::close(release_fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
  }
  ~LockHolder() { release(); }
  pid_t pid = -1;
  int release_fd = -1;
};

}  // namespace

TEST_CASE("engine checkpoints: a crashed save's temporary directory is removed by the next save, which says so and succeeds") {
  const fs::path ck = temp_dir("leftover-crashed");
  // The crashed writer: a process that writes a whole checkpoint of step 3 and dies where a kill during
  // its publication would stop it (the publishing rename), never cleaning up.
  crashed_writer(ck, 3, 1.0f, [](const char*, const char*, unsigned) -> int { ::_exit(0); });
  std::string left;
  for (const auto& n : entries_with(ck, ".tmp.step_00000003.")) {
    if (fs::is_directory(ck / n)) left = n;
  }
  REQUIRE(left != "");
  REQUIRE(fs::exists(ck / left / "manifest.txt"));  // a whole checkpoint's worth of disk
  const std::uintmax_t bytes = tree_bytes(ck / left);
  REQUIRE(bytes >= 1024);
  REQUIRE(bytes < 1024 * 1024);
  char size[32];
  std::snprintf(size, sizeof size, "%.1f KiB", static_cast<double>(bytes) / 1024);

  const std::string log = save_logged(ck, 4, 2.0f);
  CHECK(log == "checkpoint: " + ck.string() + ": removed the leftovers of interrupted saves: " + left + " (" + size + ")\n");
  CHECK(entries_with(ck, ".tmp.").empty());  // the directory and its lock file
  CHECK(!fs::exists(ck / "step_00000003"));
  check_checkpoint(ck, 4, 2.0f);
  fs::remove_all(ck);
}

TEST_CASE("engine checkpoints: a save killed between making latest's new link and renaming it leaves the link; the next save removes it") {
  const fs::path ck = temp_dir("leftover-latest");
  (void)save_logged(ck, 2, 2.0f);
  // The crashed writer publishes step 3 and dies at the rename that would point `latest` at it.
  crashed_writer(ck, 3, 3.0f, [](const char* from, const char* to, unsigned flags) -> int {
    if (fs::path(from).filename().string().rfind(".latest.", 0) == 0) ::_exit(0);
    return engine::detail::system_rename(from, to, flags);
  });
  const std::vector<std::string> links = entries_with(ck, ".latest.");
  REQUIRE(links.size() == 1);
  REQUIRE(fs::is_symlink(ck / links[0]));
  CHECK(fs::read_symlink(ck / links[0]) == "step_00000003");
  check_checkpoint(ck, 2, 2.0f);  // `latest` still names the step before
  CHECK(fs::exists(ck / "step_00000003" / "manifest.txt"));
  // Not the engine's: a directory of that name is kept.
  fs::create_directories(ck / ".latest.keep");

  CHECK(save_logged(ck, 4, 4.0f) == "checkpoint: " + ck.string() + ": removed the leftovers of interrupted saves: " +
                                        links[0] + " (a link to step_00000003)\n");
  CHECK(entries_with(ck, ".latest.") == std::vector<std::string>{".latest.keep"});
  CHECK(fs::exists(ck / "step_00000003" / "manifest.txt"));  // the link went, not what it named
  check_checkpoint(ck, 4, 4.0f);
  fs::remove_all(ck);
}

TEST_CASE("engine checkpoints: a live writer's temporary directory is left alone; once it is gone, the next save removes it") {
  const fs::path ck = temp_dir("leftover-live");
  const std::string name = ".tmp.step_00000002.12345.0badf00d";
  fs::create_directories(ck / name);
  write_text(ck / name / "zero_rank_00000.f32", "a shard being written");
  LockHolder writer(ck / (name + ".lock"));

  CHECK(save_logged(ck, 3, 1.0f) == "");  // nothing removed, nothing to say
  CHECK(file_bytes(ck / name / "zero_rank_00000.f32") == "a shard being written");
  CHECK(fs::exists(ck / (name + ".lock")));
  check_checkpoint(ck, 3, 1.0f);

  writer.release();  // the writer dies: the kernel drops its lock
  CHECK(save_logged(ck, 4, 2.0f) ==
        "checkpoint: " + ck.string() + ": removed the leftovers of interrupted saves: " + name + " (21 B)\n");
  CHECK(entries_with(ck, ".tmp.").empty());
  check_checkpoint(ck, 4, 2.0f);
  fs::remove_all(ck);
}

TEST_CASE("engine checkpoints: a temporary directory without a lock file (an older engine's) is kept, and named once") {
  const fs::path ck = temp_dir("leftover-legacy");
  const std::string name = ".tmp.step_00000002.777.00c0ffee";
  fs::create_directories(ck / name);
  write_text(ck / name / "params.f32", "written by an older engine");

  CHECK(save_logged(ck, 3, 1.0f) == "checkpoint: " + ck.string() + ": kept " + name +
                                        " (no lock file: an older engine's, whose writer may be at work; delete it once no "
                                        "job writes to " + ck.string() + ")\n");
  CHECK(save_logged(ck, 4, 2.0f) == "");  // said once per process, not at every save
  CHECK(file_bytes(ck / name / "params.f32") == "written by an older engine");
  CHECK(entries_with(ck, ".tmp.") == std::vector<std::string>{name});
  check_checkpoint(ck, 4, 2.0f);
  fs::remove_all(ck);
}

TEST_CASE("engine checkpoints: an aside directory goes only once its step is complete and its writer gone; links are not followed") {
  const fs::path ck = temp_dir("leftover-aside"), outside = temp_dir("leftover-outside");
  (void)save_logged(ck, 5, 5.0f);  // step 5 complete under its own name
  // A crash after the step was published, before its writer deleted the previous copy set aside: garbage.
  const std::string done = ".old.step_00000005.1.00000001";
  fs::create_directories(ck / done);
  write_text(ck / done / "manifest.txt", "the replaced copy");
  write_text(ck / (".tmp.step_00000005.1.00000001.lock"), "");
  // A crash with the step set aside and not yet replaced (or a failed publication that could not put it
  // back): the only copy of step 6, whoever wrote it.
  const std::string only = ".old.step_00000006.2.00000002";
  fs::create_directories(ck / only);
  write_text(ck / only / "manifest.txt", "the only copy");
  // A live writer's aside of step 5: its writer deletes it.
  const std::string live = ".old.step_00000005.3.00000003";
  fs::create_directories(ck / live);
  write_text(ck / live / "manifest.txt", "a live writer's");
  LockHolder writer(ck / ".tmp.step_00000005.3.00000003.lock");
  // A link named as a dead writer's temporary directory, to a directory outside the save directory.
  write_text(outside / "precious", "not the engine's");
  fs::create_directory_symlink(outside, ck / ".tmp.step_00000007.4.00000004");
  write_text(ck / ".tmp.step_00000007.4.00000004.lock", "");

  CHECK(save_logged(ck, 8, 8.0f) == "checkpoint: " + ck.string() + ": removed the leftovers of interrupted saves: " + done +
                                        " (17 B); kept " + only +
                                        " (step_00000006 is missing: it may be the only copy of that step)\n");
  CHECK(!fs::exists(ck / done));
  CHECK(file_bytes(ck / only / "manifest.txt") == "the only copy");
  CHECK(file_bytes(ck / live / "manifest.txt") == "a live writer's");
  CHECK(fs::exists(ck / ".tmp.step_00000005.3.00000003.lock"));
  CHECK(fs::is_symlink(ck / ".tmp.step_00000007.4.00000004"));
  CHECK(file_bytes(outside / "precious") == "not the engine's");
  // The link's lock file stays with it (removed with the name it guards).
  CHECK(entries_with(ck, ".tmp.") == std::vector<std::string>{".tmp.step_00000005.3.00000003.lock", ".tmp.step_00000007.4.00000004",
                                                              ".tmp.step_00000007.4.00000004.lock"});
  check_checkpoint(ck, 8, 8.0f);
  CHECK(file_bytes(ck / "step_00000005" / "manifest.txt").rfind("format accel-engine-checkpoint/2\n", 0) == 0);
  writer.release();
  fs::remove_all(ck);
  fs::remove_all(outside);
}

TEST_CASE("engine checkpoints: the writer's lock file is new, and outlives its directory only where that could not be removed") {
  const fs::path ck = temp_dir("leftover-writer-lock");
  const fs::path dir = ck / ".tmp.step_00000001.9.00000009";
  const fs::path lock = engine::detail::writer_lock_path(dir);
  CHECK(lock == ck / ".tmp.step_00000001.9.00000009.lock");
  {
    engine::detail::WriterLock w;
    w.acquire(dir);
    CHECK(fs::is_regular_file(lock));
    fs::create_directory(dir);
    // Another writer of the same name (a name nobody else uses) is refused, not let in beside it.
    engine::detail::WriterLock other;
    CHECK_THROWS_WITH_AS(other.acquire(dir), ("checkpoint: cannot create " + lock.string() + ": File exists").c_str(),
                         std::runtime_error);
    w.release();  // the directory is still there: its lock file stays for the next save's scan
    CHECK(fs::exists(lock));
  }
  fs::remove_all(dir);
  fs::remove(lock);
  {
    engine::detail::WriterLock w;
    w.acquire(dir);
    fs::create_directory(dir);
    fs::remove(dir);  // published or removed
  }  // released by the destructor: with the directory gone, the lock file goes too
  CHECK_FALSE(fs::exists(lock));
  fs::remove_all(ck);
}

TEST_CASE("engine checkpoints: sizes in B, KiB, MiB, GiB, TiB; tree_bytes counts regular files, not links") {
  using engine::detail::bytes_text;
  CHECK(bytes_text(0) == "0 B");
  CHECK(bytes_text(1023) == "1023 B");
  CHECK(bytes_text(1024) == "1.0 KiB");
  CHECK(bytes_text(1536) == "1.5 KiB");
  CHECK(bytes_text(std::uintmax_t{1} << 20) == "1.0 MiB");
  CHECK(bytes_text((std::uintmax_t{1} << 20) - 1) == "1024.0 KiB");
  CHECK(bytes_text(std::uintmax_t{3} << 30) == "3.0 GiB");
  CHECK(bytes_text(std::uintmax_t{1} << 40) == "1.0 TiB");
  CHECK(bytes_text(std::uintmax_t{1} << 50) == "1024.0 TiB");  // no larger unit
  const fs::path d = temp_dir("leftover-tree-bytes"), outside = temp_dir("leftover-tree-outside");
  fs::create_directories(d / "sub");
  write_text(d / "a", "12345");
  write_text(d / "sub" / "b", "123");
  write_text(outside / "big", std::string(4096, 'x'));
  fs::create_symlink(outside / "big", d / "link");           // a link to a file: not counted
  fs::create_directory_symlink(outside, d / "dir-link");     // nor followed
  CHECK(engine::detail::tree_bytes(d) == 8);
  CHECK(engine::detail::tree_bytes(d / "missing") == 0);
  fs::remove_all(d);
  fs::remove_all(outside);
}

TEST_CASE("engine checkpoints: the scan removes only the engine's own leftovers — names, kinds and complete steps") {
  const fs::path ck = temp_dir("leftover-kinds");
  (void)save_logged(ck, 1, 1.0f);
  // Two steps --keep-last was removing when it stopped: both go, named in one line.
  fs::create_directories(ck / ".pruned.step_00000002.5.00000005");
  write_text(ck / ".pruned.step_00000002.5.00000005" / "params.f32", "1234");
  fs::create_directories(ck / ".pruned.step_00000003.6.00000006");
  // Names the engine uses for directories and links, here of other kinds: not the engine's, kept.
  write_text(ck / ".pruned.step_00000004.7.00000007", "a file");
  fs::create_directory_symlink(ck / "step_00000001", ck / ".pruned.step_00000005.8.00000008");
  write_text(ck / ".tmp.step_.lock", "");                          // too short to guard a directory
  fs::create_directories(ck / ".tmp.step_00000006.9.00000009.lock");  // a directory, not a lock file
  // Aside copies of steps that are not complete under their own names: kept.
  fs::create_directories(ck / "step_00000007");                       // no manifest
  fs::create_directories(ck / ".old.step_00000007.1.00000001");
  fs::create_directory_symlink(ck / "step_00000001", ck / "step_00000008");  // a link, not the step's directory
  fs::create_directories(ck / ".old.step_00000008.1.00000001");

  CHECK(save_logged(ck, 9, 9.0f) == "checkpoint: " + ck.string() +
                                        ": removed the leftovers of interrupted saves: .pruned.step_00000002.5.00000005 (4 B), "
                                        ".pruned.step_00000003.6.00000006 (0 B); kept .old.step_00000007.1.00000001 "
                                        "(step_00000007 is missing: it may be the only copy of that step), "
                                        ".old.step_00000008.1.00000001 (step_00000008 is missing: it may be the only copy of "
                                        "that step)\n");
  CHECK(entries_with(ck, ".pruned.") ==
        std::vector<std::string>{".pruned.step_00000004.7.00000007", ".pruned.step_00000005.8.00000008"});
  CHECK(fs::is_symlink(ck / ".pruned.step_00000005.8.00000008"));
  CHECK(fs::is_regular_file(ck / ".tmp.step_.lock"));
  CHECK(fs::is_directory(ck / ".tmp.step_00000006.9.00000009.lock"));
  CHECK(fs::exists(ck / ".old.step_00000007.1.00000001"));
  CHECK(fs::exists(ck / ".old.step_00000008.1.00000001"));
  check_checkpoint(ck, 9, 9.0f);
  fs::remove_all(ck);
}

TEST_CASE("engine checkpoints: a --save that cannot be listed is a warning, never a failure") {
  const fs::path d = temp_dir("leftover-unlisted");
  write_text(d / "a-file", "not a directory");
  const std::string log = engine_test::stderr_of(d / "log", [&] { engine::detail::remove_leftovers(d / "a-file"); });
  CHECK(log == "checkpoint: warning: cannot list " + (d / "a-file").string() +
                   " for leftovers of interrupted saves: Not a directory\n");
  fs::remove_all(d);
}
