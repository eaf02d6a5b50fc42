"""`pip install .` from a clone (pyproject.toml, issue #37), checked from the
outside: a fresh virtual environment of Debian's python3, given torch 2.x,
builds and installs the source tree with its own pip; its python then saves
and loads a checkpoint through torch's DCP with the installed package, and
its bin/rocksdcp lists it.

ctest runs this with the torch 2.x environment's python
(scripts/torch2-venv.sh), which also holds the scikit-build-core that
pyproject.toml pins; ROCKSDCP_SOURCE_DIR names the source tree. The build
takes minutes: CMake compiles the library, the module and the CLI."""

import os
import re
import subprocess
import sys
import sysconfig
import textwrap
import time

import pytest


def source_dir():
    path = os.environ.get("ROCKSDCP_SOURCE_DIR")
    if not path:
        pytest.skip("ROCKSDCP_SOURCE_DIR is not set (run through ctest)")
    return path


def run(cmd, **kwargs):
    """Runs cmd; a failure shows its output."""
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, **kwargs)
    assert proc.returncode == 0, "{} exited {}:\n{}".format(
        " ".join(str(c) for c in cmd), proc.returncode, proc.stdout)
    return proc.stdout


def python_build_leftovers(root):
    """What an in-tree build would leave in the source tree: setuptools'
    build/ and dist/, *.egg-info, scikit-build's _skbuild/, a module built
    in place next to the package's .py files."""
    top = [n for n in os.listdir(root)
           if n in ("build", "dist", "_skbuild") or n.endswith((".egg-info", ".whl"))]
    package = os.path.join(root, "python", "rocksdcp")
    return set(top) | {n for n in os.listdir(package) if n.endswith(".so")}


def project_version(root):
    with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(rocksdcp VERSION ([0-9.]+)", f.read()).group(1)


# Run by the fresh environment's python: argv is the environment and the
# store.
CHECK = textwrap.dedent("""
    import importlib.metadata, os, sys
    import torch
    import torch.distributed.checkpoint as dcp
    import rocksdcp, rocksdcp.torch

    venv, store = sys.argv[1:]
    where = os.path.realpath(rocksdcp.__file__)
    assert where.startswith(os.path.realpath(venv) + os.sep), where
    assert int(torch.__version__.split(".")[0]) >= 2, torch.__version__

    sd = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4),
          "b": torch.tensor([7, -1, 3], dtype=torch.int64)}
    dcp.save(sd, storage_writer=rocksdcp.torch.StorageWriter(store),
             checkpoint_id="step-1")
    out = {"w": torch.zeros(3, 4), "b": torch.zeros(3, dtype=torch.int64)}
    dcp.load(out, storage_reader=rocksdcp.torch.StorageReader(store),
             checkpoint_id="step-1")
    for k in sd:
        assert torch.equal(out[k], sd[k]), (k, out[k], sd[k])
    with rocksdcp.Store(store) as s:
        assert [c.id for c in s.list()] == ["step-1"]
    print(importlib.metadata.version("rocksdcp"))
""")


def test_pip_install_into_a_fresh_venv(tmp_path):
    source = source_dir()
    torch = pytest.importorskip("torch")
    if int(torch.__version__.split(".")[0]) < 2:
        pytest.skip("needs torch 2.x: run with scripts/torch2-venv.sh's python")
    pytest.importorskip("scikit_build_core")

    venv = tmp_path / "venv"
    run(["/usr/bin/python3", "-m", "venv", venv])
    python = venv / "bin" / "python"
    site = run([python, "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    # torch 2.x without downloading it again: this interpreter's
    # environment (the torch 2.x one), named by a .pth file, which puts its
    # site-packages on the fresh environment's sys.path after its own. It
    # holds scikit-build-core too, so pip builds without build isolation
    # and without the network (--no-index): in isolation it would download
    # scikit-build-core from PyPI.
    own = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    with open(os.path.join(site, "torch2.pth"), "w", encoding="utf-8") as f:
        f.write("".join(p + "\n" for p in sorted(own)))

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PIP_")) and k != "VIRTUAL_ENV"}
    # pip's and scikit-build-core's temporary directories, the CMake build
    # tree among them, in this test's fresh directory, outside the source
    # tree; no pip configuration of the machine (an index, find-links).
    (tmp_path / "tmp").mkdir()
    env.update(TMPDIR=str(tmp_path / "tmp"), PIP_CONFIG_FILE=os.devnull,
               PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")

    before = python_build_leftovers(source)
    start = time.monotonic()
    log = run([venv / "bin" / "pip", "install", "-v", "--no-build-isolation",
               "--no-index", "--no-cache-dir", source], env=env, cwd=tmp_path)
    print("pip install: {:.0f} s".format(time.monotonic() - start))
    # The CMake build tree was a temporary directory of this test's, and
    # the build left nothing in the source tree.
    trees = re.findall(r"Build files have been written to: (\S+)", log)
    assert trees and all(t.startswith(str(tmp_path / "tmp") + os.sep) for t in trees), log
    assert python_build_leftovers(source) == before

    # What the wheel installed: the package, its metadata and the command,
    # no headers, libraries or CMake package (pip's RECORD lists every file,
    # relative to site-packages).
    dist_info = "rocksdcp-{}.dist-info".format(project_version(source))
    with open(os.path.join(site, dist_info, "RECORD"), encoding="utf-8") as f:
        installed = [line.split(",")[0] for line in f if line.strip()]
    bin_rocksdcp = os.path.relpath(venv / "bin" / "rocksdcp", site)
    assert bin_rocksdcp in installed
    others = [p for p in installed if p != bin_rocksdcp and
              not p.startswith(("rocksdcp/", dist_info + "/"))]
    assert others == []
    modules = [p for p in installed if re.fullmatch(r"rocksdcp/_rocksdcp\..*\.so", p)]
    assert len(modules) == 1, installed

    # From outside the source tree, so that its python/ can't be imported.
    store = tmp_path / "store"
    out = run([python, "-c", CHECK, venv, store], env=env, cwd=tmp_path)
    assert out.splitlines()[-1] == project_version(source)

    listing = run([venv / "bin" / "rocksdcp", "ls", store], env=env, cwd=tmp_path)
    assert "step-1" in [line.split()[0] for line in listing.splitlines() if line.split()], listing
