"""Every ```python block of README.md and docs/*.md, run as printed, each in
a fresh directory, under the torch this runs with (torch 2.x in ctest).

The line before a block may mark it, as cmake/doc_snippets.cmake marks C++
blocks: ``<!-- compile-only -->`` for a block that needs what a test can't
have (a cluster, data of its own), which is only compiled;
``<!-- run-twice -->`` for one that acts on what it left before (a trainer
that resumes), run twice in the same directory;
``<!-- test: PATH -->`` for one that test runs instead, left out here.
"""

import subprocess
import sys

import pytest

from helpers import doc_blocks


def blocks():
    found = []
    for where, marker, _, code in doc_blocks("python"):
        assert marker in ("", "compile-only", "run-twice", "test"), (where, marker)
        if marker != "test":
            found.append(pytest.param(marker, code, id=where))
    return found


@pytest.mark.parametrize("marker,code", blocks())
def test_block_runs_as_printed(marker, code, tmp_path, request):
    name = request.node.callspec.id
    compile(code, name, "exec")  # A SyntaxError names the file and line.
    if marker == "compile-only":
        return
    for time in range(2 if marker == "run-twice" else 1):
        run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, f"{name}, run {time + 1}:\n{run.stderr}"
