// accel/comm's pieces that need no second rank: the environment variables, launch detection, the id
// file exchange (between forked processes), the flight recorder, the byte counts and busbw factors,
// the argument checks of the raw forms, ReduceOp names, the MPI types' reduction of half/bfloat16,
// accel::comm::abort in one process (forked).
#include "support/scoped_env.hpp"

#include <accel/comm.hpp>
#include <accel/comm/detail/arguments.hpp>
#include <accel/comm/detail/config.hpp>
#include <accel/comm/detail/id_file.hpp>

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <cstdlib>
#include <thread>
#include <string>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
namespace d = accel::comm::detail;

TEST_CASE("ACCEL_COMM_TIMEOUT: seconds or a unit; anything else names the variable") {
  CHECK(d::parse_timeout("600", "X") == 600s);
  CHECK(d::parse_timeout("1.5", "X") == 1500ms);
  CHECK(d::parse_timeout("500ms", "X") == 500ms);
  CHECK(d::parse_timeout("90s", "X") == 90s);
  CHECK(d::parse_timeout("10m", "X") == 600s);
  CHECK(d::parse_timeout(".5", "X") == 500ms);
  CHECK(d::parse_timeout("0.000000001", "X") == 1ns);
  CHECK(d::parse_timeout("1000000000", "X") == std::chrono::seconds(1000000000));  // ~31.7 years: the longest
  // "1.2.3": strtod would stop after "1.2"; 0.1 ns; past 1e18 ns (an int64 of nanoseconds overflows at 9.2e18).
  for (const char* bad : {"", "0", "-1", "abc", "1h", "1e3", "nan", "inf", "5 s", "ms", "s", "m", ".", "0.0", "1.2.3",
                          "1..5", "0.0000000001", "1000000001", "40000000000", "99999999999999999999m"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS((void)d::parse_timeout(bad, "ACCEL_COMM_TIMEOUT"), doctest::Contains("ACCEL_COMM_TIMEOUT='"),
                         accel::InvalidArgumentError);
  }
  {
    const ScopedEnv env{{"ACCEL_COMM_TIMEOUT", nullptr}};
    CHECK(d::timeout_from_env() == std::chrono::minutes(10));
  }
  {
    const ScopedEnv env{{"ACCEL_COMM_TIMEOUT", "2"}};
    CHECK(d::timeout_from_env() == 2s);
  }
  {
    const ScopedEnv env{{"ACCEL_COMM_TIMEOUT", ""}};  // set but empty: as unset
    CHECK(d::timeout_from_env() == std::chrono::minutes(10));
  }
}

TEST_CASE("ACCEL_COMM_TRACE_SIZE and ACCEL_COMM_LOG are read strictly") {
  {
    const ScopedEnv env{{"ACCEL_COMM_TRACE_SIZE", nullptr}, {"ACCEL_COMM_LOG", nullptr}};
    CHECK(d::trace_size_from_env() == 256);
    CHECK(d::log_mode_from_env() == d::LogMode::off);
  }
  {
    const ScopedEnv env{{"ACCEL_COMM_TRACE_SIZE", "0"}, {"ACCEL_COMM_LOG", "all"}};
    CHECK(d::trace_size_from_env() == 0);
    CHECK(d::log_mode_from_env() == d::LogMode::all);
  }
  {
    // Set but empty is unset, for these two and ACCEL_COMM_CHECK; "0" is off.
    const ScopedEnv env{{"ACCEL_COMM_TRACE_SIZE", ""}, {"ACCEL_COMM_LOG", ""}, {"ACCEL_COMM_CHECK", ""}};
    CHECK(d::trace_size_from_env() == 256);
    CHECK(d::log_mode_from_env() == d::LogMode::off);
    CHECK_FALSE(d::check_from_env());
  }
  {
    const ScopedEnv env{{"ACCEL_COMM_TRACE_SIZE", "999999999"}, {"ACCEL_COMM_LOG", "0"}, {"ACCEL_COMM_CHECK", "0"}};
    CHECK(d::trace_size_from_env() == 999999999);
    CHECK(d::log_mode_from_env() == d::LogMode::off);
    CHECK_FALSE(d::check_from_env());
  }
  {
    const ScopedEnv env{{"ACCEL_COMM_TRACE_SIZE", "1000000000"}};
    CHECK_THROWS_WITH_AS((void)d::trace_size_from_env(), doctest::Contains("ACCEL_COMM_TRACE_SIZE='1000000000'"),
                         accel::InvalidArgumentError);
  }
  {
    const ScopedEnv env{{"ACCEL_COMM_TRACE_SIZE", "-3"}, {"ACCEL_COMM_LOG", "yes"}};
    CHECK_THROWS_WITH_AS((void)d::trace_size_from_env(), doctest::Contains("ACCEL_COMM_TRACE_SIZE='-3'"),
                         accel::InvalidArgumentError);
    CHECK_THROWS_WITH_AS((void)d::log_mode_from_env(), doctest::Contains("ACCEL_COMM_LOG='yes'"),
                         accel::InvalidArgumentError);
  }
}

TEST_CASE("CommConfig::from_env: the four variables at once, defaults when unset; the first malformed one named") {
  {
    const ScopedEnv env{{"ACCEL_COMM_TIMEOUT", nullptr}, {"ACCEL_COMM_TRACE_SIZE", nullptr}, {"ACCEL_COMM_LOG", nullptr},
                        {"ACCEL_COMM_CHECK", nullptr}};
    const auto c = accel::comm::CommConfig::from_env();
    CHECK(c.timeout == std::chrono::minutes(10));
    CHECK(c.trace_size == 256);
    CHECK(c.log == accel::comm::CommConfig::LogMode::off);
    CHECK_FALSE(c.check);
  }
  {
    const ScopedEnv env{{"ACCEL_COMM_TIMEOUT", "90s"}, {"ACCEL_COMM_TRACE_SIZE", "16"}, {"ACCEL_COMM_LOG", "1"},
                        {"ACCEL_COMM_CHECK", "1"}};
    const auto c = accel::comm::CommConfig::from_env();
    CHECK(c.timeout == 90s);
    CHECK(c.trace_size == 16);
    CHECK(c.log == accel::comm::CommConfig::LogMode::rank0);
    CHECK(c.check);
  }
  for (const auto& entry : std::vector<std::pair<const char*, const char*>>{
           {"ACCEL_COMM_TIMEOUT", "abc"}, {"ACCEL_COMM_TRACE_SIZE", "1e3"}, {"ACCEL_COMM_LOG", "maybe"}, {"ACCEL_COMM_CHECK", "yes"}}) {
    const char* variable = entry.first;  // not a structured binding: doctest's macros capture it in lambdas
    const char* bad = entry.second;
    CAPTURE(variable);
    const ScopedEnv env{{variable, bad}};
    const std::string quoted = std::string(variable) + "='" + bad + "'";
    CHECK_THROWS_WITH_AS((void)accel::comm::CommConfig::from_env(), doctest::Contains(quoted.c_str()),
                         accel::InvalidArgumentError);
  }
}

TEST_CASE("launch detection: mpirun's variables, torchrun's, neither; inconsistent ones are refused") {
  const ScopedEnv clean{{"OMPI_COMM_WORLD_SIZE", nullptr}, {"OMPI_COMM_WORLD_RANK", nullptr},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", nullptr}, {"OMPI_COMM_WORLD_LOCAL_SIZE", nullptr},
                        {"PMI_SIZE", nullptr}, {"PMI_RANK", nullptr}, {"MPI_LOCALRANKID", nullptr},
                        {"MPI_LOCALNRANKS", nullptr}, {"RANK", nullptr}, {"WORLD_SIZE", nullptr},
                        {"LOCAL_RANK", nullptr}, {"LOCAL_WORLD_SIZE", nullptr}};
  accel::comm::LaunchInfo l = accel::comm::detect_launch();
  CHECK(l.launcher == accel::comm::Launcher::single);
  CHECK(l.world_size == 1);
  {
    const ScopedEnv env{{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}};
    l = accel::comm::detect_launch();
    CHECK(l.launcher == accel::comm::Launcher::environment);
    CHECK(l.rank == 3);
    CHECK(l.world_size == 8);
    CHECK(l.local_rank == 1);
    CHECK(l.local_world_size == 2);
  }
  {
    const ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
    l = accel::comm::detect_launch();
    CHECK(l.launcher == accel::comm::Launcher::mpi);
    CHECK(l.rank == 2);
    CHECK(l.world_size == 4);
    CHECK(l.local_world_size == 2);
  }
  {
    const ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"}, {"RANK", "1"}, {"WORLD_SIZE", "4"}};
    CHECK_THROWS_WITH_AS((void)accel::comm::detect_launch(), doctest::Contains("disagree with the MPI launcher"),
                         accel::InvalidArgumentError);
  }
  {
    const ScopedEnv env{{"RANK", "8"}, {"WORLD_SIZE", "8"}};
    CHECK_THROWS_WITH_AS((void)accel::comm::detect_launch(), doctest::Contains("RANK='8' is not an integer in 0..7"),
                         accel::InvalidArgumentError);
  }
  {
    const ScopedEnv env{{"RANK", "1"}};
    CHECK_THROWS_WITH_AS((void)accel::comm::detect_launch(), doctest::Contains("only RANK is set"),
                         accel::InvalidArgumentError);
  }
}

namespace {
// Every variable detect_launch reads, unset for one scope.
struct CleanLaunchEnv : ScopedEnv {
  CleanLaunchEnv()
      : ScopedEnv{{"OMPI_COMM_WORLD_SIZE", nullptr}, {"OMPI_COMM_WORLD_RANK", nullptr},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", nullptr}, {"OMPI_COMM_WORLD_LOCAL_SIZE", nullptr},
                  {"PMI_SIZE", nullptr}, {"PMI_RANK", nullptr}, {"MPI_LOCALRANKID", nullptr},
                  {"MPI_LOCALNRANKS", nullptr}, {"RANK", nullptr}, {"WORLD_SIZE", nullptr},
                  {"LOCAL_RANK", nullptr}, {"LOCAL_WORLD_SIZE", nullptr}} {}
};

void check_launch_refused(std::initializer_list<std::pair<const char*, const char*>> values, const std::string& message) {
  const ScopedEnv env{values};
  CAPTURE(message);
  CHECK_THROWS_WITH_AS((void)accel::comm::detect_launch(), message.c_str(), accel::InvalidArgumentError);
}
}  // namespace

TEST_CASE("launch detection: an MPI local rank not below the local size is refused, Open MPI's and PMI's") {
  const CleanLaunchEnv clean;
  check_launch_refused({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
                       "OMPI_COMM_WORLD_LOCAL_RANK=3 is not below OMPI_COMM_WORLD_LOCAL_SIZE=2");
  check_launch_refused({{"PMI_SIZE", "4"}, {"PMI_RANK", "2"}, {"MPI_LOCALRANKID", "2"}, {"MPI_LOCALNRANKS", "1"}},
                       "MPI_LOCALRANKID=2 is not below MPI_LOCALNRANKS=1");
  // Without the launcher's local variables (srun with PMI), torchrun's are read, and checked the same way.
  check_launch_refused({{"PMI_SIZE", "4"}, {"PMI_RANK", "2"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}},
                       "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2");
  const ScopedEnv env{{"PMI_SIZE", "4"}, {"PMI_RANK", "3"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}};
  const accel::comm::LaunchInfo l = accel::comm::detect_launch();
  CHECK(l.launcher == accel::comm::Launcher::mpi);
  CHECK(l.rank == 3);
  CHECK(l.world_size == 4);
  CHECK(l.local_rank == 1);
  CHECK(l.local_world_size == 2);
}

TEST_CASE("launch detection: a launcher's size without its rank (or the reverse) is refused, not read as rank 0") {
  const CleanLaunchEnv clean;
  check_launch_refused({{"OMPI_COMM_WORLD_SIZE", "4"}},
                       "OMPI_COMM_WORLD_SIZE='4' is set but OMPI_COMM_WORLD_RANK is not: an MPI launcher sets them together");
  check_launch_refused({{"OMPI_COMM_WORLD_RANK", "1"}},
                       "OMPI_COMM_WORLD_RANK='1' is set but OMPI_COMM_WORLD_SIZE is not: an MPI launcher sets them together");
  check_launch_refused({{"PMI_SIZE", "4"}}, "PMI_SIZE='4' is set but PMI_RANK is not: an MPI launcher sets them together");
  check_launch_refused({{"PMI_RANK", "2"}}, "PMI_RANK='2' is set but PMI_SIZE is not: an MPI launcher sets them together");
  check_launch_refused({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
                       "OMPI_COMM_WORLD_LOCAL_SIZE='2' is set but OMPI_COMM_WORLD_LOCAL_RANK is not: an MPI launcher "
                       "sets them together");
  check_launch_refused({{"PMI_SIZE", "4"}, {"PMI_RANK", "1"}, {"MPI_LOCALRANKID", "1"}},
                       "MPI_LOCALRANKID='1' is set but MPI_LOCALNRANKS is not: an MPI launcher sets them together");
  check_launch_refused({{"WORLD_SIZE", "4"}},
                       "RANK and WORLD_SIZE are set together (torchrun-style launch); only WORLD_SIZE is set");
}

TEST_CASE("launch detection: torchrun's variables beside mpirun's must agree with them, LOCAL_* too") {
  const CleanLaunchEnv clean;
  const ScopedEnv mpi{{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  check_launch_refused({{"RANK", "1"}, {"WORLD_SIZE", "4"}},
                       "RANK=1 WORLD_SIZE=4 disagree with the MPI launcher's rank 2 of 4 (OMPI_COMM_WORLD_RANK=2 "
                       "OMPI_COMM_WORLD_SIZE=4)");
  check_launch_refused({{"LOCAL_RANK", "3"}},
                       "LOCAL_RANK=3 disagrees with the MPI launcher's OMPI_COMM_WORLD_LOCAL_RANK=0");
  check_launch_refused({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}},
                       "LOCAL_RANK=1 disagrees with the MPI launcher's OMPI_COMM_WORLD_LOCAL_RANK=0");
  check_launch_refused({{"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "4"}},
                       "LOCAL_WORLD_SIZE=4 disagrees with the MPI launcher's OMPI_COMM_WORLD_LOCAL_SIZE=2");
  check_launch_refused({{"LOCAL_RANK", "x"}}, "LOCAL_RANK='x' is not an integer in 0..16777216");
  {
    const ScopedEnv pmi{{"OMPI_COMM_WORLD_SIZE", nullptr}, {"OMPI_COMM_WORLD_RANK", nullptr},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", nullptr}, {"OMPI_COMM_WORLD_LOCAL_SIZE", nullptr},
                        {"PMI_SIZE", "4"}, {"PMI_RANK", "2"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}};
    check_launch_refused({{"LOCAL_RANK", "0"}}, "LOCAL_RANK=0 disagrees with the MPI launcher's MPI_LOCALRANKID=1");
  }
  // Agreeing values are fine.
  const ScopedEnv same{{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}};
  const accel::comm::LaunchInfo l = accel::comm::detect_launch();
  CHECK(l.launcher == accel::comm::Launcher::mpi);
  CHECK(l.rank == 2);
  CHECK(l.world_size == 4);
  CHECK(l.local_rank == 0);
  CHECK(l.local_world_size == 2);
}

TEST_CASE("launch detection: every bound of every variable, torchrun's defaults for the local pair, the launchers' names") {
  const CleanLaunchEnv clean;
  // Open MPI's: the rank and the local rank below the size, the local size at most the size.
  check_launch_refused({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "4"}},
                       "OMPI_COMM_WORLD_RANK='4' is not an integer in 0..3");
  check_launch_refused({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}},
                       "OMPI_COMM_WORLD_LOCAL_RANK='4' is not an integer in 0..3");
  check_launch_refused({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "5"}},
                       "OMPI_COMM_WORLD_LOCAL_SIZE='5' is not an integer in 1..4");
  // torchrun's beside mpirun's: the size must agree as well as the rank.
  check_launch_refused({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"}, {"RANK", "2"}, {"WORLD_SIZE", "8"}},
                       "RANK=2 WORLD_SIZE=8 disagree with the MPI launcher's rank 2 of 4 (OMPI_COMM_WORLD_RANK=2 "
                       "OMPI_COMM_WORLD_SIZE=4)");
  // torchrun's alone: the local rank below the local size.
  check_launch_refused({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}},
                       "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2");
  // A magnitude past long long's range, negated, does not wrap into a valid rank.
  check_launch_refused({{"RANK", "-18446744073709551615"}, {"WORLD_SIZE", "4"}},
                       "RANK='-18446744073709551615' is not an integer in 0..3");
  {
    // RANK and WORLD_SIZE without the local pair (a launch by hand): one node, as torchrun's defaults.
    const ScopedEnv env{{"RANK", "3"}, {"WORLD_SIZE", "8"}};
    const accel::comm::LaunchInfo l = accel::comm::detect_launch();
    CHECK(l.launcher == accel::comm::Launcher::environment);
    CHECK(l.local_rank == 3);
    CHECK(l.local_world_size == 8);
  }
  CHECK(accel::comm::name(accel::comm::Launcher::single) == "single");
  CHECK(accel::comm::name(accel::comm::Launcher::mpi) == "mpi");
  CHECK(accel::comm::name(accel::comm::Launcher::environment) == "environment");
}

TEST_CASE("launch detection reads integers as Python's int() does: surrounding whitespace and '+', nothing else") {
  const CleanLaunchEnv clean;
  for (const auto& values : std::vector<std::pair<const char*, const char*>>{
           {" 1", "+4"}, {"1 ", "4 "}, {"\t1\n", " +4\r\n"}, {"+1", "\v4\f"}, {"01", "004"}}) {
    const char* const rank = values.first;  // not a structured binding: clang 14's CAPTURE cannot take one
    const char* const world_size = values.second;
    CAPTURE(rank);
    CAPTURE(world_size);
    const ScopedEnv env{{"RANK", rank}, {"WORLD_SIZE", world_size}, {"LOCAL_RANK", " 1 "}, {"LOCAL_WORLD_SIZE", "+2 "}};
    const accel::comm::LaunchInfo l = accel::comm::detect_launch();
    CHECK(l.launcher == accel::comm::Launcher::environment);
    CHECK(l.rank == 1);
    CHECK(l.world_size == 4);
    CHECK(l.local_rank == 1);
    CHECK(l.local_world_size == 2);
  }
  {
    const ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", " 4 "}, {"OMPI_COMM_WORLD_RANK", "+3"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1\n"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "\t2"}};
    const accel::comm::LaunchInfo l = accel::comm::detect_launch();
    CHECK(l.launcher == accel::comm::Launcher::mpi);
    CHECK(l.rank == 3);
    CHECK(l.world_size == 4);
    CHECK(l.local_rank == 1);
    CHECK(l.local_world_size == 2);
  }
  for (const char* bad : {"1x", "0x1", "1 2", "+ 1", "+-1", "--1", "++1", "+", "-", " ", " \t ", "1.0", "1e0", "1_0",
                          "99999999999999999999", "18446744073709551617", "\xd9\xa1"}) {
    check_launch_refused({{"RANK", bad}, {"WORLD_SIZE", "4"}}, "RANK='" + std::string(bad) + "' is not an integer in 0..3");
    check_launch_refused({{"RANK", "0"}, {"WORLD_SIZE", bad}},
                         "WORLD_SIZE='" + std::string(bad) + "' is not an integer in 1..16777216");
  }
  check_launch_refused({{"RANK", "-1"}, {"WORLD_SIZE", "4"}}, "RANK='-1' is not an integer in 0..3");
  check_launch_refused({{"RANK", "4"}, {"WORLD_SIZE", "4"}}, "RANK='4' is not an integer in 0..3");
  check_launch_refused({{"RANK", "0"}, {"WORLD_SIZE", "16777217"}}, "WORLD_SIZE='16777217' is not an integer in 1..16777216");
  // Set but empty: refused where it is read (int('') fails), and counted as unset where it decides the launcher.
  check_launch_refused({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", ""}}, "LOCAL_RANK='' is not an integer in 0..3");
  check_launch_refused({{"RANK", "1"}, {"WORLD_SIZE", ""}},
                       "RANK and WORLD_SIZE are set together (torchrun-style launch); only RANK is set");
  check_launch_refused({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", ""}},
                       "OMPI_COMM_WORLD_SIZE='4' is set but OMPI_COMM_WORLD_RANK is not: an MPI launcher sets them together");
}

TEST_CASE("the id file: rank 0 publishes, three other processes read the same bytes; stale files are refused") {
  char dir_template[] = "/tmp/accel-id-file-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string path = std::string(dir_template) + "/id";
  std::vector<unsigned char> id(128);
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<unsigned char>(i * 37 + 11);
  // Readers start first and wait; the publisher comes 50 ms later.
  std::vector<pid_t> readers;
  for (int r = 1; r <= 3; ++r) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        const std::vector<unsigned char> got = d::read_id_file(path, id.size(), 10s);
        ::_exit(got == id ? 0 : 1);
      } catch (...) {
        ::_exit(2);
      }
    }
    readers.push_back(pid);
  }
  std::this_thread::sleep_for(50ms);
  d::publish_id_file(path, id);
  for (const pid_t pid : readers) {
    int status = -1;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  // The file is still there: a second rank 0 (a stale file) is refused; the file is kept as it was.
  CHECK_THROWS_WITH_AS(d::publish_id_file(path, id), doctest::Contains("already exists"), accel::InvalidStateError);
  CHECK(d::read_id_file(path, id.size(), 1s) == id);
  // A reader of another size, and a file that is not an id file, are errors, not garbage ids.
  CHECK_THROWS_WITH_AS((void)d::read_id_file(path, 64, 1s), doctest::Contains("not an id file of accel"),
                       accel::InvalidStateError);
  d::remove_id_file(path);
  CHECK_THROWS_WITH_AS((void)d::read_id_file(path, id.size(), 30ms), doctest::Contains("did not publish"),
                       accel::InvalidStateError);
  ::rmdir(dir_template);
}

TEST_CASE("accel::comm::abort in one process: the reason on stderr, then the exit status it was given") {
  const ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", nullptr}, {"PMI_SIZE", nullptr}, {"RANK", nullptr}, {"WORLD_SIZE", nullptr}};
  for (const int code : {4, 0}) {  // 0 becomes 1: an abort is a failure
    CAPTURE(code);
    const int expected = code == 0 ? 1 : code;
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::close(fds[1]);
      accel::comm::abort("the test gave up", code);
    }
    ::close(fds[1]);
    std::string err;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = -1;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == expected);
    CHECK(err == "accel::comm: rank 0 of 1 aborts the job (exit status " + std::to_string(expected) +
                     "): the test gave up\n");
  }
}

