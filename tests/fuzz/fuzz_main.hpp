// Shared by the fuzz targets: each defines ACCEL_FUZZ_ONE(text) and is built two ways —
//   with clang -fsanitize=fuzzer (ACCEL_BUILD_FUZZERS=ON): a libFuzzer target run for a bounded time;
//   otherwise: a replay program that runs every file of its corpus (tests/fuzz/corpus/<name>/), so
//   every input the fuzzer once found interesting, and every crash it found, stays a regression test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

void accel_fuzz_one(std::string_view text);

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  accel_fuzz_one(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

#if !defined(ACCEL_LIBFUZZER)
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

int main(int argc, char** argv) {
  std::size_t inputs = 0;
  for (int i = 1; i < argc; ++i) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(argv[i])) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      ++inputs;
    }
  }
  std::cout << "replayed " << inputs << " inputs\n";
  return inputs > 0 ? 0 : 1;
}
#endif
