"""What the Python tests of either torch share (tests/python/conftest.py
and tests/python/torch2/conftest.py import it): the build's programs,
another process holding a store open read-write, and the code blocks of
the documentation."""

import glob
import os
import re
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


# A fenced block of a language, and the marker on the line before it, if
# any: <!-- WORD REST -->, as cmake/doc_snippets.cmake reads them for C++.
_DOC_BLOCK = r"^(?:<!-- ([a-z-]+):? ?([^\n]*?) ?-->\n)?```{}\n(.*?)^```$"


def doc_blocks(lang):
    """Every ```<lang> block of README.md and docs/*.md, in order, as
    (where, marker, argument, code): where is "FILE:LINE" of the block's
    first line, relative to the source tree; marker the marker's word
    ("" without one) and argument the rest of it."""
    source = os.environ["ROCKSDCP_SOURCE_DIR"]
    pattern = re.compile(_DOC_BLOCK.format(re.escape(lang)), re.S | re.M)
    found = []
    for path in [os.path.join(source, "README.md")] + sorted(
            glob.glob(os.path.join(source, "docs", "*.md"))):
        with open(path) as f:
            text = f.read()
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start(3)) + 1
            found.append(("{}:{}".format(os.path.relpath(path, source), line),
                          match.group(1) or "", match.group(2) or "", match.group(3)))
    return found

