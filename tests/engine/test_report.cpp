// What the engine prints (examples/engine/report.hpp): numbers grouped in thousands, MiB, the progress
// line field by field (validation loss and MFU absent or present, the data-parallel and loss-scale
// parts), the metrics CSV (header, rows, empty cells for what was not measured, a resumed run appending
// under the one header, a row a killed run left unfinished closed before the next), the summary table.
#include "report.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

std::string report_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void report_write(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

fs::path report_scratch_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("accel-report-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

engine::Progress report_sample_progress() {
  engine::Progress p;
  p.step = 40;
  p.steps = 2000;
  p.train_loss = 2.345678;
  p.lr = 0.002;
  p.grad_norm = 0.456;
  p.tokens_per_s = 1234567.4;
  p.ms_per_step = 12.34;
  p.elapsed_s = 1.5;
  p.tokens = 30720;
  p.allocated = 3 * 1024 * 1024 + 512 * 1024;  // 3.5 MiB
  p.reserved = 8 * 1024 * 1024;
  p.optimizer_bytes = 1024 * 1024;
  p.gradient_bytes = 512 * 1024;
  return p;
}

}  // namespace

TEST_CASE("engine report: grouped() writes whole numbers with a comma every three digits, rounding, signs") {
  CHECK(engine::grouped(0) == "0");
  CHECK(engine::grouped(7) == "7");
  CHECK(engine::grouped(999) == "999");
  CHECK(engine::grouped(1000) == "1,000");
  CHECK(engine::grouped(12345) == "12,345");
  CHECK(engine::grouped(123456) == "123,456");
  CHECK(engine::grouped(1234567) == "1,234,567");
  CHECK(engine::grouped(12345678) == "12,345,678");
  CHECK(engine::grouped(999.5) == "1,000");  // rounded to the nearest, halves away from zero
  CHECK(engine::grouped(1234.4) == "1,234");
  CHECK(engine::grouped(-1234567) == "-1,234,567");
  CHECK(engine::grouped(-999) == "-999");
  CHECK(engine::grouped(-0.4) == "0");
}

TEST_CASE("engine report: mib() in MiB with one decimal") {
  CHECK(engine::mib(0) == "0.0");
  CHECK(engine::mib(1024 * 1024) == "1.0");
  CHECK(engine::mib(3 * 1024 * 1024 + 512 * 1024) == "3.5");
  CHECK(engine::mib(52429) == "0.1");  // 0.05000019 MiB rounds up
  CHECK(engine::mib(std::size_t{10} << 30) == "10240.0");
}

TEST_CASE("engine report: the progress line, field by field") {
  auto p = report_sample_progress();
  CHECK(engine::progress_line(p) ==
        "step 40/2000 | loss 2.3457 | val   -    | lr 2.00e-03 | norm 0.46 | 1,234,567 tok/s | 12.3 ms/step"
        " | MFU  n/a | mem 3.5/8.0 MiB | opt 1.0 MiB | grad 0.5 MiB");

  p.val_loss = 1.98766;
  p.mfu = 0.3661;
  CHECK(engine::progress_line(p) ==
        "step 40/2000 | loss 2.3457 | val 1.9877 | lr 2.00e-03 | norm 0.46 | 1,234,567 tok/s | 12.3 ms/step"
        " | MFU 36.6% | mem 3.5/8.0 MiB | opt 1.0 MiB | grad 0.5 MiB");

  SUBCASE("data parallel: the optimizer state and gradients are per rank") {
    p.distributed = true;
    p.ranks = 4;
    CHECK(engine::progress_line(p) ==
          "step 40/2000 | loss 2.3457 | val 1.9877 | lr 2.00e-03 | norm 0.46 | 1,234,567 tok/s | 12.3 ms/step"
          " | MFU 36.6% | mem 3.5/8.0 MiB | opt 1.0 MiB/rank x 4 | grad 0.5 MiB/rank");
  }
  SUBCASE("a loss scale: the scale in full and the steps skipped") {
    p.loss_scale = 65536;
    p.skipped = 3;
    CHECK(engine::progress_line(p) ==
          "step 40/2000 | loss 2.3457 | val 1.9877 | lr 2.00e-03 | norm 0.46 | 1,234,567 tok/s | 12.3 ms/step"
          " | MFU 36.6% | mem 3.5/8.0 MiB | opt 1.0 MiB | grad 0.5 MiB | scale 65536 | skipped 3");
    p.loss_scale = 0.5;
    CHECK(engine::progress_line(p).ends_with(" | scale 0.5 | skipped 3"));
  }
  SUBCASE("gradients that overflowed print as such") {
    p.grad_norm = INFINITY;
    CHECK(engine::progress_line(p).find(" | norm inf | ") != std::string::npos);
  }
}

TEST_CASE("engine report: the metrics CSV — header, rows, empty cells for what was not measured") {
  const auto dir = report_scratch_dir("csv");
  const auto path = dir / "m.csv";
  {
    engine::MetricsCsv csv;
    csv.open(path.string(), false);
    CHECK(report_text(path) == std::string(engine::metrics_header) + "\n");  // written at once, before any row
    auto p = report_sample_progress();
    p.step = 1;
    csv.row(p);
    CHECK(report_text(path) == std::string(engine::metrics_header) + "\n" +
                            "1,30720,1.500,2.3456779999999999,,0.002,0.456,1234567.4,12.340,,3670016,8388608\n");
    p.step = 2;
    p.val_loss = 1.98765432;
    p.mfu = 0.366123456;
    csv.row(p);
    CHECK(report_text(path).ends_with("\n2,30720,1.500,2.3456779999999999,1.987654,0.002,0.456,1234567.4,12.340,0.36612,"
                               "3670016,8388608\n"));
  }
  CHECK(std::string(engine::metrics_header) ==
        "step,tokens,elapsed_s,train_loss,val_loss,lr,grad_norm,tokens_per_s,ms_per_step,mfu,allocated_bytes,"
        "reserved_bytes");

  SUBCASE("a new run (not resumed) starts the file again") {
    engine::MetricsCsv csv;
    csv.open(path.string(), false);
    CHECK(report_text(path) == std::string(engine::metrics_header) + "\n");
  }
  SUBCASE("a resumed run appends its rows under the one header") {
    const auto before = report_text(path);
    engine::MetricsCsv csv;
    csv.open(path.string(), true);
    CHECK(report_text(path) == before);
    auto p = report_sample_progress();
    p.step = 3;
    csv.row(p);
    CHECK(report_text(path) == before + "3,30720,1.500,2.3456779999999999,,0.002,0.456,1234567.4,12.340,,3670016,8388608\n");
  }
  SUBCASE("a row a killed run left unfinished is ended before the resumed run's first") {
    report_write(path, std::string(engine::metrics_header) + "\n1,30720,1.5");
    engine::MetricsCsv csv;
    csv.open(path.string(), true);
    CHECK(report_text(path) == std::string(engine::metrics_header) + "\n1,30720,1.5\n");
  }
  SUBCASE("a resumed run with an empty or missing file writes the header") {
    report_write(path, "");
    engine::MetricsCsv csv;
    csv.open(path.string(), true);
    CHECK(report_text(path) == std::string(engine::metrics_header) + "\n");
    engine::MetricsCsv other;
    other.open((dir / "new.csv").string(), true);
    CHECK(report_text(dir / "new.csv") == std::string(engine::metrics_header) + "\n");
  }
  SUBCASE("no path: no file, and rows are ignored") {
    engine::MetricsCsv csv;
    csv.open("", false);
    csv.row(report_sample_progress());
    CHECK(fs::is_empty(dir) == false);
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);  // m.csv alone
  }
  SUBCASE("a file that cannot be written is an error naming it and why") {
    engine::MetricsCsv csv;
    const auto bad = (dir / "missing-dir" / "m.csv").string();
    CHECK_THROWS_WITH_AS(csv.open(bad, false), ("cannot write the metrics file " + bad + ": No such file or directory").c_str(),
                         std::runtime_error);
  }
  fs::remove_all(dir);
}

TEST_CASE("engine report: the summary table aligns its values two spaces past the longest name") {
  CHECK(engine::summary_table({}) == "");
  CHECK(engine::summary_table({{"steps", "20"}, {"tokens/s", "1,234"}, {"loss", "1.8"}}) ==
        "  steps     20\n"
        "  tokens/s  1,234\n"
        "  loss      1.8\n");
  CHECK(engine::summary_table({{"a", "x"}}) == "  a  x\n");
}
