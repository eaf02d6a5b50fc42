"""README.md's Python quick start, run as printed in a fresh directory."""

import os
import re
import subprocess
import sys


def test_python_quick_start_runs_as_printed(tmp_path):
    with open(os.path.join(os.environ["ROCKSDCP_SOURCE_DIR"], "README.md")) as f:
        readme = f.read()
    section = readme[readme.index("\n## Using it from Python\n"):]
    block = re.search(r"```python\n(.*?)\n```\n", section, re.S).group(1)
    assert len(block.splitlines()) <= 12
    run = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['step-1']"
