#!/usr/bin/env python3
"""An independent reader of safetensors files, for rocksdcp's tests.

Written from the format's specification (github.com/huggingface/safetensors,
README "Format"), with Python's own strict JSON parser: it shares no code
with rocksdcp's writer or reader. No safetensors package is installed here,
so this stands in for the reference implementation's checks:

  - 8 bytes: N, a little-endian unsigned 64-bit header size, at most
    100,000,000 (safetensors' MAX_HEADER_SIZE);
  - N bytes: a UTF-8 JSON object starting with '{', possibly padded with
    trailing spaces; no duplicate keys;
  - "__metadata__", if present: null or an object of string to string;
  - every other key a tensor: exactly "dtype", "shape", "data_offsets";
    a known dtype; non-negative integer dims; [begin, end] with
    end - begin = prod(shape) * dtype size;
  - the tensors, sorted by offsets, tile the rest of the file exactly.

Usage: read_safetensors.py FILE. Prints one JSON document to stdout:
  {"header_size": N, "header_padding": spaces at the end of the header,
   "metadata": {...} or null,
   "tensors": [{"name", "dtype", "shape", "begin", "end", "aligned", "hex"}]}
with tensors in data order; "aligned" says whether the tensor's first byte
in the file is a multiple of its element size. Exits 1, saying why on
stderr, for a file that breaks the format.
"""

import json
import struct
import sys

MAX_HEADER_SIZE = 100_000_000
DTYPE_SIZES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
    "F8_E5M2FNUZ": 1, "F8_E4M3FNUZ": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8, "C64": 8,
}


class FormatError(Exception):
    pass


def no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise FormatError("duplicate key %r" % key)
        obj[key] = value
    return obj


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise FormatError("shorter than the header size")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER_SIZE or 8 + n > len(data):
        raise FormatError("header size %d" % n)
    try:
        text = data[8:8 + n].decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError("header is not UTF-8: %s" % e)
    if not text.startswith("{"):
        raise FormatError("header does not start with '{'")
    header = json.loads(text, object_pairs_hook=no_duplicates)
    if not isinstance(header, dict):
        raise FormatError("header is not an object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(v, str) for v in metadata.values()):
            raise FormatError("__metadata__ is not a map of strings")
    tensors = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {
                "dtype", "shape", "data_offsets"}:
            raise FormatError("tensor %r: bad entry %r" % (name, info))
        dtype, shape, offsets = (info["dtype"], info["shape"],
                                 info["data_offsets"])
        if dtype not in DTYPE_SIZES:
            raise FormatError("tensor %r: unknown dtype %r" % (name, dtype))
        if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0
                for d in shape):
            raise FormatError("tensor %r: bad shape %r" % (name, shape))
        if (not isinstance(offsets, list) or len(offsets) != 2 or
                not all(isinstance(o, int) and o >= 0 for o in offsets)):
            raise FormatError("tensor %r: bad data_offsets" % name)
        numel = 1
        for d in shape:
            numel *= d
        begin, end = offsets
        if end - begin != numel * DTYPE_SIZES[dtype]:
            raise FormatError("tensor %r: %d bytes for shape %r of %s" %
                              (name, end - begin, shape, dtype))
        tensors.append((begin, end, name, dtype, shape))
    tensors.sort()
    body = data[8 + n:]
    position = 0
    out = []
    for begin, end, name, dtype, shape in tensors:
        if begin != position:
            raise FormatError("tensor %r begins at %d, not %d" %
                              (name, begin, position))
        position = end
        out.append({
            "name": name, "dtype": dtype, "shape": shape,
            "begin": begin, "end": end,
            "aligned": (8 + n + begin) % DTYPE_SIZES[dtype] == 0,
            "hex": body[begin:end].hex(),
        })
    if position != len(body):
        raise FormatError("tensors cover %d of %d data bytes" %
                          (position, len(body)))
    return {
        "header_size": n,
        "header_padding": len(text) - len(text.rstrip(" ")),
        "metadata": metadata,
        "tensors": out,
    }


def main():
    try:
        result = read(sys.argv[1])
    except (FormatError, ValueError) as e:
        print("read_safetensors.py: %s: %s" % (sys.argv[1], e),
              file=sys.stderr)
        return 1
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
