"""A LibTorch model and optimizer, saved by rocksdcp::torch, load into torch
2.x's ``set_state_dict`` and back.

The C++ side is ``tests/torch/interop_trainer.cc`` (ROCKSDCP_INTEROP_TRAINER):
it trains a Linear/LayerNorm/Linear model with one of Adam, AdamW, SGD with
momentum, RMSprop or Adagrad (two param groups) and saves it with
``rocksdcp::torch::Save``; or it loads a checkpoint with
``rocksdcp::torch::Load`` and saves what it then holds under another id. The
Python side is the same model, its parameters named as LibTorch names them,
and torch's optimizer of the same kind, in DCP's layout for LibTorch's fqns:
``get_state_dict(model, optimizer, options=StateDictOptions(
flatten_optimizer_state_dict=True))`` saved as ``{"model": ..., "optim":
...}``, with rocksdcp's planners (torch's own pickle the hyperparameters,
which C++ can't read).

Training numerics differ between LibTorch 1.13 and torch 2.x, so the tests
compare what each side loaded with what the other saved, exactly: never two
trajectories.
"""

import json
import subprocess

import pytest
import torch
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_state_dict,
                                                     set_state_dict)

import rocksdcp
import rocksdcp.torch as rt
from conftest import dcp, tool

# torch warns that it saves and loads in one process, without a group.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

FLAT = StateDictOptions(flatten_optimizer_state_dict=True)
CPP_STEPS = 3

# The options torch's optimizers have and LibTorch's lack, as a LibTorch
# checkpoint gives them: what LibTorch's optimizers do.
PYTHON_ONLY = {"maximize": False, "capturable": False, "differentiable": False,
               "foreach": None, "fused": None}


class InteropNet(torch.nn.Module):
    """interop_trainer.cc's InteropNet: the same attributes, so the same
    parameter names."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.fc1(x))))


def param_groups(net):
    """interop_trainer.cc's param groups: fc1 and norm, then fc2."""
    return [{"params": list(net.fc1.parameters()) + list(net.norm.parameters())},
            {"params": list(net.fc2.parameters())}]


# Torch's optimizer of each kind with the state tensors interop_trainer's
# has (amsgrad, momentum, centered), every other value unlike the C++ one,
# so that a load must set it. Floats where torch's defaults are ints
# (weight_decay=0): rocksdcp.torch.DefaultLoadPlanner loads a value into
# the type the destination holds.
KINDS = {
    "adam": lambda g: torch.optim.Adam(g, lr=0.5, betas=(0.5, 0.5), eps=0.5,
                                       weight_decay=0.5, amsgrad=True),
    "adamw": lambda g: torch.optim.AdamW(g, lr=0.5, betas=(0.5, 0.5), eps=0.5,
                                         weight_decay=0.5),
    "sgd": lambda g: torch.optim.SGD(g, lr=0.5, momentum=0.5, dampening=0.5,
                                     weight_decay=0.5),
    "rmsprop": lambda g: torch.optim.RMSprop(g, lr=0.5, alpha=0.5, eps=0.5, weight_decay=0.5,
                                             momentum=0.25, centered=True),
    "adagrad": lambda g: torch.optim.Adagrad(g, lr=0.5, lr_decay=0.5, weight_decay=0.5,
                                             initial_accumulator_value=0.5, eps=0.5),
}
HAS_STEP = {"adam", "adamw", "rmsprop", "adagrad"}


def interop_trainer(*args, check=True):
    """Runs the C++ program; returns the CompletedProcess, and with
    ``check`` the param groups it printed."""
    run = subprocess.run([tool("ROCKSDCP_INTEROP_TRAINER")] + [str(a) for a in args],
                         capture_output=True, text=True, timeout=300)
    if not check:
        return run
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(run.stdout)["param_groups"]


def read_checkpoint(store, cid):
    """Every item of checkpoint ``cid``, as it is stored: tensors, and
    bytes."""
    with rocksdcp.Store(store, read_only=True) as s:
        items = s.items(cid)
    state = {fqn: b"" if item[0] == "bytes" else
             torch.zeros(item[2], dtype=getattr(torch, item[1]))
             for fqn, item in items.items()}
    dcp.load(state, storage_reader=rt.StorageReader(store), checkpoint_id=cid,
             planner=rt.DefaultLoadPlanner())
    return state


