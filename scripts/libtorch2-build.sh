#!/usr/bin/env bash
# Builds rocksdcp's LibTorch adapter (rocksdcp::torch) against LibTorch 2.x,
# the one inside PyPI's torch wheel, and runs its tests (issue #37): the
# same sources the default build compiles against Debian's LibTorch 1.13.
#
#   scripts/libtorch2-build.sh [BUILD_DIR]
#
# BUILD_DIR defaults to build-libtorch2; the default build, build, is never
# touched. The wheel is the torch 2.x of scripts/torch2-venv.sh's venv;
# without that venv (not made yet, or ROCKSDCP_NO_TORCH2=1) this says so and
# does nothing. CMake finds the wheel's LibTorch as PyTorch documents it:
# find_package(Torch) with CMAKE_PREFIX_PATH=torch.utils.cmake_prefix_path.
# Only what the adapter's tests need is configured and built (target
# rocksdcp_torch_all_tests): the library, rocksdcp::torch, rocksdcp::testing,
# the torch tests, the LibTorch examples of README.md and docs/, and
# examples/libtorch_trainer with the test that kills and resumes it. Python,
# MPI, the fuzzers, the benchmarks and the CLI are off. At -O1, as CI's
# sanitized build (an eighth less CPU than -O3 here): what this checks is
# that the sources compile and behave with LibTorch 2.x, and 12 translation
# units that include LibTorch 2.x, some 20 s of CPU each, are most of the
# build. ctest then runs those tests only. Run again, it rebuilds only what
# changed.
#
# PyPI's wheel for x86-64 is a CUDA build, and its CMake package requires
# the CUDA toolkit (nvcc, found on PATH or in /usr/local/cuda) at configure
# time, though nothing here compiles CUDA and rocksdcp::torch links only
# LibTorch's CPU library: no test loads a CUDA library, and none needs a
# GPU. Without nvcc this says so and does nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build-libtorch2}

if [ "$(realpath -m "$BUILD")" = "$(realpath -m build)" ]; then
  echo "libtorch2-build: $BUILD is the default build (Debian's LibTorch 1.13); give another directory" >&2
  exit 2
fi
if ! python=$(./scripts/torch2-venv.sh --python); then
  echo "libtorch2-build: no torch 2.x environment (scripts/torch2-venv.sh makes it); LibTorch 2.x not built"
  exit 0
fi
# The CMake prefix of the wheel's LibTorch, and its CUDA version (empty for
# a CPU build).
info=$("$python" -c '
import torch, torch.utils
print(torch.utils.cmake_prefix_path)
print(torch.version.cuda or "")')
prefix=$(sed -n 1p <<<"$info")
cuda=$(sed -n 2p <<<"$info")

cuda_args=()
if [ -n "$cuda" ]; then
  nvcc=$(command -v nvcc || true)
  if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
  fi
  if [ -z "$nvcc" ]; then
    echo "libtorch2-build: the wheel's LibTorch is a CUDA $cuda build, whose CMake package needs the CUDA toolkit (nvcc), and there is none; LibTorch 2.x not built"
    exit 0
  fi
  cuda_args=("-DCMAKE_CUDA_COMPILER=$nvcc")
fi

start=$SECONDS
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  "-DCMAKE_PREFIX_PATH=$prefix" "${cuda_args[@]}" \
  "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" \
  -DROCKSDCP_WITH_TORCH=ON -DROCKSDCP_WITH_TESTING=ON \
  -DROCKSDCP_WITH_PYTHON=OFF -DROCKSDCP_WITH_MPI=OFF -DROCKSDCP_FUZZ_TESTS=OFF \
  -DROCKSDCP_BUILD_BENCHMARKS=OFF -DROCKSDCP_BUILD_TOOLS=OFF \
  -DROCKSDCP_STATIC_CLI=OFF
cmake --build "$BUILD" -j2 --target rocksdcp_torch_all_tests
echo "libtorch2-build: configured and built in $((SECONDS - start)) s"

start=$SECONDS
# The adapter's tests, by their binaries' labels (tests/CMakeLists.txt).
# -j3 on two cores: they wait on fsync and on the trainer they kill.
ctest --test-dir "$BUILD" --output-on-failure --no-tests=error -j3 \
  -L '^rocksdcp_(torch_tests|torch_docs_test|trainer_resume_test)$'
echo "libtorch2-build: LibTorch 2.x tests took $((SECONDS - start)) s"
