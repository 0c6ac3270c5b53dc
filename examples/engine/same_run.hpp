// same_run.hpp — the ranks of a data-parallel run must be one run: the same model, data, schedule,
// checkpoint and collectives. mpirun gives every rank one command line, but a launcher script, an
// MPMD launch (`-np 1 engine A : -np 1 engine B`), a node's own copy of the data or its own view of
// --resume latest need not: a different --layers fails in the first collective with counts that do not
// match, a different --steps leaves the ranks that go on waiting for the one that stopped until the
// communicator's timeout (10 minutes), and a different --seed or data file trains on silently
// (torch's DDP checks its parameters' shapes across the ranks at construction for the same reason).
//
// shared_settings() lists what must be equal (resolved values: the batch triple as this rank count
// splits it, --deepspeed-config's values); check_same_run() compares them over the ranks at start-up,
// before anything is allocated but a few bytes for the exchange: one all-gather of a hash when they
// agree, and where they do not, the differing settings' values from every rank, so that every rank
// stops with the same error naming them (printed once, by rank 0). Settings that may differ per rank are left out: --threads,
// --streams (the ranks' collectives are the same whatever their lanes), --dispatch, --run-ahead (off
// on several ranks), --time and --stop-at (the ranks agree on stopping after every step), what rank 0
// alone does (--eval-every, --eval-batches, --print-every, --metrics, --sample, --prompt), --trace
// (one file per rank).
//
// check_shared_save() then makes sure --save is one directory for every rank (a checkpoint holds each
// rank's shard in the directory rank 0 publishes), found at start-up rather than at the first save.
#pragma once

#include "checkpoint.hpp"
#include "config.hpp"
#include "corpus.hpp"
#include "data_parallel.hpp"
#include "engine.hpp"
#include "writable.hpp"

#include <accel/accel.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace engine {

/// One setting every rank must share: its name as the user knows it (a flag), the text shown for its
/// value, and the text compared (the shown text unless given: a data file is compared by content).
struct SharedSetting {
  std::string name, shown, compared;
};

namespace detail {

inline std::string shortest(double x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

/// "0, 2-5, 7": ranks in ascending order, runs joined.
inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

/// Every rank's `mine` (the same byte count on each), in rank order.
template <class B>
std::vector<unsigned char> gather_bytes(B b, Ranks<B>& ranks, typename B::Stream& s, const std::vector<unsigned char>& mine) {
  const std::size_t n = mine.size(), all = n * static_cast<std::size_t>(ranks.size());
  std::vector<unsigned char> out(all);
  {
    accel::Buffer<std::uint8_t, B> buf(all, s);
    b.copy_async(typename B::StreamRef(s), buf.data() + n * static_cast<std::size_t>(ranks.rank()), mine.data(), n);
    ranks.all_gather(typename B::StreamRef(s), buf.data() + n * static_cast<std::size_t>(ranks.rank()), buf.data(), n,
                     accel::Dtype::uint8);
    b.copy_async(typename B::StreamRef(s), out.data(), buf.data(), all);
    s.synchronize();
  }
  b.empty_cache();  // the exchange's few bytes leave no cached segment in the run's reserved memory
  return out;
}

inline std::vector<unsigned char> words_bytes(const std::vector<std::uint64_t>& w) {
  std::vector<unsigned char> out(w.size() * 8);
  if (!w.empty()) std::memcpy(out.data(), w.data(), out.size());
  return out;
}

inline std::uint64_t word_at(const std::vector<unsigned char>& bytes, std::size_t i) {
  std::uint64_t w = 0;
  std::memcpy(&w, bytes.data() + i * 8, 8);
  return w;
}

}  // namespace detail

/// What every rank of the run must share, resolved (after resolve_batch and --deepspeed-config).
/// `resume`: the checkpoint this rank resumes from (its manifest), or null.
inline std::vector<SharedSetting> shared_settings(const Config& c, const Corpus& corpus, const CheckpointState* resume) {
  using detail::shortest;
  const auto on = [](bool v) { return std::string(v ? "on" : "off"); };
  const auto num = [](std::int64_t v) { return std::to_string(v); };
  std::vector<SharedSetting> s = {
      {"--size", c.size, {}},
      {"--layers", num(c.shape.layers), {}},
      {"--heads", num(c.shape.heads), {}},
      {"--width", num(c.shape.width), {}},
      {"--block", num(c.shape.block), {}},
      {"--dtype", c.dtype, {}},
      {"--global-batch", num(c.global_batch), {}},
      {"--batch (a rank's micro-batch)", num(c.batch), {}},
      {"--accum", num(c.accum), {}},
      {"--batch (the sequences the data generator draws at once)", num(c.draw_chunk), {}},
      {"--zero-stage", num(c.zero_stage), {}},
      {"--reduce-bucket-size", num(c.reduce_bucket), {}},
      {"--deterministic", on(c.deterministic), {}},
      {"--overlap", c.overlap, {}},
      {"--graph", on(c.graph), {}},
      {"--attention", c.attention, {}},
      {"--gelu-fusion", c.gelu_fusion, {}},
      {"--flash-backward", c.flash_backward, {}},
      {"--steps", num(c.steps), {}},
      {"--lr", shortest(c.lr), {}},
      {"--min-lr", shortest(c.min_lr), {}},
      {"--warmup", num(c.warmup), {}},
      {"--schedule", c.schedule, {}},
      {"--beta1", shortest(c.beta1), {}},
      {"--beta2", shortest(c.beta2), {}},
      {"Adam's eps (--deepspeed-config)", shortest(c.eps), {}},
      {"--weight-decay", shortest(c.weight_decay), {}},
      {"--clip", shortest(c.clip), {}},
      {"--dropout", shortest(c.dropout), {}},
      {"--seed", std::to_string(c.seed), {}},
      {"--loss-scale", c.loss_scale == 0 ? std::string("dynamic") : shortest(c.loss_scale), {}},
      {"--initial-scale-power", shortest(c.initial_scale_power), {}},
      {"--loss-scale-window", num(c.loss_scale_window), {}},
      {"--hysteresis", num(c.hysteresis), {}},
      {"--min-loss-scale", shortest(c.min_loss_scale), {}},
      {"--save", c.save.empty() ? std::string("(none)") : canonical_path(c.save).string(), {}},
      {"--save-every", num(c.save_every), {}},
      {"--keep-last", c.keep_last > 0 ? num(c.keep_last) : std::string("(all)"), {}},
  };
  {
    char hash[24];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(corpus.content_hash()));
    const std::string id = std::to_string(corpus.bytes()) + " bytes, content hash " + hash;
    s.push_back({"the data file's contents (--data)", canonical_path(corpus.path()).string() + ": " + id, id});
  }
  if (resume == nullptr) {
    s.push_back({"--resume", "(none)", {}});
  } else {
    std::string sums;  // the checkpoint's identity: its step and its tensor files' checksums
    for (const auto& [file, sum] : resume->checksums) sums += " " + file + "=" + detail::checksum_text(sum);
    s.push_back({"--resume", "the checkpoint of step " + std::to_string(resume->step), "step " + std::to_string(resume->step) + sums});
  }
  for (auto& x : s) {
    if (x.compared.empty()) x.compared = x.shown;
  }
  return s;
}

