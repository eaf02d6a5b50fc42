#!/usr/bin/env python3
"""Writes large safetensors files, to measure what `rocksdcp import` costs.

Not run by the tests: tools/README.md ("Memory of import") gives the
measurements made with it. Nothing large is committed; make the files
where there is room, e.g.

  make_safetensors.py tensors 1000000 /tmp/1m.safetensors
  make_safetensors.py metadata 99999000 /tmp/meta.safetensors
  make_safetensors.py tensors-header 99999000 /tmp/names.safetensors
  /usr/bin/time -f '%M KB' rocksdcp import /tmp/1m.safetensors /tmp/s 1m

Kinds:
  tensors N         N one-element F32 tensors named like a model's
                    ("model.layers.<i>.mlp.<j>.weight").
  tensors-header B  one-element U8 tensors with 200-byte names, as many as
                    fit a header of about B bytes.
  metadata B        no tensors; one "__metadata__" entry whose value is
                    about B bytes of text.
  metadata-many B   no tensors; "__metadata__" entries of 1-byte keys and
                    values ... as many as fit a header of about B bytes.
"""

import json
import struct
import sys


def write(path, header, data):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(data)
    print("%s: header %d bytes, %d tensors, data %d bytes"
          % (path, len(text), len(header) - ("__metadata__" in header),
             len(data)))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    kind, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    header = {}
    data = b""
    if kind == "tensors":
        for i in range(n):
            header["model.layers.%d.mlp.%d.weight" % (i // 16, i % 16)] = {
                "dtype": "F32", "shape": [1],
                "data_offsets": [4 * i, 4 * i + 4]}
        data = bytes(4 * n)
    elif kind == "tensors-header":
        # Each entry: a 200-byte name plus about 60 bytes of JSON.
        count = n // 265
        for i in range(count):
            name = ("model.%010d." % i).ljust(200, "x")
            header[name] = {"dtype": "U8", "shape": [1],
                            "data_offsets": [i, i + 1]}
        data = bytes(count)
    elif kind == "metadata":
        header["__metadata__"] = {"big": "x" * (n - 64)}
    elif kind == "metadata-many":
        # Each entry: "kNNNNNNN":"v", 15 bytes with its comma.
        header["__metadata__"] = {
            "k%07d" % i: "v" for i in range(n // 15 - 8)}
    else:
        sys.exit(__doc__)
    write(path, header, data)


if __name__ == "__main__":
    main()
