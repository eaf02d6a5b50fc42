"""What the Python tests of either torch share (tests/python/conftest.py
and tests/python/torch2/conftest.py import it): the build's programs, and
another process holding a store open read-write."""

import os
import subprocess
import sys

import pytest


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
