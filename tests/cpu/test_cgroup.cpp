// The limits a process's cgroups put on it (cpu/detail/cgroup.hpp): the directories of a controller's
// hierarchy as /proc/self/cgroup and mountinfo name them (cgroup v1 and v2, a container's own root), the
// memory limit and the room under it, the CPU quota, from files as the kernel writes them.
#include <accel/cpu/detail/cgroup.hpp>
#include <accel/cpu/detail/host_pages.hpp>

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using accel::cpu::detail::CgroupDir;

std::vector<std::string> listed(const std::vector<CgroupDir>& dirs) {
  std::vector<std::string> out;
  for (const auto& d : dirs) out.push_back(std::to_string(d.version) + " " + d.path);
  return out;
}

/// A directory tree standing in for a cgroup hierarchy, removed at the end of the case.
struct FakeHierarchy {
  fs::path root = fs::temp_directory_path() / ("accel_cgroup_" + std::to_string(::getpid()));
  FakeHierarchy() { fs::create_directories(root / "a" / "b"); }
  ~FakeHierarchy() { fs::remove_all(root); }
  void write(const std::string& file, const std::string& text) const { std::ofstream(root / file) << text; }
  [[nodiscard]] std::string at(const std::string& dir) const { return (root / dir).string(); }
};

}  // namespace

TEST_CASE("cgroup: a controller's directories, leaf first, from /proc/self/cgroup and mountinfo") {
  using accel::cpu::detail::cgroup_dirs;
  SUBCASE("cgroup v2: the process's directory and its ancestors up to the mount") {
    const char* mounts = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
    CHECK(listed(cgroup_dirs("memory", "0::/kubepods/pod1/c1\n", mounts)) ==
          std::vector<std::string>{"2 /sys/fs/cgroup/kubepods/pod1/c1", "2 /sys/fs/cgroup/kubepods/pod1",
                                   "2 /sys/fs/cgroup/kubepods", "2 /sys/fs/cgroup"});
    CHECK(listed(cgroup_dirs("cpu", "0::/\n", "700 600 0:26 / /sys/fs/cgroup ro - cgroup2 cgroup rw\n")) ==
          std::vector<std::string>{"2 /sys/fs/cgroup"});  // a container's namespace: its cgroup is the root
  }
  SUBCASE("cgroup v1: the controller's own hierarchy, joined with others or alone") {
    const char* mounts =
        "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
        "34 31 0:31 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
    const char* cgroups = "6:memory:/user/job7\n5:cpuset:/\n4:cpu,cpuacct:/docker/abc\n0::/\n";
    CHECK(listed(cgroup_dirs("cpu", cgroups, mounts)) ==
          std::vector<std::string>{"1 /sys/fs/cgroup/cpu,cpuacct/docker/abc", "1 /sys/fs/cgroup/cpu,cpuacct/docker",
                                   "1 /sys/fs/cgroup/cpu,cpuacct"});
    CHECK(listed(cgroup_dirs("memory", cgroups, mounts)) ==
          std::vector<std::string>{"1 /sys/fs/cgroup/memory/user/job7", "1 /sys/fs/cgroup/memory/user",
                                   "1 /sys/fs/cgroup/memory"});
    // mounted from the container's own directory
    CHECK(listed(cgroup_dirs("cpu", "4:cpu,cpuacct:/docker/abc\n",
                             "40 39 0:29 /docker/abc /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu,cpuacct\n")) ==
          std::vector<std::string>{"1 /sys/fs/cgroup/cpu"});
    // "cpuacct" is not "cpu"; a mount that does not show the process's cgroup gives no directory
    CHECK(cgroup_dirs("cpu", "3:cpuacct:/a\n", "33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n").empty());
    CHECK(cgroup_dirs("cpu", "4:cpu:/a\n", "40 39 0:29 /other /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n").empty());
    CHECK(cgroup_dirs("memory", "", mounts).empty());
    // a mount of a directory whose name the process's cgroup merely starts with does not show it
    CHECK(cgroup_dirs("cpu", "4:cpu:/docker/abcdef\n",
                      "40 39 0:29 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n").empty());
    // a line that is not "ID:CONTROLLERS:PATH" is skipped
    CHECK(listed(cgroup_dirs("cpu", "4:cpu\ngarbage\n4:cpu:/a\n",
                             "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n")) ==
          std::vector<std::string>{"1 /sys/fs/cgroup/cpu/a", "1 /sys/fs/cgroup/cpu"});
  }
  SUBCASE("a hierarchy mounted twice (a bind mount) is read at its first mount only") {
    const char* mounts =
        "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
        "90 23 0:26 / /host/cgroup rw - cgroup2 cgroup2 rw\n";
    CHECK(listed(cgroup_dirs("memory", "0::/job\n", mounts)) ==
          std::vector<std::string>{"2 /sys/fs/cgroup/job", "2 /sys/fs/cgroup"});
  }
}