/// Collective over the ranks: returns when every rank has the same settings; else AgreedUsageError, the
/// same on every rank, naming each setting that differs and its value on each rank (up to four settings).
template <class B>
void check_same_run(B b, Ranks<B>& ranks, const std::vector<SharedSetting>& mine) {
  if (ranks.size() < 2) return;
  const auto hash = [](const SharedSetting& x) {
    const std::string t = x.name + '\0' + x.compared;
    return detail::fnv1a64(t.data(), t.size());
  };
  std::vector<std::uint64_t> each;
  std::uint64_t whole = detail::fnv1a64(nullptr, 0), names = whole;
  for (const auto& x : mine) {
    each.push_back(hash(x));
    whole = detail::fnv1a64(&each.back(), 8, whole);
    names = detail::fnv1a64(x.name.data(), x.name.size() + 1, names);  // with its '\0': "ab","c" is not "a","bc"
  }
  auto s = new_stream(b);
  const int n = ranks.size();
  // Per rank: how many settings, which (their names: the build), what they hold.
  constexpr std::size_t head = 3;
  const auto heads = detail::gather_bytes(b, ranks, s, detail::words_bytes({mine.size(), names, whole}));
  const auto at = [&](int r, std::size_t w) { return detail::word_at(heads, head * static_cast<std::size_t>(r) + w); };
  bool same = true;
  for (int r = 1; r < n; ++r) same = same && at(r, 2) == at(0, 2);
  if (same) return;
  for (int r = 1; r < n; ++r) {
    if (at(r, 1) != at(0, 1)) {  // other names (another count among them)
      const std::string what = at(r, 0) != at(0, 0) ? "rank 0 shares " + std::to_string(at(0, 0)) + " settings, rank " +
                                                         std::to_string(r) + " " + std::to_string(at(r, 0))
                                                   : "rank " + std::to_string(r) + "'s settings are named differently from rank 0's";
      throw AgreedUsageError("the ranks run different builds of the engine (" + what + "): launch the same binary on every rank");
    }
  }
  const std::size_t k = mine.size();
  const auto hashes = detail::gather_bytes(b, ranks, s, detail::words_bytes(each));
  std::vector<std::size_t> differ;  // the same on every rank: they all hold every rank's hashes
  for (std::size_t f = 0; f < k; ++f) {
    for (int r = 1; r < n; ++r) {
      if (detail::word_at(hashes, static_cast<std::size_t>(r) * k + f) != detail::word_at(hashes, f)) {
        differ.push_back(f);
        break;
      }
    }
  }
  if (differ.empty()) return;  // unreachable: the whole hash is made of these
  constexpr std::size_t named = 4, width = 160;  // settings whose values are exchanged; bytes of a value's text
  const std::size_t shown = std::min(differ.size(), named);
  std::vector<unsigned char> texts(shown * width, 0);
  for (std::size_t i = 0; i < shown; ++i) {
    std::string v = mine[differ[i]].shown;
    if (v.size() >= width) v = v.substr(0, width - 4) + "...";
    std::memcpy(texts.data() + i * width, v.data(), v.size());
  }
  const auto all = detail::gather_bytes(b, ranks, s, texts);
  std::string msg = "the ranks were not given the same run:";
  for (std::size_t i = 0; i < shown; ++i) {
    const std::size_t f = differ[i];
    std::vector<std::pair<std::uint64_t, std::vector<int>>> groups;  // ranks by the setting's value, in first-rank order
    std::vector<std::string> values;
    for (int r = 0; r < n; ++r) {
      const std::uint64_t h = detail::word_at(hashes, static_cast<std::size_t>(r) * k + f);
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == h; });
      if (g == groups.end()) {
        groups.push_back({h, {}});
        g = groups.end() - 1;
        const char* p = reinterpret_cast<const char*>(all.data() + (static_cast<std::size_t>(r) * shown + i) * width);
        values.emplace_back(p, strnlen(p, width));
      }
      g->second.push_back(r);
    }
    msg += std::string(i == 0 ? " " : "; ") + mine[f].name + " is ";
    for (std::size_t g = 0; g < groups.size(); ++g) {
      msg += (g == 0 ? "" : ", ") + values[g] + " (rank" + (groups[g].second.size() > 1 ? "s " : " ") +
             detail::rank_list(groups[g].second) + ")";
    }
  }
  if (differ.size() > shown) {
    msg += "; and " + std::to_string(differ.size() - shown) + " more:";
    for (std::size_t i = shown; i < differ.size(); ++i) msg += (i == shown ? " " : ", ") + mine[differ[i]].name;
  }
  msg += ". Every rank needs the same command line, data and checkpoint (mpirun gives one command line to every rank)";
  throw AgreedUsageError(msg);
}