TEST_CASE("the flight recorder keeps the newest N operations, oldest first, with their states") {
  accel::comm::FlightRecorder r(4);
  CHECK(r.capacity() == 4);
  CHECK(accel::comm::FlightRecorder(0).capacity() == 0);
  d::Op op{d::OpKind::all_reduce, accel::Dtype::float16, accel::ReduceOp::max, -1, nullptr, nullptr, 10};
  for (std::uint64_t seq = 1; seq <= 6; ++seq) {
    op.count = seq * 10;
    r.enqueued(seq, op, 7);
    r.started(seq);
    if (seq != 6) r.completed(seq);
  }
  r.failed(6, true);
  r.completed(1);  // overwritten long ago: ignored
  const auto e = r.entries();
  REQUIRE(e.size() == 4);
  CHECK(e.front().seq == 3);
  CHECK(e.back().seq == 6);
  CHECK(e.back().count == 60);
  CHECK(e.back().state == accel::comm::FlightRecorder::State::timed_out);
  CHECK(e[1].state == accel::comm::FlightRecorder::State::completed);
  const std::string dump = r.dump("H");
  CHECK(dump.find("#6") != std::string::npos);
  CHECK(dump.find("TIMED OUT") != std::string::npos);
  CHECK(dump.find("all_reduce(max)") != std::string::npos);
  CHECK(dump.find("#2 ") == std::string::npos);
  accel::comm::FlightRecorder off(0);
  off.enqueued(1, op, 0);
  CHECK(off.entries().empty());
  CHECK(off.dump("H").find("ACCEL_COMM_TRACE_SIZE=0") != std::string::npos);
}

