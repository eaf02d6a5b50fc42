"""torch's own distributed checkpoint (torch 1.13's save_state_dict /
load_state_dict) drives rocksdcp.torch's StorageWriter and StorageReader:
a real model and its Adam state, every dtype, the errors torch reports, and
checkpoints that cross between Python and the C++ library both ways."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import rocksdcp
import rocksdcp.torch as rt
from rocksdcp.torch import _compat
from conftest import flip_byte, sst_files, tool
from demo_model import assert_demo_state

dcp = rt.dcp


def save(path, checkpoint_id, state, planner=None, **kwargs):
    return dcp.save_state_dict(state, no_dist=True, planner=planner,
                               storage_writer=rt.StorageWriter(path, checkpoint_id, **kwargs))


def load(path, checkpoint_id, state, planner=None):
    dcp.load_state_dict(state, no_dist=True, planner=planner,
                        storage_reader=rt.StorageReader(path, checkpoint_id))


def same_bytes(a, b):
    """Equal bytes, element for element: NaNs compare as stored."""
    def raw(t):
        return t.contiguous().reshape(-1).view(torch.uint8)
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(raw(a), raw(b))


def failure(e):
    """The exception torch's CheckpointException wraps, of its only rank."""
    [(rank, wrapped)] = e.value.failures.items()
    assert rank == 0
    return wrapped[0] if isinstance(wrapped, tuple) else wrapped


def test_importing_rocksdcp_torch_makes_torch_dcp_importable():
    import torch.distributed._shard.checkpoint as shard_checkpoint
    assert dcp is shard_checkpoint
    assert not rt.IS_TORCH2
    if sys.version_info >= (3, 11) and torch.__version__.startswith("1.13"):
        assert _compat.FIX_APPLIED
    # The one class the fix touched is hashable; its default is shared, as
    # under Python 3.10.
    from torch.distributed._shard.sharded_tensor.metadata import (
        ShardedTensorMetadata, TensorProperties)
    assert hash(TensorProperties()) == hash(TensorProperties())
    assert ShardedTensorMetadata().tensor_properties is ShardedTensorMetadata().tensor_properties


# ---- A real model and its optimizer ----

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(1000, 128)
        layer = torch.nn.TransformerEncoderLayer(128, 4, 256, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2)
        self.norm = torch.nn.LayerNorm(128)
        self.head = torch.nn.Linear(128, 1000)

    def forward(self, tokens):
        return self.head(self.norm(self.encoder(self.embed(tokens))))


def train_step(model, optim, seed):
    torch.manual_seed(seed)  # The data and the dropout masks.
    tokens = torch.randint(0, 1000, (4, 16))
    optim.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten())
    loss.backward()
    optim.step()
    return loss.item()


def flat_state(model, optim):
    """The model's tensors under "model.", and the optimizer's state under
    optim.state.<param fqn>.<name>: the LibTorch adapter's names."""
    sd = {"model." + k: v for k, v in model.state_dict().items()}
    names = {p: n for n, p in model.named_parameters()}
    for p, state in optim.state.items():
        for k, v in state.items():
            sd["optim.state.{}.{}".format(names[p], k)] = v
    return sd


def fresh_adam_state(model, optim):
    """Gives a fresh Adam the state tensors a checkpoint loads into."""
    for p in model.parameters():
        optim.state[p] = {"step": torch.zeros(()), "exp_avg": torch.zeros_like(p),
                          "exp_avg_sq": torch.zeros_like(p)}


def test_transformer_and_adam_round_trip_and_train_on_identically(tmp_path):
    path = tmp_path / "store"
    torch.manual_seed(0)
    model = Model()
    adam = torch.optim.Adam(model.parameters(), lr=1e-3)
    for s in range(3):
        train_step(model, adam, s)
    saved = flat_state(model, adam)
    assert len(saved) > 100 and "optim.state.embed.weight.exp_avg_sq" in saved
    save(path, "step-3", saved)

    torch.manual_seed(1)
    restored = Model()
    restored_adam = torch.optim.Adam(restored.parameters(), lr=1e-3)
    fresh_adam_state(restored, restored_adam)
    target = flat_state(restored, restored_adam)
    load(path, "step-3", target)
    for k, v in saved.items():
        assert torch.equal(target[k], v), k
    for s in range(3, 6):
        assert train_step(model, adam, s) == train_step(restored, restored_adam, s)
    for (name, a), b in zip(model.state_dict().items(), restored.state_dict().values()):
        assert torch.equal(a, b), name


