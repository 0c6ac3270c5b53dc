// fill_ab — one host fill's rate, for comparing two versions of the header-only fill as a program
// built for the x86-64 baseline gets them (no -march flags): build this file once per version, then
// run the two binaries in turn, several rounds.
//
//   git archive <commit> include | tar -x -C /tmp/old
//   g++ -std=c++20 -O3 -fopenmp -I/tmp/old/include benchmarks/random/explore/fill_ab.cpp -o /tmp/fill_old
//   g++ -std=c++20 -O3 -fopenmp -Iinclude benchmarks/random/explore/fill_ab.cpp -o /tmp/fill_new
//   for r in 1 2 3 4 5; do for b in /tmp/fill_old /tmp/fill_new; do OMP_NUM_THREADS=1 $b bits; done; done
//
// Prints GB/s (1e9 bytes written per second) of fill_bits or fill_uniform over 64 MiB, 20 fills at
// advancing offsets, after one untimed fill that touches the pages.
#include <accel/random/fill.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

int main(int argc, char** argv) {
  const bool bits = argc > 1 && std::strcmp(argv[1], "bits") == 0;
  constexpr std::size_t n = std::size_t{1} << 24;
  constexpr int fills = 20;
  std::vector<float> f(n);
  std::vector<std::uint32_t> b(n);
  const auto fill = [&](std::uint64_t offset) {
    if (bits) {
      accel::rng::fill_bits(b, 42, offset);
    } else {
      accel::rng::fill_uniform(std::span<float>(f), 42, offset);
    }
  };
  fill(0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= fills; ++i) fill(static_cast<std::uint64_t>(i) * n);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s %.2f GB/s\n", bits ? "fill_bits" : "fill_uniform", fills * double(n) * 4 / s / 1e9);
  return 0;
}