def assert_stored_as(value, stored, key):
    """``value`` (of a state dict torch 2.x made) is exactly what a
    checkpoint ``stored``, in rocksdcp's encodings of Python values."""
    if isinstance(value, torch.Tensor):
        assert isinstance(stored, torch.Tensor), key
        assert value.dtype == stored.dtype and value.shape == stored.shape, (key, value, stored)
        assert torch.equal(value, stored), key
    elif value is None:
        assert stored == b"rocksdcp-json:null", (key, stored)
    elif isinstance(value, bool):
        assert stored.dtype == torch.bool and stored.dim() == 0, (key, stored)
        assert value == stored.item(), key
    elif isinstance(value, float):
        assert stored.dtype == torch.float64 and stored.dim() == 0, (key, stored)
        assert value == stored.item(), key
    elif isinstance(value, tuple):  # betas
        assert stored.dtype == torch.float64 and stored.shape == (len(value),), (key, stored)
        assert value == tuple(stored.tolist()), key
    else:
        pytest.fail("{}: a {} ({!r})".format(key, type(value).__name__, value))


def assert_checkpoint_holds(state, stored, prefix):
    """The checkpoint has exactly the keys of ``state`` under ``prefix``,
    each holding its value."""
    assert set(state) == {k[len(prefix):] for k in stored if k.startswith(prefix)}
    for key, value in state.items():
        assert_stored_as(value, stored[prefix + key], prefix + key)


def assert_groups_equal(osd, cpp_groups):
    """Every hyperparameter LibTorch's optimizer printed (``cpp_groups``)
    equals the flattened state dict's, exactly; the options only Python's
    optimizers have are what LibTorch's do."""
    for group in cpp_groups:
        for name in group["params"]:
            for key, value in group.items():
                if key == "params":
                    continue
                got = osd["param_groups.{}.{}".format(name, key)]
                want = tuple(value) if isinstance(value, list) else value
                assert got == want and type(got) is type(want), (name, key, got, want)


def python_only_options(osd):
    return {k: v for k, v in osd.items() if k.rsplit(".", 1)[-1] in PYTHON_ONLY}


def snapshot(osd):
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in osd.items()}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_libtorch_checkpoint_loads_into_set_state_dict_and_back(tmp_path, kind):
    store = tmp_path / "store"
    cpp_groups = interop_trainer("save", "--store", store, "--id", "cpp", "--optimizer", kind,
                                 "--steps", CPP_STEPS)
    stored = read_checkpoint(store, "cpp")

    # torch 2.x loads what LibTorch saved: the checkpoint has every key of
    # torch's optimizer of the kind (dcp.load would name a missing one).
    net = InteropNet()
    opt = KINDS[kind](param_groups(net))
    msd, osd = get_state_dict(net, opt, options=FLAT)
    state = {"model": msd, "optim": osd}
    dcp.load(state, storage_reader=rt.StorageReader(store), checkpoint_id="cpp",
             planner=rt.DefaultLoadPlanner())
    set_state_dict(net, opt, model_state_dict=state["model"], optim_state_dict=state["optim"],
                   options=FLAT)

    msd, osd = get_state_dict(net, opt, options=FLAT)
    assert_checkpoint_holds(msd, stored, "model.")
    assert_checkpoint_holds(osd, stored, "optim.")
    assert_groups_equal(osd, cpp_groups)
    python_only = python_only_options(osd)
    assert python_only and all(v is PYTHON_ONLY[k.rsplit(".", 1)[-1]]
                               for k, v in python_only.items()), python_only
    assert "param_groups.fc1.weight.betas.0" not in osd
    if kind in HAS_STEP:
        assert osd["state.fc2.bias.step"].item() == CPP_STEPS
    assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in cpp_groups]

    # torch 2.x trains on and saves; LibTorch's Load takes all of it.
    torch.manual_seed(5)
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(x), y).backward()
    opt.step()
    opt.param_groups[0]["lr"] = 0.0042  # As a scheduler would.
    opt.param_groups[1]["lr"] = 0.0021
    msd, osd = get_state_dict(net, opt, options=FLAT)
    saved_model, saved_optim = snapshot(msd), snapshot(osd)
    dcp.save({"model": msd, "optim": osd}, storage_writer=rt.StorageWriter(store),
             checkpoint_id="py", planner=rt.DefaultSavePlanner())

    cpp_groups = interop_trainer("load", "--store", store, "--id", "py", "--optimizer", kind,
                                 "--resave", "back")
    assert_groups_equal(saved_optim, cpp_groups)
    assert [g["lr"] for g in cpp_groups] == [0.0042, 0.0021]
    back = read_checkpoint(store, "back")
    assert_checkpoint_holds(saved_model, back, "model.")
    assert_checkpoint_holds(saved_optim, back, "optim.")
    if kind in HAS_STEP:
        assert saved_optim["state.fc2.bias.step"].item() == CPP_STEPS + 1