def test_every_dtype_and_strided_and_zero_dim_tensors(tmp_path):
    path = tmp_path / "store"
    g = torch.Generator().manual_seed(3)
    state = {}
    for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int8,
                  torch.int16, torch.int32, torch.int64, torch.uint8, torch.complex64,
                  torch.complex128):
        raw = torch.randint(0, 256, (6 * 5 * torch.tensor([], dtype=dtype).element_size(),),
                            dtype=torch.uint8, generator=g)
        state["t." + str(dtype)[6:]] = raw.view(dtype).reshape(6, 5)
    state["t.bool"] = torch.randint(0, 2, (6, 5), generator=g).bool()
    state["transposed"] = torch.randn(5, 7, generator=g).t()
    state["sliced"] = torch.randn(6, 8, generator=g)[:, 1::3]
    state["scalar"] = torch.tensor(2.5, dtype=torch.float64)
    save(path, "c", state)
    into = {k: torch.zeros_like(v).contiguous() for k, v in state.items()}
    # Load into a transposed destination too.
    into["transposed"] = torch.zeros(5, 7).t()
    load(path, "c", into)
    for k, v in state.items():
        assert v.dtype == into[k].dtype and v.shape == into[k].shape, k
        assert same_bytes(v, into[k]), k


def test_incremental_save_references_what_did_not_change(tmp_path):
    path = tmp_path / "store"
    g = torch.Generator().manual_seed(5)
    state = {"frozen": torch.randn(256, 256, generator=g),
             "lora": torch.randn(8, 256, generator=g)}
    save(path, "a", state)
    state["lora"] += 1
    save(path, "b", state, base_on_newest=True)
    with rocksdcp.Store(str(path)) as store:
        info = store.info("b")
        assert info.referenced_column_families == ["a"]
        assert info.referenced_bytes == 256 * 256 * 4
        store.delete("a")
    into = {k: torch.zeros_like(v) for k, v in state.items()}
    load(path, "b", into)
    for k, v in state.items():
        assert same_bytes(v, into[k]), k


def test_compressed_saves_are_smaller_and_load_bit_exact(tmp_path):
    g = torch.Generator().manual_seed(6)
    # Weights as a trained model's: small normal values, in bf16 and fp32.
    state = {"w.bf16": (torch.randn(512, 256, generator=g) * 0.02).to(torch.bfloat16),
             "w.fp32": torch.randn(256, 256, generator=g) * 0.02,
             "step": torch.tensor(7)}
    sizes = {}
    for name, compress in (("plain", False), ("packed", "always"),
                           ("adaptive", True)):
        path = tmp_path / name
        save(path, "c", state, compress=compress)
        sizes[name] = sum(os.path.getsize(f) for f in sst_files(str(path)))
        into = {k: torch.zeros_like(v) for k, v in state.items()}
        load(path, "c", into)
        for k, v in state.items():
            assert same_bytes(v, into[k]), (name, k)
    assert sizes["packed"] < 0.85 * sizes["plain"], sizes
    # A save of under a window (8 MiB) per thread is compressed whole,
    # whatever the disk.
    assert sizes["adaptive"] < 0.85 * sizes["plain"], sizes
    with pytest.raises(ValueError, match="compress must be"):
        rt.StorageWriter(tmp_path / "bad", "c", compress="zip")
    # An incremental save of the same state over the compressed one
    # references every piece, uncompressed as it is.
    save(tmp_path / "packed", "d", state, base="c")
    with rocksdcp.Store(str(tmp_path / "packed")) as store:
        info = store.info("d")
        assert info.referenced_bytes == info.bytes


# ---- Errors, as torch reports them ----

def test_missing_checkpoint_is_not_found(tmp_path):
    save(tmp_path / "store", "c", {"w": torch.ones(2)})
    with pytest.raises(dcp.CheckpointException) as e:
        load(tmp_path / "store", "other", {"w": torch.zeros(2)})
    err = failure(e)
    assert isinstance(err, rocksdcp.NotFound)
    assert "checkpoint 'other' not found in store" in str(err)
    assert "rocksdcp" in str(e.value) and "not found" in str(e.value)


