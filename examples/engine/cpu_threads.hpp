// cpu_threads.hpp — how many CPU threads a rank uses when --threads is not given.
//
// std::thread::hardware_concurrency() counts the machine's CPUs, not the ones this process may run
// on: under `taskset -c 0`, a container's cpuset, Slurm's or mpirun's binding (Open MPI binds each
// rank to a core when it launches 2 or fewer), or 8 ranks unbound on one 64-core machine, a thread
// per machine CPU in every rank puts several threads on each core, and the MFU's measured peak then
// counts cores that are not there. So, as torch and OpenMP do, OMP_NUM_THREADS first (torchrun sets 1
// per process, DeepSpeed's --bind_cores_to_rank the cores of each); else the CPUs of this process's
// affinity mask, shared by the ranks on this machine whose masks overlap it (`mpirun --bind-to none
// -np 2` on 16 CPUs: 8 each; bound to disjoint cores: each its own), and no more than its cgroup's CPU
// quota allows (a Kubernetes CPU limit, `docker run --cpus 4`: the mask still shows every CPU of the
// node, but the kernel throttles the group beyond the quota), shared by the ranks in that cgroup.
#pragma once

#include "config.hpp"

#include <accel/cpu/detail/cgroup.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace engine {

/// The thread count a rank runs its kernels and BLAS with, and where it came from, for the start-up line.
struct CpuThreads {
  int count = 1;
  std::string why;  ///< "--threads", "OMP_NUM_THREADS=1", "the 2 CPUs this process may run on", ...
};

namespace detail {

/// OMP_NUM_THREADS's first entry (OpenMP's syntax: a positive integer, or a list "4,2" of nested
/// levels' counts); UsageError naming the variable for anything else (OpenMP warns and ignores it).
inline int parse_omp_num_threads(std::string_view text) {
  const auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  const std::string_view first = trim(text.substr(0, text.find(',')));
  long long n = 0;
  const auto [end, ec] = std::from_chars(first.data(), first.data() + first.size(), n);
  if (first.empty() || ec != std::errc{} || end != first.data() + first.size() || n < 1 || n > 4096) {
    throw UsageError("OMP_NUM_THREADS='" + std::string(text.substr(0, 40)) +
                     "' is not a thread count (a positive integer up to 4096, or a list such as 4,2 whose first "
                     "entry is taken); unset it, or give --threads N");
  }
  return static_cast<int>(n);
}

/// The CPUs this process may run on (sched_getaffinity) as a bit set of 64-bit words, one bit per CPU
/// number; empty where the mask cannot be read (more CPUs than a cpu_set_t holds).
inline std::vector<std::uint64_t> affinity_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return {};
  std::vector<std::uint64_t> words(CPU_SETSIZE / 64, 0);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) words[static_cast<std::size_t>(c / 64)] |= std::uint64_t{1} << (c % 64);
  }
  return words;
}

inline int popcount(const std::vector<std::uint64_t>& words) {
  int n = 0;
  for (const std::uint64_t w : words) n += __builtin_popcountll(w);
  return n;
}

/// The CPUs this process may run on: its affinity mask's, else the machine's.
inline int usable_cpus() {
  const int n = popcount(affinity_mask());
  return n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

/// Which machine (kernel) this process runs on: the kernel's boot id, which containers on one host
/// share (their CPUs too), else the host name. FNV-1a, for comparing across ranks.
inline std::uint64_t machine_key() {
  std::string id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  if (!std::getline(in, id) || id.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) id = host;
  }
  std::uint64_t h = 1469598103934665603ull;
  for (const unsigned char ch : id) h = (h ^ ch) * 1099511628211ull;
  return h;
}