TEST_CASE("the flight recorder: every field of an entry and its times, numbers out of order or missing, the dump's lines") {
  using FR = accel::comm::FlightRecorder;
  using State = FR::State;
  const FR::clock::time_point t0 = FR::clock::now() - 5s;
  const FR::clock::time_point none{};
  FR r(8);
  // A send to rank 3, run at once on the thread that issued it, by a graph's replay, enqueued at t0.
  const d::Op send{d::OpKind::send, accel::Dtype::int64, accel::ReduceOp::sum, 3, nullptr, nullptr, 16};
  r.enqueued(1, send, 9, true, t0, true);
  const d::Op broadcast{d::OpKind::broadcast, accel::Dtype::float32, accel::ReduceOp::sum, 2, nullptr, nullptr, 100};
  r.enqueued(2, broadcast, 4, false, t0 + 1s);
  const d::Op recv{d::OpKind::recv, accel::Dtype::bfloat16, accel::ReduceOp::sum, 1, nullptr, nullptr, 8};
  r.enqueued(3, recv, 4);
  r.started(2, t0 + 2s);
  r.completed(2);
  r.failed(3, false);  // failed before it started
  // Another thread's operation numbered earlier may be enqueued later; #4 is never recorded here.
  const d::Op barrier{d::OpKind::barrier, accel::Dtype::uint8, accel::ReduceOp::sum, -1, nullptr, nullptr, 0};
  r.enqueued(6, barrier, 4);
  r.enqueued(5, barrier, 4);
  const FR::clock::time_point started5 = r.started(5);

  const auto e = r.entries();
  REQUIRE(e.size() == 5);
  CHECK(e[0].seq == 1);
  CHECK(e[1].seq == 2);
  CHECK(e[2].seq == 3);
  CHECK(e[3].seq == 5);
  CHECK(e[4].seq == 6);
  CHECK(e[0].kind == d::OpKind::send);
  CHECK(e[0].op() == "send");
  CHECK(e[0].dtype == accel::Dtype::int64);
  CHECK(e[0].count == 16);
  CHECK(e[0].root == 3);
  CHECK(e[0].stream_id == 9);
  CHECK(e[0].in_graph);
  CHECK(e[0].state == State::started);
  CHECK(e[0].enqueued_at == t0);
  CHECK(e[0].started_at == t0);
  CHECK(e[0].ended_at == none);
  CHECK(e[1].state == State::completed);
  CHECK(e[1].root == 2);
  CHECK_FALSE(e[1].in_graph);
  CHECK(e[1].enqueued_at == t0 + 1s);
  CHECK(e[1].started_at == t0 + 2s);
  CHECK(e[1].ended_at > t0 + 2s);
  CHECK(e[2].state == State::failed);
  CHECK(e[2].started_at == none);
  CHECK(e[2].ended_at != none);
  CHECK(e[2].enqueued_at > t0 + 2s);  // read from the clock when none was given
  CHECK(e[3].state == State::started);
  CHECK(e[3].started_at == started5);  // started() returns the time it records
  CHECK(e[4].state == State::enqueued);

  const std::string dump = r.dump("header");
  INFO(dump);
  CHECK(dump.rfind("header\n  last 5 operation(s), oldest first (capacity 8, ACCEL_COMM_TRACE_SIZE):\n", 0) == 0);
  const auto line = [&](const std::string& start) {
    const auto at = dump.find("  " + start);
    REQUIRE(at != std::string::npos);
    return dump.substr(at, dump.find('\n', at) - at);
  };
  const std::string l1 = line("#1 ");
  CHECK(l1.find("send") != std::string::npos);
  CHECK(l1.find("16 x int64") != std::string::npos);
  CHECK(l1.find(" to 3") != std::string::npos);
  CHECK(l1.find("stream 9") != std::string::npos);
  CHECK(l1.find("started") != std::string::npos);
  const auto ago = l1.find("enqueued ");  // its enqueue was 5 s before the dump
  REQUIRE(ago != std::string::npos);
  CHECK(std::stod(l1.substr(ago + 9)) >= 5.0);
  CHECK(std::stod(l1.substr(ago + 9)) < 60.0);
  CHECK(l1.find(" s so far (graph replay)") != std::string::npos);
  const std::string l2 = line("#2 ");
  CHECK(l2.find("broadcast") != std::string::npos);
  CHECK(l2.find("100 x float32") != std::string::npos);
  CHECK(l2.find(" root 2 ") != std::string::npos);
  CHECK(l2.find("completed") != std::string::npos);
  CHECK(l2.find("so far") == std::string::npos);
  CHECK(l2.find("graph") == std::string::npos);
  const std::string l3 = line("#3 ");
  CHECK(l3.find("8 x bfloat16") != std::string::npos);
  CHECK(l3.find(" from 1 ") != std::string::npos);
  CHECK(l3.find("FAILED") != std::string::npos);
  CHECK(l3.find(", ran") == std::string::npos);  // it never started
  CHECK(dump.find("  #4 ") == std::string::npos);

  // A state change for a number whose slot a newer operation took is ignored.
  FR small(2);
  small.enqueued(1, broadcast, 0);
  small.enqueued(3, broadcast, 0);  // slot 1 % 2 == 3 % 2
  small.failed(1, true);
  small.completed(1);
  const auto kept = small.entries();
  REQUIRE(kept.size() == 1);
  CHECK(kept[0].seq == 3);
  CHECK(kept[0].state == State::enqueued);
  CHECK(kept[0].ended_at == none);
  CHECK(FR(4).dump("h") == "h\n  (no operation recorded)\n");
}