def test_shape_mismatches_are_refused_before_any_byte(tmp_path):
    path = tmp_path / "store"
    save(path, "c", {"w": torch.arange(32.0).reshape(4, 8), "v": torch.ones(3),
                     "b": torch.ones(3)})
    into = {"w": torch.full((8, 4), -1.0), "v": torch.zeros(2),
            "b": torch.zeros(3, dtype=torch.float64)}
    with pytest.raises(dcp.CheckpointException) as e:
        load(path, "c", into)
    err = failure(e)
    assert isinstance(err, rocksdcp.InvalidArgument)
    assert str(err) == ("item 'w': shape mismatch: checkpoint has [4, 8], state dict has "
                        "[8, 4]; item 'v': shape mismatch: checkpoint has [3], state dict has "
                        "[2]")
    assert bool((into["w"] == -1).all())  # Not a byte copied.
    assert bool((into["b"] == 0).all())


def test_a_destination_of_another_dtype_gets_the_values_converted(tmp_path):
    # As torch's FileSystemReader does (target.copy_(tensor)).
    path = tmp_path / "store"
    w = torch.randn(64, 33)
    save(path, "c", {"w": w, "i": torch.arange(10, dtype=torch.int32)})
    into = {"w": torch.zeros(64, 33, dtype=torch.float64), "i": torch.zeros(10)}
    load(path, "c", into)
    assert into["w"].dtype == torch.float64 and torch.equal(into["w"], w.double())
    assert torch.equal(into["i"], torch.arange(10.0))


def test_locked_store_fails_the_save_naming_the_lock(tmp_path, lock_holder):
    path = tmp_path / "store"
    save(path, "c", {"w": torch.ones(2)})
    lock_holder(path)
    with pytest.raises(dcp.CheckpointException) as e:
        save(path, "d", {"w": torch.ones(2)})
    err = failure(e)
    assert isinstance(err, rocksdcp.Busy)
    assert "is locked by another process" in str(err)
    # Loads go on beside the writer.
    into = {"w": torch.zeros(2)}
    load(path, "c", into)
    assert torch.equal(into["w"], torch.ones(2))


def test_corrupt_piece_fails_the_load(tmp_path):
    path = tmp_path / "store"
    save(path, "c", {"w": torch.randn(256, 256)})
    flip_byte(sst_files(str(path))[0], 4096)
    with pytest.raises(dcp.CheckpointException) as e:
        load(path, "c", {"w": torch.zeros(256, 256)})
    err = failure(e)
    assert isinstance(err, rocksdcp.Corruption)
    assert "load of checkpoint 'c'" in str(err) and "item 'w" in str(err)


def test_a_failed_save_commits_nothing(tmp_path):
    path = tmp_path / "store"
    save(path, "keep", {"w": torch.ones(2)})
    bad = {"w": torch.ones(2), "meta": torch.empty(3, device="meta")}
    with pytest.raises(dcp.CheckpointException) as e:
        save(path, "bad", bad)
    assert isinstance(failure(e), rocksdcp.InvalidArgument)
    assert "item 'meta': tensor is on the meta device" in str(failure(e))
    with pytest.raises(dcp.CheckpointException) as e:
        save(path, "keep", {"w": torch.zeros(2)})
    assert isinstance(failure(e), rocksdcp.AlreadyExists)
    with rocksdcp.Store(path, read_only=True) as store:
        assert [c.id for c in store.list()] == ["keep"]
    into = {"w": torch.zeros(2)}
    load(path, "keep", into)
    assert torch.equal(into["w"], torch.ones(2))


def test_planner_data_is_plain_data_or_refused(tmp_path):
    path = tmp_path / "store"

    class Planner(rt.DefaultSavePlanner):
        data = None

        def create_global_plan(self, all_plans):
            plans, md = super().create_global_plan(all_plans)
            return plans, dataclasses.replace(md, planner_data=self.data)

    ok = Planner()
    ok.data = {"step": 7, "tags": ["a", "b"]}
    save(path, "c", {"w": torch.ones(2)}, planner=ok)
    reader = rt.StorageReader(path, "c")
    assert reader.read_metadata().planner_data == {"step": 7, "tags": ["a", "b"]}

    bad = Planner()
    bad.data = object()
    with pytest.raises(dcp.CheckpointException) as e:
        save(path, "d", {"w": torch.ones(2)}, planner=bad)
    assert isinstance(failure(e), rocksdcp.InvalidArgument)
    assert "never pickles" in str(failure(e))


