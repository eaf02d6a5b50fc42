"""README.md's Python quick start, run as printed in a fresh directory: the
```python block marked <!-- test: tests/python/test_readme.py -->."""

import subprocess
import sys

from helpers import doc_blocks


def test_python_quick_start_runs_as_printed(tmp_path):
    [(where, _, _, block)] = [b for b in doc_blocks("python")
                              if b[1:3] == ("test", "tests/python/test_readme.py")]
    assert where.startswith("README.md:")
    assert len(block.splitlines()) <= 12
    run = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['step-1']"