/// One rank's machine and CPUs, as the ranks exchange them: the machine key, the CPU quota (in
/// millionths of a CPU; 0: none) and the id of the cgroup that sets it, then the affinity mask.
inline constexpr std::size_t placement_header = 3;
inline std::vector<std::uint64_t> placement_words() {
  std::vector<std::uint64_t> w(placement_header + CPU_SETSIZE / 64, 0);
  w[0] = machine_key();
  if (const auto q = accel::cpu::detail::cpu_quota()) {
    w[1] = static_cast<std::uint64_t>(std::llround(q->cpus * 1e6));
    w[2] = q->group;
  }
  const std::vector<std::uint64_t> mask = affinity_mask();
  std::copy(mask.begin(), mask.end(), w.begin() + placement_header);
  return w;
}

/// "1.5 CPUs", "2 CPUs", "1 CPU".
inline std::string format_cpus(double cpus) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", cpus);
  return std::string(text) + (cpus == 1.0 ? " CPU" : " CPUs");
}

/// The threads for rank `me` from every rank's placement_words() (concatenated, in rank order): its
/// CPUs divided among the ranks on its machine whose CPUs overlap them (itself included), and no more
/// than its cgroup's quota divided among the ranks in that cgroup; at least 1. A rank whose mask could
/// not be read counts as overlapping every rank of its machine.
inline CpuThreads threads_from_placements(const std::vector<std::uint64_t>& all, int ranks, int me, int fallback_cpus) {
  const std::size_t n = all.size() / static_cast<std::size_t>(ranks), h = placement_header;
  const auto at = [&](int r, std::size_t i) { return all[static_cast<std::size_t>(r) * n + i]; };
  int mine = 0;
  for (std::size_t i = h; i < n; ++i) mine += __builtin_popcountll(at(me, i));
  const bool known = mine > 0;
  if (!known) mine = fallback_cpus;
  int sharing = 0, in_group = 0;
  for (int r = 0; r < ranks; ++r) {
    if (at(r, 0) != at(me, 0)) continue;
    bool overlap = !known;
    std::uint64_t theirs = 0;
    for (std::size_t i = h; i < n; ++i) {
      theirs |= at(r, i);
      overlap = overlap || (at(r, i) & at(me, i)) != 0;
    }
    if (overlap || theirs == 0) ++sharing;
    if (at(r, 1) == at(me, 1) && at(r, 2) == at(me, 2)) ++in_group;
  }
  sharing = std::max(sharing, 1);
  const std::string cpus = "the " + std::to_string(mine) + (mine > 1 ? " CPUs" : " CPU");
  CpuThreads t;
  t.count = std::max(1, mine / sharing);
  t.why = sharing > 1 ? cpus + " this rank may run on, shared by " + std::to_string(sharing) + " ranks on this machine"
                      : cpus + " this process may run on";
  if (at(me, 1) > 0) {  // a CPU quota: its share, rounded up (the group's threads may use the whole quota)
    const double quota = static_cast<double>(at(me, 1)) / 1e6;
    const int share = std::max(1, static_cast<int>(std::ceil(quota / std::max(in_group, 1) - 1e-9)));
    if (share < t.count) {
      t.count = share;
      t.why = "its cgroup's CPU quota of " + format_cpus(quota) +
              (in_group > 1 ? ", shared by " + std::to_string(in_group) + " ranks" : std::string()) + " (" + cpus +
              " this process may run on)";
    }
  }
  return t;
}

/// Where a thread count the user gave (`given`: "--threads 4", "OMP_NUM_THREADS=4") is more than
/// this rank's share of the CPUs: a warning saying so (the threads then take turns on the cores, and
/// the measured peak counts no more cores than there are); else "".
inline std::string oversubscription_warning(const std::string& given, int threads, const CpuThreads& share) {
  if (threads <= share.count) return "";
  return given + " runs " + std::to_string(threads) + " threads where this rank has " + std::to_string(share.count) +
         " CPU" + (share.count > 1 ? "s" : "") + " (" + share.why +
         "): they will take turns on the cores; leave it out to run one per CPU";
}

}  // namespace detail

}  // namespace engine