/// Collective: --save must be one directory that every rank sees, since a checkpoint is one directory
/// holding every rank's shard (rank 0 creates it and publishes it once each rank has written there). On
/// machines without a shared file system a node-local --save is found only at the first save, after
/// --save-every steps or the whole run: so rank 0 makes a probe file in the directory (or in its nearest
/// existing ancestor, before the directory is made) and the other ranks look for it, up to 2 s (a
/// network file system's caches). AgreedUsageError naming the ranks that do not see it.
template <class B>
void check_shared_save(B b, Ranks<B>& ranks, const std::string& save) {
  namespace fs = std::filesystem;
  if (ranks.size() < 2 || save.empty()) return;
  fs::path dir = canonical_path(save);
  std::error_code ec;
  while (!fs::is_directory(dir, ec) && dir != dir.parent_path()) dir = dir.parent_path();
  constexpr std::size_t width = 256;
  std::vector<unsigned char> mine(width, 0);  // rank 0: "+" and the probe's name, or "-" and why it failed
  fs::path probe;
  std::string text;
  if (ranks.rank() == 0) {
    const auto token = detail::unique_token();
    char name[64];
    std::snprintf(name, sizeof name, ".engine-shared-probe.%d.%08x", token[0], static_cast<unsigned>(token[1]));
    probe = dir / name;
    std::ofstream out(probe, std::ios::binary | std::ios::trunc);
    out << name;
    out.close();
    text = out ? std::string("+") + name : "-cannot write " + probe.string() + ": " + std::strerror(errno);
    if (text.size() >= width) text.resize(width - 1);
    std::memcpy(mine.data(), text.data(), text.size());
  }
  auto s = new_stream(b);
  const auto names = detail::gather_bytes(b, ranks, s, mine);
  const std::string from0(reinterpret_cast<const char*>(names.data()), strnlen(reinterpret_cast<const char*>(names.data()), width));
  if (from0.empty() || from0[0] != '+') throw AgreedUsageError("--save " + save + ": rank 0 " + from0.substr(1));
  const std::string name = from0.substr(1);
  bool seen = ranks.rank() == 0;
  for (int tries = 0; !seen && tries < 100; ++tries) {  // 2 s
    std::ifstream in(dir / name, std::ios::binary);
    std::string got;
    seen = in && std::getline(in, got) && got == name;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto flags = detail::gather_bytes(b, ranks, s, std::vector<unsigned char>{static_cast<unsigned char>(seen ? 1 : 0)});
  if (ranks.rank() == 0) fs::remove(probe, ec);
  std::vector<int> blind;
  for (int r = 0; r < ranks.size(); ++r) {
    if (flags[static_cast<std::size_t>(r)] == 0) blind.push_back(r);
  }
  if (!blind.empty()) {
    throw AgreedUsageError("--save " + save + ": rank" + (blind.size() > 1 ? "s " : " ") + detail::rank_list(blind) +
                           " of " + std::to_string(ranks.size()) + " cannot see the file rank 0 wrote in " + dir.string() +
                           ": a checkpoint is one directory holding every rank's shard, so --save must be on a file "
                           "system every rank shares (NFS, Lustre, GPFS), not a node's own disk");
  }
}

}  // namespace engine