TEST_CASE("nccl-tests' bytes and bus-bandwidth factors") {
  d::Op op{d::OpKind::all_reduce, accel::Dtype::float32, accel::ReduceOp::sum, -1, nullptr, nullptr, 1024};
  CHECK(d::algbw_bytes(op, 4) == 4096);
  CHECK(d::busbw_factor(d::OpKind::all_reduce, 4) == doctest::Approx(1.5));
  CHECK(d::busbw_factor(d::OpKind::all_reduce, 1) == 0);
  op.kind = d::OpKind::all_gather;
  CHECK(d::algbw_bytes(op, 4) == 4 * 4096);
  CHECK(d::busbw_factor(d::OpKind::all_gather, 4) == doctest::Approx(0.75));
  CHECK(d::busbw_factor(d::OpKind::reduce_scatter, 2) == doctest::Approx(0.5));
  CHECK(d::busbw_factor(d::OpKind::broadcast, 8) == 1);
}

TEST_CASE("ReduceOp names, and torch's spellings") {
  CHECK(accel::name(accel::ReduceOp::avg) == "avg");
  CHECK(accel::parse_reduce_op("max") == accel::ReduceOp::max);
  CHECK(accel::parse_reduce_op("PRODUCT") == accel::ReduceOp::prod);
  CHECK_THROWS_WITH_AS((void)accel::parse_reduce_op("mean"), doctest::Contains("unknown reduce op 'mean'"),
                       accel::InvalidArgumentError);
}

