// What checkpoints take on disk (examples/engine/checkpoint_space.hpp): the bytes one needs against
// what a save writes, the file system's free bytes, the count of a run's saves, the start-up error and
// warning, and --keep-last's pruning (which steps go, which always stay, a removal cut short).
#include "checkpoint_space.hpp"
#include "checkpoint_test_support.hpp"
#include "engine_test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

using engine_test::temp_dir;

// Names apart from test_checkpoint_leftovers.cpp's: a unity build compiles the two as one file.
const engine::ModelShape model_shape{2, 2, 32, 16, 1};
const engine::ParamLayout model(model_shape, 40);

fs::path save_step(const fs::path& ck, std::int64_t step) {
  auto st = engine_test::uniform_state(model, step, static_cast<float>(step));
  st.values["vocabulary"] = std::string(200, 'a');  // a manifest of some size
  return engine::write_checkpoint(ck, model, st, st.params);
}

std::uintmax_t bytes_under(const fs::path& dir) {
  std::uintmax_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

/// Names in `dir`, sorted.
std::vector<std::string> names(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("engine checkpoints: the bytes a checkpoint needs bound what a save writes, within a block a file and the manifest's bound") {
  const fs::path ck = temp_dir("space-bytes");
  const fs::path dir = save_step(ck, 1);
  const std::uintmax_t written = bytes_under(dir);
  const std::uint64_t tensors = static_cast<std::uint64_t>(model.total) * 4 * 4;  // params.f32 and the shard's three
  CHECK(written > tensors);
  CHECK(written < tensors + 4096);  // the manifest of this small model
  const std::uint64_t need = engine::checkpoint_bytes(model, 1, model.total);
  CHECK(need >= written);
  CHECK(need == tensors + 4 * 4096 + (1u << 20) + model.views.size() * 256);
  // Several ranks: the consolidated weights once, each rank's padded shard.
  const std::int64_t shard = (model.total + 2) / 3;
  CHECK(engine::checkpoint_bytes(model, 3, shard) ==
        static_cast<std::uint64_t>(model.total) * 4 + 3 * static_cast<std::uint64_t>(shard) * 12 + 8 * 4096 + (1u << 20) +
            model.views.size() * 256);
  fs::remove_all(ck);
}

TEST_CASE("engine checkpoints: the free bytes are statvfs's, of the nearest existing directory; root's include the reserve") {
  const fs::path dir = temp_dir("space-free");
  struct statvfs st {};
  REQUIRE(::statvfs(dir.c_str(), &st) == 0);
  const auto free = engine::free_bytes(dir);
  const auto missing = engine::free_bytes(dir / "not" / "yet");  // --save made at the first save
  if (st.f_blocks == 0) {
    CHECK(!free);  // a file system that reports no sizes: not checked
  } else {
    REQUIRE(free);
    REQUIRE(missing);
    const std::uint64_t blocks = ::geteuid() == 0 ? st.f_bfree : st.f_bavail;
    const std::uint64_t expected = blocks * st.f_frsize;
    // Other processes write meanwhile: within 64 MiB of the figure read just before.
    CHECK(*free + (64u << 20) >= expected);
    CHECK(*free <= expected + (64u << 20));
    CHECK(*missing + (64u << 20) >= *free);
    CHECK(*missing <= *free + (64u << 20));
  }
  fs::remove_all(dir);
  // /proc reports no blocks, like some FUSE and network file systems: not checked, there or below it.
  CHECK(engine::free_bytes("/proc") == std::nullopt);
  CHECK(engine::free_bytes("/proc/accel-not-there/ck") == std::nullopt);
}

TEST_CASE("engine checkpoints: the complete steps of a --save that does not exist yet: none, and no error") {
  std::error_code ec = std::make_error_code(std::errc::io_error);
  CHECK(engine::detail::complete_steps(temp_dir("space-none") / "not-made", ec).empty());
  CHECK_FALSE(ec);
  CHECK(engine::checkpoints_bytes_in(temp_dir("space-none") / "not-made") == 0);
}

TEST_CASE("engine checkpoints: a run's saves are one every --save-every steps after its first step and before its last, and one at the end") {
  CHECK(engine::checkpoints_written(0, 8, 0) == 1);  // only at the end
  CHECK(engine::checkpoints_written(0, 8, 2) == 4);  // 2, 4, 6, then 8 at the end
  CHECK(engine::checkpoints_written(0, 6, 3) == 2);  // 3, then 6 at the end
  CHECK(engine::checkpoints_written(0, 8, 3) == 3);  // 3, 6, 8
  CHECK(engine::checkpoints_written(3, 8, 2) == 3);  // resumed at 3: 4, 6, 8
  CHECK(engine::checkpoints_written(4, 8, 2) == 2);  // resumed at 4: 6, 8
  CHECK(engine::checkpoints_written(0, 8, 100) == 1);
  CHECK(engine::checkpoints_written(8, 8, 2) == 1);  // nothing left to train: the save at the end
}

TEST_CASE("engine checkpoints: --save refused where one checkpoint does not fit; a warning where the run's checkpoints would not") {
  const std::uint64_t mib = 1u << 20;
  CHECK(engine::save_space_error("ck", 13 * mib, std::nullopt) == "");  // the file system does not say
  CHECK(engine::save_space_error("ck", 13 * mib, 13 * mib) == "");
  CHECK(engine::save_space_error("ck", 13 * mib, 13 * mib - 1) ==
        "--save ck: a checkpoint of this model takes 13.0 MiB and the file system there has 13.0 MiB free");
  CHECK(engine::save_space_error("/x", 13 * mib, 600 * 1024) ==
        "--save /x: a checkpoint of this model takes 13.0 MiB and the file system there has 600.0 KiB free");

  CHECK(engine::save_space_warning("ck", 13 * mib, 4, 0, std::nullopt) == "");
  CHECK(engine::save_space_warning("ck", 13 * mib, 1, 0, 14 * mib) == "");
  CHECK(engine::save_space_warning("ck", 13 * mib, 4, 0, 52 * mib) == "");
  CHECK(engine::save_space_warning("ck", 13 * mib, 4, 0, 52 * mib - 1) ==
        "--save ck: this run writes 4 checkpoints of 13.0 MiB (52.0 MiB) and the file system there has 52.0 MiB free; "
        "--keep-last N keeps only the newest N");
  // --keep-last N holds N + 1 at once; the checkpoints already there may go to make room.
  CHECK(engine::save_space_warning("ck", 13 * mib, 4, 1, 26 * mib) == "");
  CHECK(engine::save_space_warning("ck", 13 * mib, 4, 1, 20 * mib) ==
        "--save ck: --keep-last 1 holds up to 2 checkpoints of 13.0 MiB at once (26.0 MiB: a save writes the new one "
        "before it removes the oldest) and the file system there has 20.0 MiB free");
  CHECK(engine::save_space_warning("ck", 13 * mib, 4, 1, 20 * mib, 6 * mib) == "");
  CHECK(engine::save_space_warning("ck", 13 * mib, 4, 1, 10 * mib, 13 * mib) ==
        "--save ck: --keep-last 1 holds up to 2 checkpoints of 13.0 MiB at once (26.0 MiB: a save writes the new one "
        "before it removes the oldest) and the file system there has 10.0 MiB free (and 13.0 MiB in checkpoints already there)");
  CHECK(engine::save_space_warning("ck", 13 * mib, 1, 3, 14 * mib) == "");  // one save: one at a time
  CHECK(engine::save_space_warning("ck", 13 * mib, 1, 0, 5 * mib) == "");  // not even one: save_space_error says so
  CHECK(engine::save_space_warning("ck", 13 * mib, 4, 0, 30 * mib, 100 * mib) != "");  // without --keep-last none go
}

TEST_CASE("engine checkpoints: a run started afresh in a --save holding checkpoints is warned; the newest is by step number") {
  CHECK(engine::fresh_run_warning("ck", std::nullopt) == "");
  CHECK(engine::fresh_run_warning("ck", 2000) ==
        "--save ck holds checkpoints up to step 2000 and this run starts afresh (no --resume): its checkpoints go beside "
        "them, replacing any of the same step, and latest will name this run's; --resume latest continues from step 2000");
  const fs::path ck = temp_dir("space-newest");
  CHECK(engine::newest_complete_checkpoint(ck).empty());
  save_step(ck, 99999999);
  save_step(ck, 100000000);  // a ninth digit: after step_99999999 by number, before it by name
  fs::create_directory(ck / "step_200000000");  // no manifest: not complete
  CHECK(engine::newest_complete_checkpoint(ck) == ck / "step_100000000");
  CHECK(engine::detail::step_of_dir_name("step_00000042") == 42);
  CHECK(!engine::detail::step_of_dir_name("step_"));
  CHECK(!engine::detail::step_of_dir_name("step_12a"));
  CHECK(!engine::detail::step_of_dir_name("step_-1"));
  CHECK(!engine::detail::step_of_dir_name("step_99999999999999999999"));  // beyond int64
  CHECK(!engine::detail::step_of_dir_name(".tmp.step_00000001.1.2"));
  fs::remove_all(ck);
}

TEST_CASE("engine checkpoints: a save out of space says what a checkpoint takes, what is free and what would make room") {
  const std::uint64_t mib = 1u << 20;
  CHECK(engine::out_of_space_hint(13 * mib, 5 * mib, 26 * mib, 0) ==
        " (a checkpoint takes 13.0 MiB; the file system has 5.0 MiB free, the checkpoints already there take 26.0 MiB; "
        "--keep-last N keeps only the newest N)");
  CHECK(engine::out_of_space_hint(13 * mib, std::nullopt, 0, 2) == " (a checkpoint takes 13.0 MiB)");
  CHECK(engine::out_of_space_hint(13 * mib, 0, 0, 0) ==
        " (a checkpoint takes 13.0 MiB; the file system has 0 B free; --keep-last N keeps only the newest N)");
}

TEST_CASE("engine checkpoints: --keep-last removes the complete steps beyond the newest N, never the one just written or latest's") {
  const fs::path ck = temp_dir("space-keep");
  for (int s = 1; s <= 5; ++s) save_step(ck, s);
  std::ofstream(ck / "notes.txt") << "mine";          // not the engine's: never touched
  fs::create_directory(ck / "step_00000009");          // no manifest: not a complete checkpoint
  fs::create_directory(ck / "step_x");                 // not a step's name
  fs::create_directory_symlink("step_00000001", ck / "step_00000010");  // a link: not followed
  const std::uintmax_t step1 = bytes_under(ck / "step_00000001");

  auto report = engine::prune_checkpoints(ck, 0, ck / "step_00000005");  // 0: keep all
  CHECK(report.removed.empty());
  report = engine::prune_checkpoints(ck, 2, ck / "step_00000005");
  CHECK(report.warnings.empty());
  REQUIRE(report.removed.size() == 3);
  char size[48];
  std::snprintf(size, sizeof size, "step_00000001 (%.1f KiB)", static_cast<double>(step1) / 1024);
  CHECK(report.removed[2] == size);  // newest first
  CHECK(report.removed[0].rfind("step_00000003 (", 0) == 0);
  CHECK(names(ck) == std::vector<std::string>{".lock", "latest", "notes.txt", "step_00000004", "step_00000005",
                                              "step_00000009", "step_00000010", "step_x"});
  CHECK(fs::read_symlink(ck / "latest") == "step_00000005");
  CHECK(fs::is_symlink(fs::symlink_status(ck / "step_00000010")));  // left dangling, itself untouched

  // A resumed run that went back to step 2: its save stays (just written, latest) beside the newest.
  save_step(ck, 2);
  report = engine::prune_checkpoints(ck, 1, ck / "step_00000002");
  REQUIRE(report.removed.size() == 1);
  CHECK(report.removed[0].rfind("step_00000004 (", 0) == 0);
  CHECK(fs::exists(ck / "step_00000005" / "manifest.txt"));
  CHECK(fs::exists(ck / "step_00000002" / "manifest.txt"));
  CHECK(fs::read_symlink(ck / "latest") == "step_00000002");
  // latest is kept even when the caller names another directory.
  report = engine::prune_checkpoints(ck, 1, ck / "step_00000005");
  CHECK(report.removed.empty());
  // ... and the one just written even where latest is gone (a link a user removed).
  fs::remove(ck / "latest");
  report = engine::prune_checkpoints(ck, 1, ck / "step_00000002");
  CHECK(report.removed.empty());
  CHECK(report.warnings.empty());
  CHECK(fs::exists(ck / "step_00000002" / "manifest.txt"));
  fs::remove_all(ck);
}

TEST_CASE("engine checkpoints: a step --keep-last was removing when it stopped is removed by the next save, which says so") {
  const fs::path ck = temp_dir("space-pruned-leftover");
  save_step(ck, 1);
  // What a prune leaves when killed between its rename and the end of its removal.
  fs::rename(ck / "step_00000001", ck / ".pruned.step_00000001.123.0000abcd");
  const std::uintmax_t bytes = bytes_under(ck / ".pruned.step_00000001.123.0000abcd");
  char size[32];
  std::snprintf(size, sizeof size, "%.1f KiB", static_cast<double>(bytes) / 1024);
  const std::string log = engine_test::stderr_of(ck.parent_path() / (ck.filename().string() + ".stderr"), [&] { save_step(ck, 2); });
  CHECK(log == "checkpoint: " + ck.string() + ": removed the leftovers of interrupted saves: .pruned.step_00000001.123.0000abcd (" +
                   size + ")\n");
  CHECK(names(ck) == std::vector<std::string>{".lock", "latest", "step_00000002"});
  fs::remove_all(ck);
}
