// Whether this test binary is built with a sanitizer: checks that observe the process itself (its
// resident and locked memory, its page faults, its address-space limit, its operator new) do not hold
// under one, because the sanitizer's runtime owns those. g++ says so with __SANITIZE_ADDRESS__ and
// __SANITIZE_THREAD__, clang (14) only through __has_feature — which g++ 12 lacks, so the two tests
// stay nested.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define ACCEL_TEST_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define ACCEL_TEST_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(ACCEL_TEST_ASAN)
#define ACCEL_TEST_ASAN 1
#endif
#if __has_feature(thread_sanitizer) && !defined(ACCEL_TEST_TSAN)
#define ACCEL_TEST_TSAN 1
#endif
#if __has_feature(memory_sanitizer)
#define ACCEL_TEST_MSAN 1
#endif
#endif

/// Defined when any of the sanitizers above instruments this build.
#if defined(ACCEL_TEST_ASAN) || defined(ACCEL_TEST_TSAN) || defined(ACCEL_TEST_MSAN)
#define ACCEL_TEST_SANITIZED 1
#endif

namespace accel_test {
#if defined(ACCEL_TEST_SANITIZED)
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif
#if defined(ACCEL_TEST_TSAN)
inline constexpr bool thread_sanitized_build = true;
#else
inline constexpr bool thread_sanitized_build = false;
#endif
}  // namespace accel_test