def train_and_save(store, cid, opt_fn, planner):
    net = InteropNet()
    opt = opt_fn(param_groups(net))
    torch.manual_seed(3)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(torch.randn(8, 6)), torch.randint(0, 3, (8,))).backward()
    opt.step()
    msd, osd = get_state_dict(net, opt, options=FLAT)
    saved = snapshot(osd)
    dcp.save({"model": msd, "optim": osd}, storage_writer=rt.StorageWriter(store),
             checkpoint_id=cid, planner=planner)
    return opt, saved


@pytest.mark.parametrize("kind, make", [
    # torch's defaults: Adam's weight_decay and SGD's dampening are the int
    # 0 (saved as int64), foreach picks an implementation.
    ("adam", lambda g: torch.optim.Adam(g, amsgrad=True, foreach=True)),
    ("sgd", lambda g: torch.optim.SGD(g, lr=0.01, momentum=0.9, foreach=False)),
])
def test_torchs_defaults_load_into_libtorch(tmp_path, kind, make):
    store = tmp_path / "store"
    opt, saved = train_and_save(store, "py", make, rt.DefaultSavePlanner())
    assert isinstance(opt.param_groups[0]["weight_decay"], int)
    cpp_groups = interop_trainer("load", "--store", store, "--id", "py", "--optimizer", kind,
                                 "--resave", "back")
    back = read_checkpoint(store, "back")
    for group, cpp in zip(opt.param_groups, cpp_groups):
        for key, value in cpp.items():
            if key != "params":
                want = list(group[key]) if isinstance(group[key], tuple) else group[key]
                assert value == want, (key, value, want)
    assert back["optim.param_groups.fc1.weight.weight_decay"].dtype == torch.float64
    for key, value in saved.items():
        if key.startswith("state."):
            assert torch.equal(back["optim." + key], value), key


def test_maximize_fails_the_libtorch_load_naming_it(tmp_path):
    store = tmp_path / "store"
    train_and_save(store, "py", lambda g: torch.optim.Adam(g, maximize=True),
                   rt.DefaultSavePlanner())
    run = interop_trainer("load", "--store", store, "--id", "py", "--optimizer", "adam",
                          "--resave", "back", check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "InvalidArgument: load of checkpoint 'py'" in run.stderr, run.stderr
    assert ("'optim.param_groups.fc1.weight.maximize' (and 5 more like it) is true, but "
            "LibTorch's optimizers minimize: they have no maximize option") in run.stderr
    assert "nothing was loaded" in run.stderr
    with rocksdcp.Store(store, read_only=True) as s:
        assert "back" not in s


def test_torchs_pickled_hyperparameters_fail_the_libtorch_load_naming_them(tmp_path):
    store = tmp_path / "store"
    train_and_save(store, "pickled", lambda g: torch.optim.SGD(g, lr=0.01, momentum=0.9),
                   dcp.DefaultSavePlanner())
    run = interop_trainer("load", "--store", store, "--id", "pickled", "--optimizer", "sgd",
                          "--resave", "back", check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    assert ("'optim.param_groups.fc1.weight.lr' (and 53 more like it) holds bytes that are not "
            "rocksdcp's encoding of data: a pickle") in run.stderr, run.stderr
    assert "save the checkpoint with rocksdcp.torch.DefaultSavePlanner" in run.stderr