TEST_CASE("cgroup: the memory limit and the room under it, reclaimable page cache not counted as used") {
  using accel::cpu::detail::memory_limit;
  using accel::cpu::detail::parse_bytes;
  CHECK(parse_bytes("4294967296\n") == std::uint64_t{4294967296});
  CHECK(parse_bytes("max\n") == std::nullopt);
  CHECK(parse_bytes("") == std::nullopt);
  CHECK(parse_bytes("12x") == std::nullopt);
  CHECK(parse_bytes("123 \n") == std::uint64_t{123});  // trailing blanks and newlines
  CHECK(parse_bytes("-1") == std::nullopt);
  const FakeHierarchy h;
  SUBCASE("v2: memory.max, memory.current, memory.stat's inactive_file; the tightest along the path") {
    h.write("a/b/memory.max", "max\n");
    h.write("a/b/memory.current", "100000000\n");
    h.write("a/memory.max", "1000000000\n");
    h.write("a/memory.current", "600000000\n");
    h.write("a/memory.stat", "anon 300000000\nfile 300000000\nactive_file 100000000\ninactive_file 200000000\n");
    h.write("memory.max", "2000000000\n");
    h.write("memory.current", "1900000000\n");
    const auto m = memory_limit({{2, h.at("a/b")}, {2, h.at("a")}, {2, h.at("")}});
    REQUIRE(m.has_value());
    CHECK(m->limit == 1000000000);
    CHECK(m->room == 100000000);  // the root's: 2e9 - 1.9e9 (a's: 1e9 - (6e8 - 2e8) = 6e8)
    CHECK(memory_limit({{2, h.at("a/b")}}) == std::nullopt);  // "max": no limit
    // the least room wherever it is along the path (here the leaf's), the smallest limit elsewhere
    h.write("a/b/memory.max", "1500000000\n");
    h.write("a/b/memory.current", "1450000000\n");
    h.write("memory.current", "100000000\n");
    const auto leaf = memory_limit({{2, h.at("a/b")}, {2, h.at("a")}, {2, h.at("")}});
    REQUIRE(leaf.has_value());
    CHECK(leaf->limit == 1000000000);
    CHECK(leaf->room == 50000000);
  }
  SUBCASE("v2: no memory.current counts as nothing used; page cache above the usage leaves the whole limit") {
    h.write("a/memory.max", "1000000000\n");
    CHECK(memory_limit({{2, h.at("a")}})->room == 1000000000);
    h.write("a/memory.current", "100000000\n");
    h.write("a/memory.stat", "inactive_file 300000000\n");
    CHECK(memory_limit({{2, h.at("a")}})->room == 1000000000);
  }
  SUBCASE("v1: memory.limit_in_bytes (2^63 rounded to pages: none), usage_in_bytes, total_inactive_file") {
    h.write("a/memory.limit_in_bytes", "314572800\n");
    h.write("a/memory.usage_in_bytes", "104857600\n");
    h.write("a/memory.stat", "cache 52428800\ninactive_file 1\ntotal_inactive_file 52428800\n");
    h.write("memory.limit_in_bytes", "9223372036854771712\n");
    h.write("memory.usage_in_bytes", "9000000000\n");
    const auto m = memory_limit({{1, h.at("a")}, {1, h.at("")}});
    REQUIRE(m.has_value());
    CHECK(m->limit == 314572800);
    CHECK(m->room == 314572800 - (104857600 - 52428800));
    h.write("a/memory.usage_in_bytes", "400000000\n");  // over the limit (cache): no room, never negative
    h.write("a/memory.stat", "total_inactive_file 0\n");
    CHECK(memory_limit({{1, h.at("a")}})->room == 0);
    CHECK(memory_limit({{1, h.at("")}}) == std::nullopt);  // 2^63 rounded down to pages: no limit
  }
}

