// dp_check — the comparisons run_dp.cmake makes between runs of the engine on different rank counts
// (CMake has no floating point). Prints what it compared; exit status 1 (with the first difference)
// when a check fails, 2 for bad usage.
//
//   dp_check losses-equal A.csv B.csv        the train_loss columns of two --metrics files, as text;
//                                            the same number of rows, at least one
//   dp_check losses-equal-tail A.csv B.csv   B a resumed run: fewer rows, equal to A's last ones
//   dp_check losses-close A.csv B.csv TOL    ... within TOL relative, step by step (same row count)
//   dp_check files-equal A B                 byte for byte
//   dp_check ratio X Y LO HI                 LO <= X / Y <= HI
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> loss_column(const char* path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "dp_check: cannot read %s\n", path);
    std::exit(1);
  }
  std::vector<std::string> out;
  std::string line;
  std::getline(in, line);  // header: step,tokens,elapsed_s,train_loss,...
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string field;
    for (int i = 0; i < 4 && std::getline(ss, field, ','); ++i) {
    }
    out.push_back(field);
  }
  if (out.empty()) {
    std::fprintf(stderr, "dp_check: %s has no rows\n", path);
    std::exit(1);
  }
  return out;
}

int fail(const std::string& what) {
  std::fprintf(stderr, "dp_check: FAILED: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  const bool tail = cmd == "losses-equal-tail";
  if (((cmd == "losses-equal" || tail) && argc == 4) || (cmd == "losses-close" && argc == 5)) {
    auto a = loss_column(argv[2]);
    const auto b = loss_column(argv[3]);
    // A run that logged nothing, or stopped early, must not pass as "equal on the rows it has".
    if (b.empty()) return fail(std::string("no losses in ") + argv[3]);
    if (tail ? a.size() <= b.size() : a.size() != b.size()) {
      return fail(std::to_string(a.size()) + " rows against " + std::to_string(b.size()) +
                  (tail ? " (a resumed run has fewer rows than the whole one)" : " (the runs must log the same steps)"));
    }
    a.erase(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(a.size() - b.size()));
    const double tol = cmd == "losses-close" ? std::strtod(argv[4], nullptr) : 0;
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (cmd != "losses-close") {
        if (a[i] != b[i]) return fail("row " + std::to_string(i) + ": loss " + a[i] + " against " + b[i]);
      } else {
        const double x = std::stod(a[i]), y = std::stod(b[i]);
        const double rel = std::fabs(x - y) / std::fabs(y);
        worst = std::fmax(worst, rel);
        if (!(rel <= tol)) return fail("row " + std::to_string(i) + ": loss " + a[i] + " against " + b[i]);
      }
    }
    std::printf("dp_check: %zu losses %s (largest relative difference %.3g)\n", a.size(),
                cmd != "losses-close" ? "bit-identical" : "within tolerance", worst);
    return 0;
  }
  if (cmd == "files-equal" && argc == 4) {
    std::ifstream a(argv[2], std::ios::binary), b(argv[3], std::ios::binary);
    if (!a || !b) return fail(std::string("cannot read ") + (a ? argv[3] : argv[2]));
    const std::string x((std::istreambuf_iterator<char>(a)), {}), y((std::istreambuf_iterator<char>(b)), {});
    if (x.size() != y.size()) return fail(std::to_string(x.size()) + " bytes against " + std::to_string(y.size()));
    if (x.empty()) return fail("empty files");
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i] != y[i]) return fail("byte " + std::to_string(i) + " differs");
    }
    std::printf("dp_check: %s and %s: %zu identical bytes\n", argv[2], argv[3], x.size());
    return 0;
  }
  if (cmd == "ratio" && argc == 6) {
    const double x = std::strtod(argv[2], nullptr), y = std::strtod(argv[3], nullptr);
    const double lo = std::strtod(argv[4], nullptr), hi = std::strtod(argv[5], nullptr);
    const double r = x / y;
    std::printf("dp_check: %g / %g = %.4f (expected %g to %g)\n", x, y, r, lo, hi);
    return r >= lo && r <= hi ? 0 : fail("ratio out of range");
  }
  std::fprintf(stderr, "usage: dp_check losses-equal|losses-close|files-equal|ratio ...\n");
  return 2;
}
