// accel/cpu/detail/cgroup.hpp — the limits a process's cgroups put on it: the memory limit and the CPU
// quota. A container's memory and CPU limits (Kubernetes, `docker run --memory 4g --cpus 4`) are cgroup
// settings: /proc/meminfo and the affinity mask still show the whole machine, and the kernel kills the
// group's processes past the memory limit (SIGKILL, no message) and throttles them past the CPU quota.
//
// cgroup v2 (one hierarchy, "0::/path" in /proc/self/cgroup: memory.max, memory.current, cpu.max) and
// v1 (a hierarchy per controller, "4:memory:/path": memory.limit_in_bytes, memory.usage_in_bytes,
// cpu.cfs_quota_us / cpu.cfs_period_us). A limit binds the process's cgroup and every ancestor's
// subtree, so each is read from the process's directory up to the hierarchy's mount point, found in
// /proc/self/mountinfo (a container's mount may show its own cgroup as the root).
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace accel::cpu::detail {

/// A directory of a cgroup hierarchy, and the hierarchy's version (1 or 2).
struct CgroupDir {
  int version;
  std::string path;
};

/// The directories of `controller`'s hierarchies that bind this process, each hierarchy's leaf first up
/// to its mount point, from the texts of /proc/self/cgroup and /proc/self/mountinfo.
inline std::vector<CgroupDir> cgroup_dirs(std::string_view controller, std::string_view proc_cgroup,
                                          std::string_view mountinfo) {
  const auto lines = [](std::string_view text) {
    std::vector<std::string> out;
    std::istringstream in{std::string(text)};
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  const auto has_token = [](std::string_view list, std::string_view token) {
    for (std::size_t at = 0; at <= list.size();) {
      const std::size_t comma = std::min(list.find(',', at), list.size());
      if (list.substr(at, comma - at) == token) return true;
      at = comma + 1;
    }
    return false;
  };
  std::vector<CgroupDir> dirs;
  for (const std::string& entry : lines(proc_cgroup)) {
    const std::size_t c1 = entry.find(':'), c2 = c1 == std::string::npos ? c1 : entry.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    const std::string_view controllers = std::string_view(entry).substr(c1 + 1, c2 - c1 - 1);
    const std::string path = entry.substr(c2 + 1);
    const int version = entry.compare(0, c1, "0") == 0 && controllers.empty() ? 2 : 1;
    if (version == 1 && !has_token(controllers, controller)) continue;
    for (const std::string& m : lines(mountinfo)) {
      // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
      std::istringstream f(m);
      std::string id, parent, dev, root, point, word, fstype, source, super;
      if (!(f >> id >> parent >> dev >> root >> point)) continue;
      while (f >> word && word != "-") {
      }
      if (!(f >> fstype >> source >> super)) continue;
      if (version == 2 ? fstype != "cgroup2" : (fstype != "cgroup" || !has_token(super, controller))) continue;
      std::string rel;
      if (root == "/") {
        rel = path;
      } else if (path.compare(0, root.size(), root) == 0 && (path.size() == root.size() || path[root.size()] == '/')) {
        rel = path.substr(root.size());
      } else {
        continue;  // this mount does not show the process's cgroup
      }
      std::string dir = point + (rel == "/" ? "" : rel);
      while (dir.size() >= point.size()) {  // up to the mount point: the parent of `point` is shorter
        dirs.push_back({version, dir});
        dir = dir.substr(0, dir.rfind('/'));
      }
      break;
    }
  }
  return dirs;
}

inline std::string read_text(const char* file) {
  std::ifstream in(file);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// This process's directories of `controller` ("memory", "cpu"); empty where /proc cannot be read.
inline std::vector<CgroupDir> cgroup_dirs(std::string_view controller) {
  return cgroup_dirs(controller, read_text("/proc/self/cgroup"), read_text("/proc/self/mountinfo"));
}

/// The first line of a file, or nullopt.
inline std::optional<std::string> read_line(const std::string& file) {
  std::ifstream in(file);
  std::string text;
  if (!in || !std::getline(in, text)) return std::nullopt;
  return text;
}

/// A whole number of bytes ("4294967296"); nullopt for "max", an empty or other text.
inline std::optional<std::uint64_t> parse_bytes(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;  // "" and "max" too
  return v;
}

/// A field of a memory.stat file ("inactive_file"), 0 where it is missing.
inline std::uint64_t memory_stat_field(const std::string& file, std::string_view field) {
  std::ifstream in(file);
  std::string name;
  std::uint64_t value = 0;
  while (in >> name >> value) {
    if (name == field) return value;
  }
  return 0;
}

/// The memory limits along the directories: the smallest limit, and the least room left under any of
/// them (its limit minus what its subtree uses, page cache it can drop not counted: inactive file pages,
/// as the kernel reclaims them before it kills). v1 reports "no limit" as a number near 2^63.
struct MemoryLimit {
  std::uint64_t limit = 0;
  std::uint64_t room = 0;
};
inline std::optional<MemoryLimit> memory_limit(const std::vector<CgroupDir>& dirs) {
  constexpr std::uint64_t no_limit = std::uint64_t{1} << 60;
  std::optional<MemoryLimit> best;
  for (const CgroupDir& d : dirs) {
    const bool v2 = d.version == 2;
    const auto limit_text = read_line(d.path + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    const std::optional<std::uint64_t> limit = limit_text ? parse_bytes(*limit_text) : std::nullopt;
    if (!limit || *limit >= no_limit) continue;
    const auto usage_text = read_line(d.path + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
    std::uint64_t used = usage_text ? parse_bytes(*usage_text).value_or(0) : 0;
    const std::uint64_t cache = memory_stat_field(d.path + "/memory.stat", v2 ? "inactive_file" : "total_inactive_file");
    used = used > cache ? used - cache : 0;
    const std::uint64_t room = *limit > used ? *limit - used : 0;
    if (!best) best = MemoryLimit{*limit, room};
    best->limit = std::min(best->limit, *limit);
    best->room = std::min(best->room, room);
  }
  return best;
}

/// This process's memory limit, read now; nullopt where none binds it (or the files cannot be read).
/// The directories are found once per process.
inline std::optional<MemoryLimit> memory_limit() noexcept {
  try {
    static const std::vector<CgroupDir> dirs = cgroup_dirs("memory");
    return memory_limit(dirs);
  } catch (...) {
    return std::nullopt;
  }
}

/// A cgroup's CPU limit, in CPUs: cgroup v2's cpu.max ("150000 100000"; "max 100000": none), or v1's
/// cpu.cfs_quota_us and cpu.cfs_period_us (-1: none). nullopt where there is none or the text is not one.
inline std::optional<double> parse_cpu_max(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || period <= 0) return std::nullopt;
  long long q = 0;
  const auto [end, ec] = std::from_chars(quota.data(), quota.data() + quota.size(), q);
  if (ec != std::errc{} || end != quota.data() + quota.size() || q <= 0) return std::nullopt;  // "max" too
  return static_cast<double>(q) / static_cast<double>(period);
}
inline std::optional<double> parse_cfs_quota(std::string_view quota_us, std::string_view period_us) {
  return parse_cpu_max(std::string(quota_us) + " " + std::string(period_us));
}

/// The smallest CPU quota along the directories, and an id of the cgroup that sets it (its directory's
/// inode), so that processes in one cgroup can tell that they share it.
struct CpuQuota {
  double cpus = 0;
  std::uint64_t group = 0;
};
inline std::optional<CpuQuota> cpu_quota(const std::vector<CgroupDir>& dirs) {
  std::optional<CpuQuota> best;
  for (const CgroupDir& d : dirs) {
    std::optional<double> cpus;
    if (d.version == 2) {
      if (const auto t = read_line(d.path + "/cpu.max")) cpus = parse_cpu_max(*t);
    } else {
      const auto q = read_line(d.path + "/cpu.cfs_quota_us"), p = read_line(d.path + "/cpu.cfs_period_us");
      if (q && p) cpus = parse_cfs_quota(*q, *p);
    }
    if (!cpus || (best && best->cpus <= *cpus)) continue;
    struct stat st {};
    best = CpuQuota{*cpus, stat(d.path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0};
  }
  return best;
}

/// This process's CPU quota, read now; nullopt where none binds it.
inline std::optional<CpuQuota> cpu_quota() noexcept {
  try {
    return cpu_quota(cgroup_dirs("cpu"));
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace accel::cpu::detail
