#!/usr/bin/env bash
# Installs every build and test dependency of rocksdcp from Debian's archive.
# Idempotent: packages already present are left alone, and apt-get update runs
# only when something is missing. Nothing is vendored or downloaded elsewhere.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  librocksdb-dev rocksdb-tools
  libflatbuffers-dev flatbuffers-compiler
  libxxhash-dev
  # Compressed pieces (src/codec/): zstd.
  libzstd-dev
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  libdlpack-dev
  libopenmpi-dev openmpi-bin
  # The fuzzers (fuzz/): clang, its sanitizer and fuzzer runtimes (only
  # recommended by clang, so named here), and libFuzzer.
  clang libclang-rt-14-dev libfuzzer-14-dev
  # scripts/check-format.sh: the C++ files against .clang-format.
  clang-format-14
  # The CLI's tests read what it writes with independent readers: NumPy's
  # own numpy.load for .npy, and tests/tools/read_safetensors.py (Python's
  # strict JSON parser) for safetensors.
  python3 python3-numpy
  # rocksdcp::torch, the LibTorch adapter (LibTorch 1.13, find_package(Torch)).
  libtorch-dev
  # The Python package (pybind11, for Debian's python3), and what its tests
  # run: torch 1.13's distributed checkpoint, pytest.
  pybind11-dev python3-dev python3-torch python3-pytest
  # The torch 2.x environment (scripts/torch2-venv.sh) is a venv of Debian's
  # python3.
  python3-venv
  # The crash, fault and contract suites again on XFS (a loop device) and
  # tmpfs (tests/fs/): mkfs.xfs, and losetup and mount.
  xfsprogs mount
  # The instruction counts (benchmarks/instructions.cc): callgrind and its
  # client request header.
  valgrind
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
