"""Every ```python block of README.md and docs/*.md, run as printed, each in
a fresh directory, under the torch this runs with (torch 2.x in ctest).

The line before a block may mark it, as cmake/doc_snippets.cmake marks C++
blocks: ``<!-- compile-only -->`` for a block that needs what a test can't
have (a cluster, data of its own), which is only compiled;
``<!-- test: PATH -->`` for one that test runs instead, left out here.
"""

import glob
import os
import re
import subprocess
import sys

import pytest

SOURCE = os.environ["ROCKSDCP_SOURCE_DIR"]
BLOCK = re.compile(r"^(?:<!-- ([a-z-]+)[^\n]*-->\n)?```python\n(.*?)^```$", re.S | re.M)


def blocks():
    found = []
    for path in [os.path.join(SOURCE, "README.md")] + sorted(
            glob.glob(os.path.join(SOURCE, "docs", "*.md"))):
        with open(path) as f:
            text = f.read()
        for match in BLOCK.finditer(text):
            marker, code = match.group(1) or "", match.group(2)
            assert marker in ("", "compile-only", "test"), (path, marker)
            if marker == "test":
                continue
            line = text.count("\n", 0, match.start(2)) + 1
            found.append(pytest.param(marker, code, id=f"{os.path.relpath(path, SOURCE)}:{line}"))
    return found


@pytest.mark.parametrize("marker,code", blocks())
def test_block_runs_as_printed(marker, code, tmp_path, request):
    name = request.node.callspec.id
    compile(code, name, "exec")  # A SyntaxError names the file and line.
    if marker == "compile-only":
        return
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, f"{name}:\n{run.stderr}"