TEST_CASE("the raw forms' checks: in-place positions NCCL defines are accepted, other overlaps refused; the bounds") {
  const d::CallSite call{"test"};
  std::vector<float> buf(64);
  float* p = buf.data();
  using K = d::OpKind;
  const auto op = [&](K k, const void* in, void* out, std::size_t count, int root = -1) {
    return d::Op{k, accel::Dtype::float32, accel::ReduceOp::sum, root, in, out, count};
  };
  // rank 1 of 4
  CHECK_NOTHROW(d::check_op(call, op(K::all_gather, p + 4, p, 4), 1, 4));
  CHECK_THROWS_AS(d::check_op(call, op(K::all_gather, p + 5, p, 4), 1, 4), accel::InvalidArgumentError);
  CHECK_NOTHROW(d::check_op(call, op(K::reduce_scatter, p, p + 4, 4), 1, 4));
  CHECK_THROWS_AS(d::check_op(call, op(K::reduce_scatter, p, p, 4), 1, 4), accel::InvalidArgumentError);
  CHECK_NOTHROW(d::check_op(call, op(K::scatter, p, p + 4, 4, 1), 1, 4));
  CHECK_NOTHROW(d::check_op(call, op(K::scatter, nullptr, p, 4, 0), 1, 4));  // not the root: no input
  CHECK_THROWS_AS(d::check_op(call, op(K::scatter, nullptr, p, 4, 1), 1, 4), accel::InvalidArgumentError);
  CHECK_NOTHROW(d::check_op(call, op(K::reduce, p, nullptr, 4, 0), 1, 4));  // not the root: no output
  CHECK_NOTHROW(d::check_op(call, op(K::broadcast, nullptr, p, 4, 0), 1, 4));
  CHECK_NOTHROW(d::check_op(call, op(K::all_reduce, nullptr, nullptr, 0), 1, 4));  // nothing to move
  // At the bounds: roots and peers 0 to 3; the size itself is out of range.
  CHECK_NOTHROW(d::check_op(call, op(K::broadcast, p, p, 4, 3), 1, 4));
  CHECK_THROWS_WITH_AS(d::check_op(call, op(K::broadcast, p, p, 4, 4), 1, 4),
                       doctest::Contains("root 4 is out of range: the communicator has 4 rank(s), 0 to 3"),
                       accel::InvalidArgumentError);
  CHECK_NOTHROW(d::check_op(call, op(K::send, p, nullptr, 4, 3), 1, 4));
  CHECK_THROWS_WITH_AS(d::check_op(call, op(K::send, p, nullptr, 4, 4), 1, 4),
                       doctest::Contains("peer 4 is out of range: the communicator has 4 rank(s), 0 to 3"),
                       accel::InvalidArgumentError);
  CHECK_THROWS_WITH_AS(d::check_op(call, op(K::recv, nullptr, p, 4, -1), 1, 4), doctest::Contains("peer -1 is out of range"),
                       accel::InvalidArgumentError);
  // reduce_scatter reads count × size elements: an output inside the input, but not at this rank's
  // block, overlaps it (here block 2 of 4: elements 8 to 11 of the 16 read).
  CHECK_THROWS_WITH_AS(d::check_op(call, op(K::reduce_scatter, p, p + 8, 4), 1, 4),
                       doctest::Contains("the output at this rank's block of the input"), accel::InvalidArgumentError);
  CHECK_NOTHROW(d::check_op(call, op(K::reduce_scatter, p, p + 16, 4), 1, 4));  // just past the input
  // A count whose bytes on every rank would not fit in 62 bits is refused before any pointer is used.
  const std::size_t huge = (std::size_t{1} << 62) / (sizeof(float) * 4) + 1;
  const auto* far_in = reinterpret_cast<const void*>(std::uintptr_t{1} << 12);
  auto* far_out = reinterpret_cast<void*>(std::uintptr_t{1} << 61);
  CHECK_THROWS_WITH_AS(d::check_op(call, op(K::all_gather, far_in, far_out, huge), 1, 4),
                       doctest::Contains((std::to_string(huge) + " elements per rank is too many").c_str()),
                       accel::InvalidArgumentError);
  // One fewer is accepted (its extents, 2^60 and 2^62 bytes, are only addresses here: nothing is read).
  CHECK_NOTHROW(d::check_op(call, op(K::all_gather, far_in, far_out, huge - 1), 1, 4));
}

