# Sourced by the scripts that build a list of targets (ci-sanitizers.sh, ci-fuzz.sh). accel_generator
# DIR prints the -G argument for DIR: Ninja where it is installed, else nothing (CMake's default,
# Makefiles). A directory already configured keeps its generator: CMake refuses to change it.
#
# Why Ninja there: `cmake --build --target a b c` with Makefiles builds the listed targets one at a
# time, Ninja side by side (the ASan build on the 2-core VM: 293 s with Makefiles, 186 s with Ninja).
# A whole-project build gains nothing from it: CI's test build, measured back to back on a 2-core Zen 3
# VM (AMD EPYC family 25 model 1) from an empty directory, took 422 s with Makefiles, 420 s with Ninja.
accel_generator() {
  if [[ ! -f "$1/CMakeCache.txt" ]] && command -v ninja >/dev/null; then
    echo "-G Ninja"
  fi
  return 0
}
