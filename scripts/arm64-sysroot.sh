#!/usr/bin/env bash
# Prepares an aarch64 cross-build of rocksdcp on a Debian 12 x86-64 host
# (issue #16): the cross compiler and qemu from Debian, and the arm64
# dependency packages unpacked (dpkg -x, not installed: librocksdb-dev:arm64
# is not co-installable with the host's librocksdb-dev) into DIR, default
# build-arm64-sysroot in the repository: the directory scripts/arm64-build.sh
# passes for its default build directory, build-arm64, and the toolchain
# file's default. A relative DIR is taken from the current directory and
# made absolute, because the fix-ups below write it into CMake files. Use
# with cmake/toolchains/aarch64-linux-gnu.cmake (-DROCKSDCP_ARM64_SYSROOT=DIR).
# Needs root. Only Debian's archive is used.
set -euo pipefail
DIR=$(realpath -m "${1:-$(dirname "${BASH_SOURCE[0]}")/../build-arm64-sysroot}")
T=aarch64-linux-gnu

export DEBIAN_FRONTEND=noninteractive
# Idempotent, as install-deps.sh: apt-get runs only for what is missing.
missing=()
for p in crossbuild-essential-arm64 qemu-user-static; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  dpkg --add-architecture arm64
  apt-get update -qq
fi

# RocksDB and its link dependencies (apt-cache depends librocksdb-dev:arm64,
# librocksdb7.8:arm64), FlatBuffers, xxHash, DLPack, GoogleTest,
# Google Benchmark. Not flatbuffers-compiler-dev: its FlatcTargets.cmake
# names an arm64 flatc; the host's flatc (flatbuffers-compiler) is used.
PACKAGES=(
  librocksdb-dev librocksdb7.8
  libgflags-dev libgflags2.2 libsnappy-dev libsnappy1v5
  libbz2-dev libbz2-1.0 zlib1g-dev zlib1g liblz4-dev liblz4-1
  libzstd-dev libzstd1
  libflatbuffers-dev libflatbuffers2
  libxxhash-dev libxxhash0
  libdlpack-dev
  libgtest-dev libgmock-dev
  libbenchmark-dev libbenchmark1debian
)
mkdir -p "$DIR/debs"
(cd "$DIR/debs" && apt-get download -qq "${PACKAGES[@]/%/:arm64}")
for deb in "$DIR"/debs/*.deb; do dpkg -x "$deb" "$DIR"; done

# Fix-ups of the unpacked tree, which assumes it is installed at /:
# - absolute .so symlinks (libbz2.so, libz.so) made relative;
ln -sf "../../../lib/$T/libbz2.so.1.0" "$DIR/usr/lib/$T/libbz2.so"
ln -sf "../../../lib/$T/libz.so.1.2.13" "$DIR/usr/lib/$T/libz.so"
# - CMake package files that name /usr literally (Snappy's targets, RocksDB's
#   static target's libbz2.so) instead of a prefix computed from their own
#   location: pointed at DIR.
grep -rlE "/usr/lib/$T/lib|_IMPORT_PREFIX \"/usr\"" "$DIR/usr/lib/$T/cmake" |
  xargs -r sed -i -e "s|\"/usr/lib/$T/lib|\"$DIR/usr/lib/$T/lib|g" \
                  -e "s|;/usr/lib/$T/lib|;$DIR/usr/lib/$T/lib|g" \
                  -e "s|_IMPORT_PREFIX \"/usr\"|_IMPORT_PREFIX \"$DIR/usr\"|"
echo "arm64 dependencies unpacked in $DIR"