#if defined(ACCEL_HAS_MPI)
namespace {
// Every 16-bit pattern as `in`, against zeros, the smallest subnormals and normals, ones, the largest
// finite values, infinities, quiet and signalling NaNs, values that round to a tie or overflow, and a
// spread of other patterns as `inout`; 65,537 elements, so the scalar tail runs too. Returns the
// elements whose sums differ: bits, or for a NaN sum (which operand's payload a NaN sum keeps is
// unspecified) NaN-ness and quietness. `nan_mask` / `quiet_bit`: the format's NaN test and quiet bit.
template <class T>
std::size_t vector_sum_mismatches(void (*vector_sum)(const void*, void*, int), std::uint16_t exp_mask,
                                  std::uint16_t quiet_bit, std::size_t& nans) {
  std::vector<std::uint16_t> others = {0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x03FF, 0x0400, 0x3F80,
                                       0xBF80, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x7F7F, 0xFF7F, 0x7C00, 0xFC00,
                                       0x7F80, 0xFF80, 0x7E00, 0x7C01, 0x7FC0, 0x7F81, 0xFFC1, 0x3F81, 0x4000, 0x0100};
  for (int k = 0; k < 48; ++k) others.push_back(static_cast<std::uint16_t>(k * 1361 + 11));
  const std::size_t n = 65537;
  std::vector<std::uint16_t> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::uint16_t>(i);
  const std::uint16_t magnitude = 0x7FFF;
  const auto is_nan = [&](std::uint16_t b) {
    return (b & exp_mask) == exp_mask && (b & magnitude & static_cast<std::uint16_t>(~exp_mask)) != 0;
  };
  std::size_t differing = 0;
  for (const std::uint16_t other : others) {
    std::vector<std::uint16_t> scalar(n, other), vector(n, other);
    d::reduce_small_floats<T, accel::ReduceOp::sum>(in.data(), scalar.data(), static_cast<int>(n));
    vector_sum(in.data(), vector.data(), static_cast<int>(n));
    for (std::size_t i = 0; i < n; ++i) {
      const bool nan_s = is_nan(scalar[i]), nan_v = is_nan(vector[i]);
      if (nan_s || nan_v) {
        ++nans;
        differing += !(nan_s && nan_v && (vector[i] & quiet_bit) != 0);
      } else {
        differing += scalar[i] != vector[i];
      }
    }
  }
  return differing;
}
}  // namespace
#endif

