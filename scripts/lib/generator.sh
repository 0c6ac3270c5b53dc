# Sourced by the scripts that build (train.sh, test.sh, ci-sanitizers.sh, ci-fuzz.sh). accel_generator DIR prints
# the -G argument for DIR: Ninja where it is installed (scripts/install-deps.sh installs it), else nothing
# (CMake's default, Makefiles). A directory already configured keeps its generator: CMake refuses to
# change it.
#
# Why Ninja: `cmake --build --target a b c` with Makefiles builds the listed targets one at a time, Ninja
# side by side (the ASan build on the 2-core VM: 293 s with Makefiles, 186 s with Ninja). On a whole-
# project build the gain depends on the machine: CI's test build from an empty directory took 422 s with
# Makefiles and 420 s with Ninja on a 2-core Zen 3 VM (AMD EPYC family 25 model 1), and 544 s (1,007 s of
# user CPU) against 429 s (800 s) on a 2-core Intel Xeon VM (family 6 model 207, 2026-12-03: the same
# compile took the same time before and after, so the machine's speed had not changed) — Make's own
# processes per target (dependency scans, progress) cost CPU that the compilers then lack.
accel_generator() {
  if [[ ! -f "$1/CMakeCache.txt" ]] && command -v ninja >/dev/null; then
    echo "-G Ninja"
  fi
  return 0
}
