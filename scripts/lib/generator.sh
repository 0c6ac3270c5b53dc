# Sourced by the scripts that configure a build directory (test.sh, train.sh, report.sh, gpu-check.sh,
# ci-sanitizers.sh, ci-fuzz.sh). accel_generator DIR prints the -G argument for DIR: Ninja where it is
# installed (scripts/install-deps.sh installs it), else nothing (CMake's default, Makefiles). A
# directory already configured keeps its generator: CMake refuses to change it.
#
# Why Ninja: a Makefile build goes target by target (each target's objects wait for the targets it
# links to be linked, and a unity target is one translation unit), Ninja keeps every core busy across
# targets. Measured on a 2-core Zen 3 VM (AMD EPYC family 25 model 1) from an empty directory, CI's
# test build: ~745 s with Makefiles, 519 s with Ninja (the same 1,038 s of compiler CPU); the ASan
# build: 293 s against 186 s.
accel_generator() {
  if [[ ! -f "$1/CMakeCache.txt" ]] && command -v ninja >/dev/null; then
    echo "-G Ninja"
  fi
  return 0
}
