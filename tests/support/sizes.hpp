// Byte sizes for the tests' allocations, written once (several suites' files share a target).
#pragma once

#include <cstddef>

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;
