// checkpoint_space.hpp — what checkpoints take on disk: the bytes one checkpoint needs, the bytes free
// where --save lies (checked at start-up, so a run that cannot save is refused before it trains rather
// than at its first save), and --keep-last, which removes older step directories after each save (as
// Hugging Face's save_total_limit) so that periodic saves of a long run do not fill the disk.
#pragma once

#include "checkpoint.hpp"
#include "checkpoint_leftovers.hpp"
#include "layout.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <sys/statvfs.h>
#include <unistd.h>

namespace engine {

/// The bytes one checkpoint takes: params.f32 (the whole model in fp32), each rank's shard (its
/// master weights, exp_avg and exp_avg_sq: 12 bytes an element), a block a file for the rounding of
/// file systems, and a bound on the manifest (a line per tensor view, the vocabulary, the settings).
inline std::uint64_t checkpoint_bytes(const ParamLayout& layout, int ranks, std::int64_t shard) {
  const auto r = static_cast<std::uint64_t>(ranks);
  const std::uint64_t tensors = static_cast<std::uint64_t>(layout.total) * 4 + r * static_cast<std::uint64_t>(shard) * 12;
  const std::uint64_t files = 2 + 2 * r;  // params.f32, manifest.txt, each rank's shard and its checksum
  return tensors + files * 4096 + (1u << 20) + static_cast<std::uint64_t>(layout.views.size()) * 256;
}

/// The bytes this process may still write on the file system that holds `path` (or, where it does not
/// exist yet, its nearest existing ancestor): statvfs's blocks free to unprivileged users, or to root
/// all free blocks. nullopt where the file system reports no sizes (some FUSE and network file systems
/// report zero blocks) or cannot be asked.
inline std::optional<std::uint64_t> free_bytes(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path at = fs::absolute(path, ec);
  if (ec) return std::nullopt;
  while (!fs::exists(fs::status(at, ec)) && at != at.parent_path()) at = at.parent_path();
  struct statvfs st {};
  if (::statvfs(at.c_str(), &st) != 0 || st.f_blocks == 0) return std::nullopt;
  const auto blocks = ::geteuid() == 0 ? st.f_bfree : st.f_bavail;
  return static_cast<std::uint64_t>(blocks) * static_cast<std::uint64_t>(st.f_frsize);
}

/// How many checkpoints a run writes into --save: one every `every` steps (0: none) after step `from`
/// and before its last step `last`, and one at the end.
inline std::int64_t checkpoints_written(std::int64_t from, std::int64_t last, std::int64_t every) {
  if (every <= 0 || last <= from) return 1;
  return (last - 1) / every - from / every + 1;
}

/// "" when `free` holds one checkpoint of `need` bytes (or the file system does not say), else why not.
inline std::string save_space_error(const std::string& save, std::uint64_t need, std::optional<std::uint64_t> free) {
  if (!free || *free >= need) return {};
  return "--save " + save + ": a checkpoint of this model takes " + detail::bytes_text(need) + " and the file system there has " +
         detail::bytes_text(*free) + " free";
}

/// "" or a warning: the checkpoints a run holds at once in --save need more than `free` plus
/// `reclaimable` (the complete checkpoints already there, which --keep-last may remove). Without
/// --keep-last that is every one of the `count` it writes; with it, up to keep_last + 1 (a save writes
/// the new one before it removes the oldest).
inline std::string save_space_warning(const std::string& save, std::uint64_t need, std::int64_t count, std::int64_t keep_last,
                                      std::optional<std::uint64_t> free, std::uint64_t reclaimable = 0) {
  if (!free) return {};
  const std::int64_t held = keep_last > 0 ? std::min(count, keep_last + 1) : count;
  const std::uint64_t total = need * static_cast<std::uint64_t>(held);
  const std::uint64_t room = *free + (keep_last > 0 ? reclaimable : 0);
  if (held < 2 || total <= room) return {};
  std::string text = "--save " + save + ": ";
  if (keep_last > 0) {
    text += "--keep-last " + std::to_string(keep_last) + " holds up to " + std::to_string(held) + " checkpoints of " +
            detail::bytes_text(need) + " at once (" + detail::bytes_text(total) +
            ": a save writes the new one before it removes the oldest)";
  } else {
    text += "this run writes " + std::to_string(count) + " checkpoints of " + detail::bytes_text(need) + " (" +
            detail::bytes_text(total) + ")";
  }
  text += " and the file system there has " + detail::bytes_text(*free) + " free";
  if (keep_last > 0 && reclaimable > 0) text += " (and " + detail::bytes_text(reclaimable) + " in checkpoints already there)";
  if (keep_last == 0) text += "; --keep-last N keeps only the newest N";
  return text;
}

/// What a save that ran out of space adds to its error: what a checkpoint takes, what is free, what the
/// checkpoints already in --save take, and (without --keep-last) the flag that would have made room.
inline std::string out_of_space_hint(std::uint64_t need, std::optional<std::uint64_t> free, std::uint64_t in_save,
                                     std::int64_t keep_last) {
  std::string text = " (a checkpoint takes " + detail::bytes_text(need);
  if (free) text += "; the file system has " + detail::bytes_text(*free) + " free";
  if (in_save > 0) text += ", the checkpoints already there take " + detail::bytes_text(in_save);
  if (keep_last == 0) text += "; --keep-last N keeps only the newest N";
  return text + ")";
}

/// "" or a warning: a run that starts afresh (no --resume) in a --save that holds checkpoints already,
/// up to `newest` (a restart that forgot --resume latest, or another run's directory): its checkpoints go
/// beside them, and `latest` will name this run's.
inline std::string fresh_run_warning(const std::string& save, std::optional<std::int64_t> newest) {
  if (!newest) return {};
  const std::string n = std::to_string(*newest);
  return "--save " + save + " holds checkpoints up to step " + n + " and this run starts afresh (no --resume): its " +
         "checkpoints go beside them, replacing any of the same step, and latest will name this run's; --resume latest " +
         "continues from step " + n;
}

namespace detail {

/// The complete step directories of `save` (step_<digits>, not a link, holding a manifest) as (step,
/// name), newest first; `ec` set where `save` cannot be listed (empty where it does not exist).
inline std::vector<std::pair<std::int64_t, std::string>> complete_steps(const std::filesystem::path& save, std::error_code& ec) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::int64_t, std::string>> steps;
  for (fs::directory_iterator it(save, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    const auto step = step_of_dir_name(n);
    std::error_code e;
    if (step && fs::is_directory(it->symlink_status(e)) && fs::is_regular_file(fs::symlink_status(it->path() / "manifest.txt", e))) {
      steps.emplace_back(*step, n);
    }
  }
  if (ec == std::errc::no_such_file_or_directory) ec.clear();
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return steps;
}

}  // namespace detail

/// The bytes of the complete step directories already in `save` (0 where it does not exist).
inline std::uint64_t checkpoints_bytes_in(const std::filesystem::path& save) {
  std::error_code ec;
  std::uint64_t bytes = 0;
  for (const auto& step : detail::complete_steps(save, ec)) bytes += detail::tree_bytes(save / step.second);
  return bytes;
}

/// What prune_checkpoints did: the step directories it removed, with their sizes, and the warnings of
/// what it could not remove.
struct PruneReport {
  std::vector<std::string> removed;   // "step_00000002 (13.0 MiB)"
  std::vector<std::string> warnings;  // whole sentences
};

/// --keep-last N: removes the complete step directories of `save` (step_<digits> holding a manifest)
/// beyond the N with the highest steps; never `keep` (the checkpoint just written) nor the one `latest`
/// names, which stay even where a resumed run went back to an earlier step. Each goes by one rename to
/// `.pruned.<name>.<pid>.<random>` (a reader sees the checkpoint whole or not at all), then is removed; a
/// removal cut short leaves that directory, which the next save's scan for leftovers removes. Under
/// <save>/.lock, as saves publish and scan. Rank 0 calls it once a save is published; it never throws
/// (a checkpoint left behind costs disk space, never the run).
inline PruneReport prune_checkpoints(const std::filesystem::path& save, std::int64_t keep_last, const std::filesystem::path& keep) noexcept {
  namespace fs = std::filesystem;
  PruneReport report;
  if (keep_last <= 0) return report;
  try {
    const detail::SaveLock lock(save);
    std::error_code ec;
    const fs::path latest = fs::read_symlink(save / "latest", ec);
    const std::string latest_name = ec ? std::string() : latest.filename().string();
    const auto steps = detail::complete_steps(save, ec);
    if (ec) {
      report.warnings.push_back("cannot list " + save.string() + " for --keep-last: " + ec.message());
      return report;
    }
    const std::string kept = keep.filename().string();
    for (std::size_t i = static_cast<std::size_t>(std::min<std::int64_t>(keep_last, static_cast<std::int64_t>(steps.size())));
         i < steps.size(); ++i) {
      const std::string& name = steps[i].second;
      if (name == kept || name == latest_name) continue;
      const auto token = detail::unique_token();
      char suffix[40];
      std::snprintf(suffix, sizeof suffix, "%d.%08x", token[0], static_cast<unsigned>(token[1]));
      const fs::path from = save / name, to = save / (".pruned." + name + "." + suffix);
      const std::uintmax_t bytes = detail::tree_bytes(from);
      if (::rename(from.c_str(), to.c_str()) != 0) {
        report.warnings.push_back("cannot remove " + from.string() + " (--keep-last " + std::to_string(keep_last) +
                                  "): cannot rename it: " + std::strerror(errno));
        continue;
      }
      std::error_code e;
      fs::remove_all(to, e);
      if (e) {
        report.warnings.push_back("cannot remove " + to.string() + " (" + name + ", --keep-last " + std::to_string(keep_last) +
                                  "): " + e.message() + "; the next save tries again");
      }
      report.removed.push_back(name + " (" + detail::bytes_text(bytes) + ")");
    }
  } catch (const std::exception& e) {
    report.warnings.push_back(std::string("--keep-last in ") + save.string() + ": " + e.what());
  }
  return report;
}

}  // namespace engine
