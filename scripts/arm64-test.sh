#!/usr/bin/env bash
# Tests an aarch64 cross-build of rocksdcp under qemu (issue #16), from an
# x86-64 build beside it:
#
#   scripts/arm64-test.sh X86_BUILD ARM64_BUILD
#
# 1. The unit and format tests of ARM64_BUILD (ctest labels
#    rocksdcp_core_tests and rocksdcp_format_tests), each test binary run by
#    qemu-aarch64 through CMAKE_CROSSCOMPILING_EMULATOR.
# 2. One store written on each architecture and read on the other: the
#    same safetensors file imported by X86_BUILD's `rocksdcp` and by
#    ARM64_BUILD's static `rocksdcp-static` (under qemu) into two stores,
#    as step-1 and, with compressed pieces, as step-2; each CLI verifies
#    the other's store, and all eight exports of the two stores are byte
#    for byte the same.
#
# ARM64_BUILD must have built rocksdcp_core_tests, rocksdcp_format_tests
# and rocksdcp_cli_static (docs/small-devices.md, "Building for aarch64").
set -euo pipefail
X86=$(realpath "$1")
ARM=$(realpath "$2")
QEMU=(qemu-aarch64-static -L /usr/aarch64-linux-gnu)

ctest --test-dir "$ARM" -L '^rocksdcp_(core|format)_tests$' --no-tests=error \
  --output-on-failure -j2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A state dict of several dtypes and shapes, some tensors of many pieces,
# from a fixed seed: written with the standard library only. The float
# tensors hold values drawn as trained weights are (normal, std 0.02; bf16
# as the high half of fp32), which compress.
python3 - "$tmp/in.safetensors" <<'EOF'
import json, random, struct, sys
rng = random.Random(16)
tensors = {"model.embed.weight": ("BF16", [1024, 512], 2),
           "model.layers.0.mlp.weight": ("F32", [512, 700], 4),
           "model.layers.0.norm.weight": ("F32", [512], 4),
           "optim.step": ("I64", [], 8)}
header, blobs, offset = {}, [], 0
for name, (dtype, shape, size) in tensors.items():
    n = size
    for d in shape:
        n *= d
    if dtype == "I64":
        blobs.append(rng.randbytes(n))
    else:
        values = [struct.pack("<f", rng.gauss(0, 0.02)) for _ in range(n // size)]
        blobs.append(b"".join(v[4 - size:] for v in values))
    header[name] = {"dtype": dtype, "shape": shape,
                    "data_offsets": [offset, offset + n]}
    offset += n
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
EOF

x86_cli() { "$X86/tools/rocksdcp" "$@"; }
arm_cli() { "${QEMU[@]}" "$ARM/tools/rocksdcp-static" "$@"; }

for who in x86 arm; do
  "${who}_cli" import "$tmp/in.safetensors" "$tmp/$who-store" step-1
  "${who}_cli" import "$tmp/in.safetensors" "$tmp/$who-store" step-2 --compress
done
arm_cli verify "$tmp/x86-store"
x86_cli verify "$tmp/arm-store"
for who in x86 arm; do
  for store in x86 arm; do
    for id in step-1 step-2; do
      "${who}_cli" export "$tmp/$store-store" "$id" \
        --safetensors "$tmp/$store-$id-by-$who.safetensors"
    done
  done
done
for store in x86 arm; do
  for id in step-1 step-2; do
    for who in x86 arm; do
      cmp "$tmp/x86-step-1-by-x86.safetensors" \
        "$tmp/$store-$id-by-$who.safetensors"
    done
  done
done
echo "arm64-test: aarch64 tests passed; stores written on x86-64 and" \
     "aarch64, compressed or not, verify and export the same bytes on both"