TEST_CASE("bfloat16 and half sums four at a time give the scalar loop's bits, for every 16-bit value") {
#if defined(ACCEL_HAS_MPI)
  std::size_t nans = 0;
  CHECK(vector_sum_mismatches<accel::bfloat16>(&d::sum_bfloat16, 0x7F80, 0x0040, nans) == 0);
  CHECK(nans > 0);
  nans = 0;
  CHECK(vector_sum_mismatches<accel::half>(&d::sum_half, 0x7C00, 0x0200, nans) == 0);
  CHECK(nans > 0);
  std::uint16_t one_and_a_half = 0x3FC0, quarter = 0x3E80;  // bfloat16: 1.5 + 0.25 = 1.75
  d::sum_bfloat16(&one_and_a_half, &quarter, 1);
  CHECK(quarter == 0x3FE0);
  std::vector<std::uint16_t> a{0x3C00, 0x7BFF, 0x0001, 0x6800}, b{0x3C00, 0x7BFF, 0x0001, 0x3C00};
  d::sum_half(a.data(), b.data(), 4);  // half: 1 + 1, max + max (infinity), 2^-24 twice, 2048 + 1 (a tie)
  CHECK(b == std::vector<std::uint16_t>{0x4000, 0x7C00, 0x0002, 0x6800});
#else
  MESSAGE("skipped: accel was built without MPI");
#endif
}

