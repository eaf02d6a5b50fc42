"""One format for C++, torch 1.13 and torch 2.x: a checkpoint the C++ demo
saved loads under torch 2.x bit for bit, and torch 1.13 (Debian's, in
another process) and torch 2.x load each other's checkpoints. (The C++
CLI reading what torch 2.x saved: test_safetensors.py.)"""

import os
import subprocess
import textwrap

import pytest
import torch

import rocksdcp
import rocksdcp.torch as rt
from conftest import dcp, tool
from demo_model import assert_demo_state

DEBIAN_PYTHON = "/usr/bin/python3"


def test_a_checkpoint_of_the_cpp_demo_loads_under_torch_2(tmp_path):
    store = tmp_path / "demo"
    subprocess.run([tool("ROCKSDCP_DEMO"), str(store)], check=True, stdout=subprocess.DEVNULL)
    with rocksdcp.Store(store, read_only=True) as s:
        items = s.items("step-300")
    state = {fqn: b"" if item[0] == "bytes" else torch.zeros(item[2], dtype=getattr(torch, item[1]))
             for fqn, item in items.items()}
    dcp.load(state, storage_reader=rt.StorageReader(store), checkpoint_id="step-300",
             planner=rt.DefaultLoadPlanner())
    assert_demo_state(state, 300)


def torch_1_13(script, *args):
    """Runs ``script`` with Debian's python3 and its torch 1.13, the build's
    rocksdcp package on its path."""
    probe = subprocess.run([DEBIAN_PYTHON, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or not probe.stdout.startswith("1.13"):
        pytest.skip("Debian's torch 1.13 is not installed: {}".format(probe.stderr[-300:]))
    run = subprocess.run([DEBIAN_PYTHON, "-c", textwrap.dedent(script)] + [str(a) for a in args],
                         capture_output=True, text=True, env=dict(os.environ))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


STATE = """
    import torch
    g = torch.Generator().manual_seed(5)
    state = {"w": torch.randn(64, 48, generator=g), "h": torch.randn(33, generator=g).half(),
             "b": torch.randn(16, 16, generator=g).to(torch.bfloat16), "i": torch.arange(9),
             "t": torch.randn(8, 12, generator=g).t(), "lr": 3e-4, "betas": (0.9, 0.95),
             "blob": b"\\x00rng-state\\xff"}
"""


def expected_values():
    out = {}
    exec(textwrap.dedent(STATE), {"torch": torch}, out)
    return out["state"]


def zeros(state):
    return {k: torch.zeros_like(v) if isinstance(v, torch.Tensor) else type(v)()
            if not isinstance(v, tuple) else (0.0, 0.0) for k, v in state.items()}


def test_torch_1_13_saves_torch_2_loads(tmp_path):
    torch_1_13(STATE + """
    import sys, torch, rocksdcp.torch as rt
    rt.dcp.save_state_dict(state, no_dist=True, planner=rt.DefaultSavePlanner(),
                           storage_writer=rt.StorageWriter(sys.argv[1], "from-1.13"))
    torch.save({k: v for k, v in state.items()}, sys.argv[2])
    """, tmp_path / "store", tmp_path / "expected.pt")
    expected = torch.load(tmp_path / "expected.pt", weights_only=True)
    into = zeros(expected)
    dcp.load(into, storage_reader=rt.StorageReader(tmp_path / "store"),
             checkpoint_id="from-1.13", planner=rt.DefaultLoadPlanner())
    for k, v in expected.items():
        if isinstance(v, torch.Tensor):
            assert v.dtype == into[k].dtype and torch.equal(into[k], v), k
        else:
            assert into[k] == v and type(into[k]) is type(v), k
    verify = subprocess.run([tool("ROCKSDCP_CLI"), "verify", str(tmp_path / "store")],
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_torch_2_saves_torch_1_13_loads(tmp_path):
    state = expected_values()
    dcp.save(state, storage_writer=rt.StorageWriter(tmp_path / "store"),
             checkpoint_id="from-2", planner=rt.DefaultSavePlanner())
    torch.save(state, tmp_path / "expected.pt")
    torch_1_13("""
    import sys, torch, rocksdcp.torch as rt
    expected = torch.load(sys.argv[2])
    into = {k: torch.zeros_like(v) if isinstance(v, torch.Tensor) else
            ((0.0, 0.0) if isinstance(v, tuple) else type(v)()) for k, v in expected.items()}
    rt.dcp.load_state_dict(into, no_dist=True, planner=rt.DefaultLoadPlanner(),
                           storage_reader=rt.StorageReader(sys.argv[1], "from-2"))
    for k, v in expected.items():
        if isinstance(v, torch.Tensor):
            assert v.dtype == into[k].dtype and torch.equal(into[k], v), k
        else:
            assert into[k] == v and type(into[k]) is type(v), (k, into[k], v)
    """, tmp_path / "store", tmp_path / "expected.pt")
