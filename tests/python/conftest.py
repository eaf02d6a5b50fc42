"""Shared helpers of the Python tests, which ctest runs with Debian's
/usr/bin/python3 and PYTHONPATH pointing at the build tree's package
(tests/CMakeLists.txt). Every test gets a fresh temporary directory
(pytest's tmp_path)."""

import os
import subprocess
import sys

import pytest

import rocksdcp.torch  # noqa: F401 - makes torch 1.13's DCP importable first


def tool(env_name):
    """A program of the build, named by the environment ctest sets."""
    path = os.environ.get(env_name)
    if not path:
        pytest.skip("{} is not set (run through ctest)".format(env_name))
    return path


class LockHolder:
    """Another process holding a store open read-write until closed."""

    def __init__(self, path):
        code = ("import sys, rocksdcp; s = rocksdcp.Store(sys.argv[1]); "
                "print('ready', flush=True); sys.stdin.read()")
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(path)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait() == 0


@pytest.fixture
def lock_holder():
    holders = []

    def hold(path):
        holders.append(LockHolder(path))
        return holders[-1]

    yield hold
    for h in holders:
        h.close()


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
