#!/usr/bin/env bash
# Installs what accel's build, tests and benchmarks need on Debian/Ubuntu. Idempotent: when every
# package is present it only checks (well under a second). The CUDA toolkit is optional and not
# installed here: where it exists (/usr/local/cuda), the CUDA backend is compiled too.
set -euo pipefail

# ninja-build: scripts/test.sh's build (Ninja where the build directory is new: scripts/lib/generator.sh);
# iproute2: the engine's two-machine test (two network namespaces joined by a veth pair);
# libopenblas0-openmp: the CPU's float32 'T','N' GEMMs where the CPU lacks AVX-512 (loaded at run time,
# accel/blas/detail/cpu_openblas.hpp)
packages=(cmake make ninja-build g++ libboost-dev doctest-dev libbenchmark-dev libopenmpi-dev openmpi-bin libdnnl-dev iproute2
  libopenblas0-openmp)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