TEST_CASE("cgroup: the CPU quota, the tightest along the path, and the directory that sets it") {
  using accel::cpu::detail::cpu_quota;
  using accel::cpu::detail::parse_cfs_quota;
  using accel::cpu::detail::parse_cpu_max;
  CHECK(parse_cpu_max("max 100000") == std::nullopt);
  CHECK(parse_cpu_max("150000 100000").value() == doctest::Approx(1.5));
  CHECK(parse_cpu_max("400000 100000\n").value() == doctest::Approx(4.0));
  CHECK(parse_cpu_max("") == std::nullopt);
  CHECK(parse_cpu_max("abc 100000") == std::nullopt);
  CHECK(parse_cpu_max("100000 0") == std::nullopt);
  CHECK(parse_cpu_max("0 100000") == std::nullopt);
  CHECK(parse_cpu_max("150000x 100000") == std::nullopt);
  CHECK(parse_cfs_quota("-1", "100000") == std::nullopt);
  CHECK(parse_cfs_quota("50000", "100000").value() == doctest::Approx(0.5));
  const FakeHierarchy h;
  h.write("a/cpu.max", "200000 100000\n");
  h.write("a/b/cpu.max", "max 100000\n");
  h.write("cpu.max", "800000 100000\n");
  const auto q = cpu_quota({{2, h.at("a/b")}, {2, h.at("a")}, {2, h.at("")}});
  struct stat a {};
  REQUIRE(stat(h.at("a").c_str(), &a) == 0);
  REQUIRE(q.has_value());
  CHECK(q->cpus == doctest::Approx(2.0));
  CHECK(q->group == static_cast<std::uint64_t>(a.st_ino));
  h.write("a/cpu.cfs_quota_us", "-1\n");
  h.write("a/cpu.cfs_period_us", "100000\n");
  h.write("cpu.cfs_quota_us", "300000\n");
  h.write("cpu.cfs_period_us", "100000\n");
  const auto v1 = cpu_quota({{1, h.at("a")}, {1, h.at("")}});
  REQUIRE(v1.has_value());
  CHECK(v1->cpus == doctest::Approx(3.0));
  CHECK(cpu_quota({{2, h.at("a/b")}}) == std::nullopt);
  // Two levels with the same quota: the one nearest the process sets it.
  h.write("a/b/cpu.max", "200000 100000\n");
  struct stat b {};
  REQUIRE(stat(h.at("a/b").c_str(), &b) == 0);
  const auto same = cpu_quota({{2, h.at("a/b")}, {2, h.at("a")}});
  REQUIRE(same.has_value());
  CHECK(same->group == static_cast<std::uint64_t>(b.st_ino));
}

TEST_CASE("cgroup: the host's memory figures stay within this process's memory limit") {
  const std::size_t total = accel::cpu::detail::physical_memory(), available = accel::cpu::detail::available_host_memory();
  CHECK(total > 0);
  CHECK(available <= total);
  if (const auto m = accel::cpu::detail::memory_limit()) {
    MESSAGE("memory limit " << m->limit << " B, room " << m->room << " B");
    CHECK(total <= m->limit);
    CHECK(available <= m->room + (std::size_t{64} << 20));  // read a moment apart: the room may have moved
  }
}