TEST_CASE("half and bfloat16 are reduced through MPI's user-defined ops in float, rounded each step") {
#if defined(ACCEL_HAS_MPI)
  std::vector<accel::half> a{accel::half(1.0f), accel::half(2048.0f), accel::half(-3.0f)};
  std::vector<accel::half> b{accel::half(2.0f), accel::half(1.0f), accel::half(5.0f)};
  d::reduce_small_floats<accel::half, accel::ReduceOp::sum>(a.data(), b.data(), 3);
  CHECK(static_cast<float>(b[0]) == 3.0f);
  CHECK(static_cast<float>(b[1]) == 2048.0f);  // 2049 rounds to even in half
  CHECK(static_cast<float>(b[2]) == 2.0f);
  std::vector<accel::bfloat16> x{accel::bfloat16(3.0f), accel::bfloat16(-1.0f)};
  std::vector<accel::bfloat16> y{accel::bfloat16(2.0f), accel::bfloat16(4.0f)};
  d::reduce_small_floats<accel::bfloat16, accel::ReduceOp::min>(x.data(), y.data(), 2);
  CHECK(static_cast<float>(y[0]) == 2.0f);
  CHECK(static_cast<float>(y[1]) == -1.0f);
  std::vector<std::int8_t> i8{-7, 9};
  d::divide_by(accel::Dtype::int8, i8.data(), 2, 2);
  CHECK(i8 == std::vector<std::int8_t>{-3, 4});  // truncation toward zero, as NCCL's avg
#else
  MESSAGE("skipped: accel was built without MPI");
#endif
}

// Last in this file (doctest runs a file's cases in order): it finalizes communication for the process.
TEST_CASE("after finalize(), world() refuses naming itself; is_initialized() follows init and finalize") {
  const accel::comm::LaunchInfo first = accel::comm::init();
  CHECK(accel::comm::is_initialized());
  {
    // init() is read once: a second call returns the first launch, whatever the environment says now.
    const ScopedEnv env{{"RANK", "3"}, {"WORLD_SIZE", "4"}};
    const accel::comm::LaunchInfo& again = accel::comm::init();
    CHECK(again.rank == first.rank);
    CHECK(again.world_size == first.world_size);
    CHECK(again.launcher == first.launcher);
    CHECK(accel::comm::detect_launch().rank == 3);  // what a fresh read would have given
  }
  // finalize() destroys the world communicators in reverse order of creation, once.
  std::vector<int> destroyed;
  accel::comm::detail::Runtime& runtime = accel::comm::detail::runtime();
  runtime.world_destroyers.emplace_back([&] { destroyed.push_back(1); });
  runtime.world_destroyers.emplace_back([&] { destroyed.push_back(2); });
  accel::comm::finalize();
  CHECK(destroyed == std::vector<int>{2, 1});
  CHECK(runtime.world_destroyers.empty());
  CHECK_FALSE(accel::comm::is_initialized());
  runtime.world_destroyers.emplace_back([&] { destroyed.push_back(3); });
  accel::comm::finalize();  // idempotent: a second call does nothing
  CHECK(destroyed == std::vector<int>{2, 1});
  runtime.world_destroyers.clear();
#if defined(ACCEL_HAS_MPI)
  CHECK_THROWS_WITH_AS((void)accel::comm::world<accel::CpuBackend>(),
                       doctest::Contains("accel::comm::world(): communication was finalized in this process"),
                       accel::InvalidStateError);
#endif
  CHECK_THROWS_WITH_AS((void)accel::comm::init(), doctest::Contains("accel::comm::init: communication was finalized"),
                       accel::InvalidStateError);
}
