// The ranks' start-up agreement (examples/engine/same_run.hpp) over 3 MPI ranks (run by CTest under
// mpiexec -n 3): settings that agree pass; where they do not, every rank throws the same
// AgreedUsageError naming each differing setting with its values and the ranks holding each, in rank
// order, four settings at most and the rest counted, long values cut; the compared text decides, the
// shown one is said; a different number of settings is a different build. And --save must be one
// directory every rank sees: rank 0's probe, and what is said where rank 0 cannot write there.
#include "same_run.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using B = accel::CpuBackend;

/// A setting whose value is compared as shown.
engine::SharedSetting setting(const std::string& name, const std::string& value) { return {name, value, value}; }

std::vector<engine::SharedSetting> agreed_settings() {
  return {setting("--layers", "4"), setting("--lr", "0.002"), setting("--seed", "1337"), setting("--steps", "6"),
          setting("--dtype", "fp32"), setting("--save", "(none)")};
}

/// check_same_run's message on this rank ("" when it passed).
std::string same_run_error(const std::vector<engine::SharedSetting>& mine) {
  auto ranks = engine::Ranks<B>::world(B{});
  REQUIRE(ranks.size() == 3);
  try {
    engine::check_same_run(B{}, ranks, mine);
  } catch (const engine::AgreedUsageError& e) {
    return e.what();
  }
  return "";
}

int my_rank() { return engine::Ranks<B>::world(B{}).rank(); }

const std::string opening = "the ranks were not given the same run: ";
const std::string closing =
    ". Every rank needs the same command line, data and checkpoint (mpirun gives one command line to every rank)";

}  // namespace

TEST_CASE("same run: settings that agree pass on every rank") {
  CHECK(same_run_error(agreed_settings()) == "");
}

TEST_CASE("same run: a setting one rank holds differently is named with each value and the ranks holding it") {
  auto mine = agreed_settings();
  if (my_rank() == 2) mine[0] = setting("--layers", "2");
  CHECK(same_run_error(mine) == opening + "--layers is 4 (ranks 0, 1), 2 (rank 2)" + closing);
}

TEST_CASE("same run: values in order of the first rank holding each; several settings in the settings' order") {
  auto mine = agreed_settings();
  const int r = my_rank();
  mine[1] = setting("--lr", r == 0 ? "0.001" : r == 1 ? "0.002" : "0.003");  // three values
  if (r == 1) mine[2] = setting("--seed", "4");                               // ranks 0 and 2 agree
  CHECK(same_run_error(mine) ==
        opening + "--lr is 0.001 (rank 0), 0.002 (rank 1), 0.003 (rank 2); --seed is 1337 (ranks 0, 2), 4 (rank 1)" + closing);
}

TEST_CASE("same run: four differing settings are named, the others counted and listed") {
  auto mine = agreed_settings();
  if (my_rank() == 1) {
    mine[0] = setting("--layers", "2");
    mine[1] = setting("--lr", "0.1");
    mine[2] = setting("--seed", "2");
    mine[3] = setting("--steps", "8");
    mine[4] = setting("--dtype", "bf16");
    mine[5] = setting("--save", "/elsewhere");
  }
  CHECK(same_run_error(mine) == opening +
                                    "--layers is 4 (ranks 0, 2), 2 (rank 1); --lr is 0.002 (ranks 0, 2), 0.1 (rank 1); "
                                    "--seed is 1337 (ranks 0, 2), 2 (rank 1); --steps is 6 (ranks 0, 2), 8 (rank 1); "
                                    "and 2 more: --dtype, --save" +
                                    closing);
}

TEST_CASE("same run: a long value is cut to 156 bytes and '...'") {
  auto mine = agreed_settings();
  if (my_rank() == 0) mine[5] = setting("--save", std::string(300, 'a'));
  CHECK(same_run_error(mine) ==
        opening + "--save is " + std::string(156, 'a') + "... (rank 0), (none) (ranks 1, 2)" + closing);
}

TEST_CASE("same run: the compared text decides; the shown text is what the message says") {
  auto mine = agreed_settings();
  const int r = my_rank();
  // The same data under three names: the same run.
  mine.push_back({"the data file's contents (--data)", "/node" + std::to_string(r) + "/plays.txt: 5 bytes", "5 bytes, hash 1"});
  CHECK(same_run_error(mine) == "");
  // Different contents under one name: named by what it shows.
  mine.back().compared = r == 2 ? "5 bytes, hash 2" : "5 bytes, hash 1";
  CHECK(same_run_error(mine) == opening + "the data file's contents (--data) is /node0/plays.txt: 5 bytes (ranks 0, 1), " +
                                    "/node2/plays.txt: 5 bytes (rank 2)" + closing);
}

TEST_CASE("same run: ranks sharing a different number of settings run different builds") {
  auto mine = agreed_settings();
  if (my_rank() == 1) mine.push_back(setting("--new-flag", "on"));
  CHECK(same_run_error(mine) ==
        "the ranks run different builds of the engine (rank 0 shares 6 settings, rank 1 7): launch the same binary on every rank");
  // As many settings, one of another name (a flag renamed between builds), whatever its value: not a
  // setting to name with two values, but another build.
  mine = agreed_settings();
  if (my_rank() == 2) mine[3] = setting("--max-steps", "6");
  CHECK(same_run_error(mine) == "the ranks run different builds of the engine (rank 2's settings are named differently from "
                                "rank 0's): launch the same binary on every rank");
}

TEST_CASE("shared --save: a directory every rank sees passes, and rank 0's probe is removed") {
  namespace fs = std::filesystem;
  auto ranks = engine::Ranks<B>::world(B{});
  // One directory for the three ranks: rank 0's pid names it, passed to the others by the agreement.
  const fs::path base = fs::temp_directory_path() / "accel-same-run-save";
  if (ranks.rank() == 0) {
    fs::remove_all(base);
    fs::create_directories(base);
  }
  CHECK(same_run_error(agreed_settings()) == "");  // a collective: rank 0 has made the directory
  CHECK_NOTHROW(engine::check_shared_save(B{}, ranks, (base / "ck").string()));
  // No --save: nothing to check, wherever the ranks run (/proc: nothing can be created there).
  const fs::path cwd = fs::current_path();
  fs::current_path("/proc");
  CHECK_NOTHROW(engine::check_shared_save(B{}, ranks, ""));
  fs::current_path(cwd);
  CHECK(same_run_error(agreed_settings()) == "");            // every rank is past the probe's removal
  CHECK(fs::is_empty(base));
  // Where rank 0 cannot write (nothing can be created in /proc), every rank stops with rank 0's reason.
  std::string said;
  try {
    engine::check_shared_save(B{}, ranks, "/proc/accel-ck");
  } catch (const engine::AgreedUsageError& e) {
    said = e.what();
  }
  CHECK(said.rfind("--save /proc/accel-ck: rank 0 cannot write /proc/.engine-shared-probe.", 0) == 0);
  CHECK(same_run_error(agreed_settings()) == "");
  if (ranks.rank() == 0) fs::remove_all(base);
}
