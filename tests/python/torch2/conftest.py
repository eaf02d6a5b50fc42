"""Shared helpers of the torch 2.x tests, which ctest runs with the python
of scripts/torch2-venv.sh (torch 2.x from PyPI) and PYTHONPATH pointing at
the build tree's package (tests/CMakeLists.txt). Every test gets a fresh
temporary directory (pytest's tmp_path)."""

import os
import socket
import subprocess
import sys

import pytest
import torch

import rocksdcp.torch as rt

assert rt.IS_TORCH2 and int(torch.__version__.split(".")[0]) >= 2, torch.__version__

dcp = rt.dcp
HERE = os.path.dirname(os.path.abspath(__file__))
# tests/python: what the torch 1.13 tests and these share (demo_model.py).
sys.path.insert(1, os.path.dirname(HERE))
from helpers import LockHolder, lock_holder, tool  # noqa: E402,F401 - lock_holder is a fixture


def failure(e, rank=0):
    """The exception torch's CheckpointException wraps, of ``rank``."""
    wrapped = e.value.failures[rank]
    return wrapped[0] if isinstance(wrapped, tuple) else wrapped


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What a rank of a torchrun job prints once its work is done and checked,
# before it leaves its process group (work_done).
DONE = "rocksdcp-test: rank {} done"


def work_done(rank):
    print(DONE.format(rank), flush=True)


def torchrun(script, nproc, *args, timeout=300, env=None, check=True):
    """Runs ``script`` (a file of this directory) in ``nproc`` processes
    with torch's own launcher, its rendezvous on 127.0.0.1; returns the
    CompletedProcess (stdout and stderr captured).

    A job fails unless it exits 0, except that one whose every rank said
    its work was done (work_done) passes whatever its processes did when
    they tore down torch.distributed afterwards: torch's gloo backend may
    abort a process there ("terminate called without an active
    exception"), under load, after the last thing any test checks."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
           "--nproc-per-node={}".format(nproc), "--master-addr=127.0.0.1",
           "--master-port={}".format(free_port()), os.path.join(HERE, script)]
    cmd += [str(a) for a in args]
    full_env = dict(os.environ, OMP_NUM_THREADS="1")
    full_env.update(env or {})
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)
    finished = all(DONE.format(r) in proc.stdout for r in range(nproc))
    if check and proc.returncode != 0 and not finished:
        pytest.fail("{} failed ({}):\n{}\n{}".format(" ".join(cmd), proc.returncode,
                                                     proc.stdout[-6000:], proc.stderr[-6000:]))
    return proc

