"""Shared helpers of the Python tests, which ctest runs with Debian's
/usr/bin/python3 and PYTHONPATH pointing at the build tree's package
(tests/CMakeLists.txt). Every test gets a fresh temporary directory
(pytest's tmp_path)."""

import os

import rocksdcp.torch  # noqa: F401 - makes torch 1.13's DCP importable first


from helpers import LockHolder, lock_holder, tool  # noqa: E402,F401 - lock_holder is a fixture


def flip_byte(path, offset):
    """Flips one byte of a file, as a bad disk would."""
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x5A]))


def sst_files(store_path):
    """The store's SST files (not staging), largest first."""
    files = [os.path.join(store_path, n) for n in os.listdir(store_path) if n.endswith(".sst")]
    return sorted(files, key=os.path.getsize, reverse=True)
