// report.hpp — what the user sees: progress lines, the metrics CSV, the final summary table.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace engine {

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// 12345678 -> "12,345,678".
inline std::string grouped(double v) {
  const long long n = std::llround(v);
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

/// The median of `values` (0 for none); of an even count, the mean of the middle two — as Python's
/// statistics.median (the PyTorch side of the benchmarks) and benchmarks/bench_support.hpp's Summary.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t h = values.size() / 2;
  return values.size() % 2 == 1 ? values[h] : (values[h - 1] + values[h]) / 2;
}

inline std::string mib(std::size_t bytes) { return fmt("%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

/// One progress line's figures.
struct Progress {
  std::int64_t step = 0, steps = 0;
  double train_loss = 0;
  double val_loss = NAN;  // NaN: not evaluated at this step
  double lr = 0, grad_norm = 0;
  double tokens_per_s = 0, ms_per_step = 0, mfu = NAN, elapsed_s = 0;
  std::int64_t tokens = 0;
  std::size_t allocated = 0, reserved = 0;
  std::size_t optimizer_bytes = 0;  // this rank's optimizer state (ZeRO: 1/ranks of the model's)
  std::size_t gradient_bytes = 0;   // this rank's gradient memory (ZeRO stage 2: 1/ranks + buckets)
  int ranks = 1;
  bool distributed = false;         // the data-parallel path (several ranks, or --force-collectives)
  double loss_scale = NAN;          // --loss-scale: the scale of the step (NaN: none)
  std::int64_t skipped = 0;         // steps skipped for inf/NaN gradients
};

inline std::string progress_line(const Progress& p) {
  std::string s = "step " + std::to_string(p.step) + "/" + std::to_string(p.steps) + " | loss " + fmt("%.4f", p.train_loss);
  s += std::isnan(p.val_loss) ? std::string(" | val   -   ") : " | val " + fmt("%.4f", p.val_loss);
  s += " | lr " + fmt("%.2e", p.lr) + " | norm " + fmt("%.2f", p.grad_norm);
  s += " | " + grouped(p.tokens_per_s) + " tok/s | " + fmt("%.1f", p.ms_per_step) + " ms/step";
  s += std::isnan(p.mfu) ? std::string(" | MFU  n/a") : " | MFU " + fmt("%.1f", 100 * p.mfu) + "%";
  s += " | mem " + mib(p.allocated) + "/" + mib(p.reserved) + " MiB";
  s += " | opt " + mib(p.optimizer_bytes) + " MiB" + (p.distributed ? "/rank x " + std::to_string(p.ranks) : std::string());
  s += " | grad " + mib(p.gradient_bytes) + " MiB" + (p.distributed ? "/rank" : "");
  if (!std::isnan(p.loss_scale)) s += " | scale " + fmt("%.17g", p.loss_scale) + " | skipped " + std::to_string(p.skipped);
  return s;
}

/// The first line of a --metrics file.
inline constexpr const char* metrics_header =
    "step,tokens,elapsed_s,train_loss,val_loss,lr,grad_norm,tokens_per_s,ms_per_step,mfu,allocated_bytes,reserved_bytes";

/// --metrics: a CSV row per progress line (header first). A resumed run appends its rows to an
/// existing file (run.hpp checked it is this CSV), so the file holds every row of every run; a step
/// that runs again (a resume from an earlier checkpoint) has a row for each time it ran, in order.
class MetricsCsv {
 public:
  void open(const std::string& path, bool append) {
    if (path.empty()) return;
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    const bool continuing = append && !ec && size > 0;
    char last = '\n';
    if (continuing) {
      std::ifstream in(path, std::ios::binary);
      in.seekg(-1, std::ios::end);
      in.get(last);
    }
    errno = 0;
    out_.open(path, continuing ? std::ios::app : std::ios::trunc);
    if (!out_) {
      throw std::runtime_error("cannot write the metrics file " + path + (errno != 0 ? ": " + std::string(std::strerror(errno)) : ""));
    }
    if (!continuing) {
      out_ << metrics_header << '\n';
    } else if (last != '\n') {
      out_ << '\n';  // the row a killed run left unfinished ends here
    }
    out_.flush();
  }
  void row(const Progress& p) {
    if (!out_.is_open()) return;
    const auto opt = [](double v, const char* f) { return std::isnan(v) ? std::string() : fmt(f, v); };
    out_ << p.step << ',' << p.tokens << ',' << fmt("%.3f", p.elapsed_s) << ',' << fmt("%.17g", p.train_loss) << ','
         << opt(p.val_loss, "%.6f") << ',' << fmt("%.6g", p.lr) << ',' << fmt("%.6g", p.grad_norm) << ','
         << fmt("%.1f", p.tokens_per_s) << ',' << fmt("%.3f", p.ms_per_step) << ',' << opt(p.mfu, "%.5f") << ','
         << p.allocated << ',' << p.reserved << '\n';
    out_.flush();
  }

 private:
  std::ofstream out_;
};

/// The final table: two columns, aligned.
inline std::string summary_table(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::size_t w = 0;
  for (const auto& r : rows) w = r.first.size() > w ? r.first.size() : w;
  std::string out;
  for (const auto& [k, v] : rows) out += "  " + k + std::string(w - k.size() + 2, ' ') + v + "\n";
  return out;
}

}  // namespace engine
