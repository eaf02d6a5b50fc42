#!/usr/bin/env bash
# Cross-builds rocksdcp for aarch64 on this x86-64 Debian machine (issue
# #16), from Debian's archive only:
#
#   scripts/arm64-build.sh [BUILD_DIR] [TARGET...]
#
# BUILD_DIR defaults to build-arm64; Debian's arm64 packages are unpacked
# into BUILD_DIR-sysroot (scripts/arm64-sysroot.sh, which needs root and
# installs the cross compiler and qemu). TARGETs default to what
# scripts/arm64-test.sh runs: the unit and format tests and the static CLI;
# "all" builds every target of the aarch64 build (the RocksDB-backed test
# suites too). What has no arm64 build here is off: LibTorch, Python, MPI,
# the fuzzers; so are the benchmarks and the demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build-arm64}
shift || true
TARGETS=("$@")
if [ "${#TARGETS[@]}" -eq 0 ]; then
  TARGETS=(rocksdcp_core_tests rocksdcp_format_tests rocksdcp_cli_static)
fi
SYSROOT="$(realpath -m "$BUILD")-sysroot"

./scripts/arm64-sysroot.sh "$SYSROOT"
cmake -S . -B "$BUILD" \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
  -DROCKSDCP_ARM64_SYSROOT="$SYSROOT" \
  -DCMAKE_BUILD_TYPE=Release -DROCKSDCP_WITH_TORCH=OFF \
  -DROCKSDCP_WITH_PYTHON=OFF -DROCKSDCP_WITH_MPI=OFF -DROCKSDCP_FUZZ_TESTS=OFF \
  -DROCKSDCP_BUILD_BENCHMARKS=OFF -DROCKSDCP_BUILD_EXAMPLES=OFF
cmake --build "$BUILD" -j2 --target "${TARGETS[@]}"
echo "arm64-build: built ${TARGETS[*]} in $BUILD"