def test_byte_items_are_bytes_and_other_values_are_data(tmp_path):
    path = tmp_path / "store"
    save(path, "c", {"blob": b"\x00\x01raw", "w": torch.ones(1)}, planner=rt.DefaultSavePlanner())
    assert rocksdcp.Store(path, read_only=True).load_bytes("c", "blob") == {"blob": b"\x00\x01raw"}
    into = {"blob": b"", "w": torch.zeros(1)}
    load(path, "c", into, planner=rt.DefaultLoadPlanner())
    assert into["blob"] == b"\x00\x01raw"
    # Numbers as tensors (a C++ reader reads them), other plain data
    # encoded; what is not plain data is refused.
    state = {"lr": 0.5, "step": 3, "on": True, "betas": (0.9, 0.999), "name": "adam",
             "none": None, "ids": [1, 2]}
    save(path, "d", state, planner=rt.DefaultSavePlanner())
    items = rocksdcp.Store(path, read_only=True).items("d")
    assert items["lr"] == ("tensor", "float64", ()) and items["step"] == ("tensor", "int64", ())
    assert items["betas"] == ("tensor", "float64", (2,))
    assert items["ids"] == ("tensor", "int64", (2,)) and items["on"] == ("tensor", "bool", ())
    assert items["name"] == items["none"] == ("bytes",)
    into = {"lr": 0.0, "step": 0, "on": False, "betas": (0.0, 0.0), "name": "", "none": 1,
            "ids": [0, 0]}
    load(path, "d", into, planner=rt.DefaultLoadPlanner())
    assert into == state
    assert type(into["step"]) is int and type(into["betas"]) is tuple
    with pytest.raises(dcp.CheckpointException) as e:
        save(path, "e", {"obj": object()}, planner=rt.DefaultSavePlanner())
    assert "item 'obj': a builtins.object is not plain data" in str(e.value)


# ---- Between C++ and Python ----

def test_a_checkpoint_of_the_cpp_demo_loads_in_python(tmp_path):
    store = tmp_path / "demo"
    subprocess.run([tool("ROCKSDCP_DEMO"), str(store)], check=True, stdout=subprocess.DEVNULL)
    items = rocksdcp.Store(store, read_only=True).items("step-300")
    state = {}
    for fqn, item in items.items():
        state[fqn] = b"" if item[0] == "bytes" else torch.zeros(item[2], dtype=getattr(torch, item[1]))
    load(store, "step-300", state, planner=rt.DefaultLoadPlanner())
    assert_demo_state(state, 300)


def test_a_python_checkpoint_is_read_by_the_cli(tmp_path):
    cli = tool("ROCKSDCP_CLI")
    path = tmp_path / "store"
    g = torch.Generator().manual_seed(11)
    state = {"layer.weight": torch.randn(32, 16, generator=g).to(torch.bfloat16),
             "layer.bias": torch.randn(16, generator=g),
             "step": torch.tensor(7, dtype=torch.int64)}
    save(path, "py", state)
    verify = subprocess.run([cli, "verify", str(path), "py"], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr

    out = tmp_path / "py.safetensors"
    subprocess.run([cli, "export", str(path), "py", "--safetensors", str(out)], check=True,
                   capture_output=True)
    reader = os.path.join(os.environ["ROCKSDCP_SOURCE_DIR"], "tests", "tools", "read_safetensors.py")
    parsed = json.loads(subprocess.run([sys.executable, reader, str(out)], check=True,
                                       capture_output=True, text=True).stdout)
    by_name = {t["name"]: t for t in parsed["tensors"]}
    for fqn, t in state.items():
        got = by_name[fqn]
        assert got["shape"] == list(t.shape)
        expected = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
        assert bytes.fromhex(got["hex"]) == expected.contiguous().numpy().tobytes(), fqn

    ldb = os.environ.get("ROCKSDCP_LDB")
    if ldb:  # RocksDB's stock tool lists the checkpoint's keys.
        scan = subprocess.run([ldb, "--db=" + str(path), "--column_family=py", "scan",
                               "--no_value"], check=True, capture_output=True, text=True)
        keys = scan.stdout.split()
        assert "__metadata__" in keys and "layer.bias@0#00000000" in keys, keys

    npy = tmp_path / "bias.npy"
    subprocess.run([cli, "dump", str(path), "py", "layer.bias", "--npy", str(npy)], check=True,
                   capture_output=True)
    assert np.array_equal(np.load(npy), state["layer.bias"].numpy())
