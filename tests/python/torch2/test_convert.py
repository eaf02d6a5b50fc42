"""rocksdcp.torch.convert moves an existing DCP checkpoint in and out: a
directory written by torch's FileSystemWriter (dcp.save) is imported into a
store, loads through rocksdcp's StorageReader as saved, and is exported to a
directory that torch's FileSystemReader loads as saved; bit for bit, the
chunks and metadata of the original, the byte items' bytes those of the
original files (issue #37). Neither direction holds the state dict: a few
chunks are in memory at a time."""

import dataclasses
import os
import pty
import struct
import subprocess
import sys
import weakref

import pytest
import torch
from torch.distributed.checkpoint.state_dict import get_state_dict

import rocksdcp
import rocksdcp.torch as rt
from conftest import dcp, torchrun
from dcp_sharded_save import full_state
from rocksdcp.torch import convert

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# ---- What was saved, and what came back ----

def raw(t):
    """``t``'s elements in C order as bytes (a uint8 tensor): equal raw
    bytes are equal bits, NaN payloads and -0.0 included."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def from_bits(dtype, fmt, words):
    return torch.frombuffer(bytearray(struct.pack("<{}{}".format(len(words), fmt), *words)),
                            dtype=dtype).clone()


def training_state():
    """A training job's state: a model (several dtypes), its AdamW state
    after a step (torch's get_state_dict: fqn keys, a 0-d step, Python
    hyperparameters), a bf16 copy, special values by their bits, 0-d,
    empty and non-contiguous tensors, and Python values that torch's
    planner pickles."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(128, 32), torch.nn.Linear(32, 64),
                                torch.nn.LayerNorm(64), torch.nn.Linear(64, 16))
    optim = torch.optim.AdamW(model.parameters(), lr=3e-4)
    model(torch.randint(0, 128, (4, 8))).sum().backward()
    optim.step()
    model_sd, optim_sd = get_state_dict(model, optim)
    base = torch.randn(40, 24)
    return {
        "model": model_sd,
        "optim": optim_sd,
        "ema": {k: v.to(torch.bfloat16) for k, v in model_sd.items()},
        "extra": {
            "nan": from_bits(torch.float32, "I", [0x7FC00000, 0xFFC00001, 0x7F800001, 0x80000000,
                                                  0x00000001, 0x7F800000, 0xFF800000]),
            "half": from_bits(torch.float16, "H", [0x7E00, 0xFE01, 0x8000, 0x0001, 0x7C00]),
            "scalar": torch.tensor(-0.0, dtype=torch.float64),
            "empty": torch.empty(0, 5, dtype=torch.int16),
            "transposed": base.t(),
            "strided": base[::3, 1::2],
            "mask": torch.rand(33) > 0.5,
            "counts": torch.arange(-50, 50, dtype=torch.int8),
            "e4m3": torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn),
            "rng": torch.get_rng_state(),
            "epoch": 7,
            "name": "run-12",
            "raw": b"\x00\xff raw",
        },
    }


def is_leaf(x):
    """A value torch's flattening keeps whole (a tensor, or what it
    pickles): not a dict, nor a list holding a tensor, dict or such list
    (torch.distributed.checkpoint._traverse)."""
    if isinstance(x, dict):
        return False
    if isinstance(x, list):
        return not any(isinstance(v, torch.Tensor) or not is_leaf(v) for v in x)
    return True


def blank(x):
    """A destination of ``x``'s structure: zeros for tensors, "unset" for
    the values torch pickles."""
    if isinstance(x, torch.Tensor):
        return torch.zeros(x.shape, dtype=x.dtype)
    if is_leaf(x):
        return "unset"
    if isinstance(x, dict):
        return {k: blank(v) for k, v in x.items()}
    return [blank(v) for v in x]


def assert_same(got, want, path="state"):
    """``got`` is ``want``: tensors of the same dtype, shape and bits,
    other values equal."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), path
        assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), path
        assert torch.equal(raw(got), raw(want)), path
    elif is_leaf(want):
        assert got == want, path
    elif isinstance(want, dict):
        assert sorted(got, key=str) == sorted(want, key=str), path
        for k in want:
            assert_same(got[k], want[k], "{}.{}".format(path, k))
    else:
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, "{}.{}".format(path, i))


def load_from_store(store, cid, like):
    into = blank(like)
    dcp.load(into, storage_reader=rt.StorageReader(store), checkpoint_id=cid)
    return into


def load_from_directory(directory, like):
    into = blank(like)
    dcp.load(into, storage_reader=dcp.FileSystemReader(directory))
    return into


def directory_metadata(directory):
    return dcp.FileSystemReader(directory).read_metadata()


def directory_byte_items(directory):
    """{fqn: bytes} of a DCP directory's byte items, read from the slice
    of its file that its .metadata names."""
    md = directory_metadata(directory)
    out = {}
    for fqn, item in md.state_dict_metadata.items():
        if isinstance(item, dcp.BytesStorageMetadata):
            info = md.storage_data[dcp.metadata.MetadataIndex(fqn)]
            with open(os.path.join(directory, info.relative_path), "rb") as f:
                f.seek(info.offset)
                out[fqn] = f.read(info.length)
    return out


def without_strides(items):
    """A Metadata's state_dict_metadata without TensorProperties.strides,
    which torch 2.15's planner records (the saved tensor's strides) and
    its readers never use, and rocksdcp's metadata does not hold."""
    out = {}
    for fqn, md in items.items():
        if isinstance(md, dcp.metadata.TensorStorageMetadata) and getattr(
                md.properties, "strides", None) is not None:
            md = dataclasses.replace(md, properties=dataclasses.replace(md.properties,
                                                                        strides=None))
        out[fqn] = md
    return out


def assert_same_checkpoint(got_md, want_md):
    """Two torch Metadata hold the same items (dtype, properties, size)
    in the same chunks, and the same planner_data."""
    assert without_strides(got_md.state_dict_metadata) == without_strides(
        want_md.state_dict_metadata)
    assert got_md.planner_data == want_md.planner_data


def round_trip(tmp_path, state, directory):
    """Imports ``directory`` (dcp.save of ``state``), checks what the store
    holds and loads, exports it, and checks what torch's reader loads of
    the export. Returns the export's directory."""
    store = tmp_path / "store"
    md = convert.import_dcp(directory, store, "imported")
    original = directory_metadata(directory)
    assert_same_checkpoint(md, original)
    assert_same_checkpoint(rt.StorageReader(store, "imported").read_metadata(), original)
    assert_same(load_from_store(store, "imported", state), state)
    byte_items = directory_byte_items(directory)
    assert byte_items and rocksdcp.Store(store, read_only=True).load_bytes(
        "imported", list(byte_items)) == byte_items

    out = tmp_path / "exported"
    convert.export_dcp(store, "imported", out)
    assert_same_checkpoint(directory_metadata(out), original)
    assert_same(load_from_directory(out, state), state)
    assert directory_byte_items(out) == byte_items
    return out


# ---- Round trips ----

def test_a_training_checkpoint_moves_in_and_out_bit_for_bit(tmp_path):
    state = training_state()
    directory = tmp_path / "dcp"
    dcp.save(state, checkpoint_id=directory)
    round_trip(tmp_path, state, directory)


def test_a_checkpoint_saved_by_two_processes_keeps_its_chunks(tmp_path):
    directory = tmp_path / "dcp"
    torchrun("dcp_sharded_save.py", 2, directory)
    md = directory_metadata(directory)
    sharded = [fqn for fqn, item in md.state_dict_metadata.items()
               if isinstance(item, dcp.metadata.TensorStorageMetadata) and len(item.chunks) == 2]
    assert len(sharded) == 5
    out = round_trip(tmp_path, full_state(), directory)
    # Each chunk is read where it was saved: the store holds both chunks.
    store_md = rt.StorageReader(tmp_path / "store", "imported").read_metadata()
    assert [len(store_md.state_dict_metadata[fqn].chunks) for fqn in sharded] == [2] * 5
    assert_same(load_from_directory(out, full_state()), full_state())


def test_an_overwrite_replaces_the_checkpoint(tmp_path):
    store = tmp_path / "store"
    first, second = tmp_path / "first", tmp_path / "second"
    dcp.save({"w": torch.ones(4), "step": 1}, checkpoint_id=first)
    dcp.save({"w": torch.full((4,), 2.0), "step": 2}, checkpoint_id=second)
    convert.import_dcp(first, store, "c")
    with pytest.raises(rocksdcp.AlreadyExists) as e:
        convert.import_dcp(second, store, "c")
    assert "checkpoint 'c' already exists" in str(e.value)
    assert_same(load_from_store(store, "c", {"w": torch.ones(4), "step": 1}),
                {"w": torch.ones(4), "step": 1})
    convert.import_dcp(second, store, "c", overwrite=True)
    assert_same(load_from_store(store, "c", {"w": torch.ones(4), "step": 0}),
                {"w": torch.full((4,), 2.0), "step": 2})


# ---- Bounded memory ----

def counting(planner_class):
    """``planner_class`` counting the chunk tensors it resolved that are
    still alive, and the most alive at once."""

    class Counting(planner_class):
        alive = most_alive = resolved = 0

        @classmethod
        def _gone(cls):
            cls.alive -= 1

        def resolve_data(self, write_item):
            data = super().resolve_data(write_item)
            if isinstance(data, torch.Tensor):
                cls = type(self)
                cls.alive += 1
                cls.resolved += 1
                cls.most_alive = max(cls.most_alive, cls.alive)
                weakref.finalize(data, cls._gone)
            return data

    return Counting


def big_state():
    return {"layers": {str(i): torch.full((512, 512), float(i)) for i in range(64)},
            "step": 100}


def test_import_holds_a_few_chunks_at_a_time(tmp_path, monkeypatch):
    state = big_state()  # 64 tensors of 1 MiB.
    directory = tmp_path / "dcp"
    dcp.save(state, checkpoint_id=directory)
    planner = counting(convert.DirectoryPlanner)
    monkeypatch.setattr(convert, "DirectoryPlanner", planner)
    convert.import_dcp(directory, tmp_path / "store", "c")
    assert planner.resolved == 64
    # One chunk per writer thread (and the cores are few), let go of once
    # written: never every chunk at once.
    assert planner.most_alive <= 8
    assert planner.alive == 0
    assert_same(load_from_store(tmp_path / "store", "c", state), state)


def test_export_holds_a_file_of_chunks_at_a_time(tmp_path, monkeypatch):
    state = big_state()
    store = tmp_path / "store"
    dcp.save(state, storage_writer=rt.StorageWriter(store), checkpoint_id="c")
    planner = counting(convert.StorePlanner)
    monkeypatch.setattr(convert, "StorePlanner", planner)
    out = tmp_path / "out"
    convert.export_dcp(store, "c", out, max_file_bytes=4 << 20)
    assert planner.resolved == 64
    # torch's FileSystemWriter keeps a file's tensors until it is written:
    # a file holds 4 MiB, 4 chunks.
    assert planner.most_alive <= 5
    assert planner.alive == 0
    assert len([n for n in os.listdir(out) if n.endswith(".distcp")]) == 16
    assert_same(load_from_directory(out, state), state)


# ---- Errors ----

def test_import_refuses_a_missing_directory_or_one_without_metadata(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        convert.import_dcp(tmp_path / "nope", tmp_path / "store", "c")
    assert "DCP checkpoint directory '{}' does not exist".format(tmp_path / "nope") in str(e.value)
    directory = tmp_path / "dcp"
    dcp.save({"w": torch.ones(2)}, checkpoint_id=directory)
    os.remove(directory / ".metadata")
    with pytest.raises(FileNotFoundError) as e:
        convert.import_dcp(directory, tmp_path / "store", "c")
    assert "holds no DCP checkpoint: it has no .metadata file" in str(e.value)
    assert not os.path.exists(tmp_path / "store")


def test_a_damaged_chunk_fails_the_import_naming_it_and_commits_nothing(tmp_path):
    directory = tmp_path / "dcp"
    dcp.save({"a": torch.ones(1000), "b": torch.zeros(1000)}, checkpoint_id=directory)
    info = directory_metadata(directory).storage_data[dcp.metadata.MetadataIndex("b", [0])]
    path = directory / info.relative_path
    data = bytearray(path.read_bytes())
    del data[info.offset + info.length // 2:info.offset + info.length]  # Cut "b" short.
    path.write_bytes(bytes(data))
    with pytest.raises(rocksdcp.Error) as e:
        convert.import_dcp(directory, tmp_path / "store", "c")
    message = str(e.value)
    assert "DCP checkpoint '{}': item 'b' (chunk at [0]): cannot read it".format(
        directory) in message and info.relative_path in message
    assert "c" not in rocksdcp.Store(tmp_path / "store", read_only=True)


def test_export_refuses_a_missing_checkpoint_or_a_directory_in_use(tmp_path):
    store = tmp_path / "store"
    dcp.save({"w": torch.ones(2)}, storage_writer=rt.StorageWriter(store), checkpoint_id="c")
    with pytest.raises(rocksdcp.NotFound) as e:
        convert.export_dcp(store, "nope", tmp_path / "out")
    assert "checkpoint 'nope' not found in store" in str(e.value)
    assert not os.path.exists(tmp_path / "out")
    with pytest.raises(rocksdcp.NotFound):
        convert.export_dcp(tmp_path / "no-store", "c", tmp_path / "out")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError) as e:
        convert.export_dcp(store, "c", tmp_path / "used")
    assert "is not empty" in str(e.value)
    assert os.listdir(tmp_path / "used") == ["keep.txt"]


def test_a_damaged_store_fails_the_export_and_leaves_no_directory(tmp_path):
    store = tmp_path / "store"
    torch.manual_seed(0)
    state = {"t": {str(i): torch.randn(256, 256) for i in range(16)}}  # 4 MiB.
    dcp.save(state, storage_writer=rt.StorageWriter(store), checkpoint_id="c")
    # A byte flipped in the middle of the store's data, as a bad disk does.
    sst = max(store.glob("*.sst"), key=lambda p: p.stat().st_size)
    data = bytearray(sst.read_bytes())
    data[len(data) // 2] ^= 0xFF
    sst.write_bytes(bytes(data))
    with pytest.raises(rocksdcp.Corruption) as e:
        convert.export_dcp(store, "c", tmp_path / "out", max_file_bytes=1 << 20)
    assert "load of checkpoint 'c'" in str(e.value) and "block checksum mismatch" in str(e.value)
    assert not os.path.exists(tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(rocksdcp.Corruption):
        convert.export_dcp(store, "c", tmp_path / "empty", max_file_bytes=1 << 20)
    assert os.listdir(tmp_path / "empty") == []


# ---- The command line ----

def run(*args, stderr=subprocess.PIPE):
    return subprocess.run([sys.executable, "-m", "rocksdcp.torch.convert"] + [str(a) for a in args],
                          stdout=subprocess.PIPE, stderr=stderr, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))


def test_the_command_imports_and_exports_with_a_line_per_quarter(tmp_path):
    state = {"t": {str(i): torch.full((64, 64), float(i)) for i in range(8)}, "step": 3}
    directory = tmp_path / "dcp"
    dcp.save(state, checkpoint_id=directory)
    store = tmp_path / "store"
    r = run("import", directory, store, "step-3")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("imported 8 tensors in 8 chunks (128.0 KiB), 1 byte item from {} into "
                        "store {} as checkpoint step-3\n".format(directory, store))
    quarters = [line.split(":")[1].split("%")[0].strip() for line in r.stderr.splitlines()
                if line.startswith("import: ")]
    assert quarters == ["25", "50", "75", "100"], r.stderr
    assert_same(load_from_store(store, "step-3", state), state)

    out = tmp_path / "out"
    r = run("export", store, "step-3", out)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("exported checkpoint step-3 of store {}: 8 tensors".format(store))
    assert "export: 100% (128.0 KiB of 128.0 KiB of tensor data)" in r.stderr
    assert_same(load_from_directory(out, state), state)


def test_the_command_draws_a_bar_on_a_terminal(tmp_path):
    directory = tmp_path / "dcp"
    dcp.save({"w": torch.ones(1000)}, checkpoint_id=directory)
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocksdcp.torch.convert", "import", str(directory),
         str(tmp_path / "store"), "c"],
        stdout=subprocess.PIPE, stderr=terminal, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    os.close(terminal)
    seen = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the process and its terminal are gone.
            break
        if not chunk:
            break
        seen += chunk
    os.close(controller)
    assert proc.wait() == 0
    proc.stdout.close()
    text = seen.decode()
    assert "\rimport [" in text and "100% 3.9 KiB of 3.9 KiB" in text
    assert "25% (" not in text


def test_the_command_fails_naming_what_is_wrong(tmp_path):
    r = run("import", tmp_path / "nope", tmp_path / "store", "c")
    assert r.returncode == 1
    assert r.stderr == ("python -m rocksdcp.torch.convert import: FileNotFoundError: DCP "
                        "checkpoint directory '{}' does not exist\n".format(tmp_path / "nope"))

    directory = tmp_path / "dcp"
    dcp.save({"w": torch.ones(2)}, checkpoint_id=directory)
    convert.import_dcp(directory, tmp_path / "store", "c")
    r = run("import", directory, tmp_path / "store", "c")
    assert r.returncode == 1
    assert r.stderr.startswith("python -m rocksdcp.torch.convert import: AlreadyExists: "
                               "checkpoint 'c' already exists in store")
    assert r.stderr.endswith("(pass --overwrite to replace it)\n")

    r = run("export", tmp_path / "store", "nope", tmp_path / "out")
    assert r.returncode == 1
    assert r.stderr.startswith("python -m rocksdcp.torch.convert export: NotFound: "
                               "checkpoint 'nope' not found in store")
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("args", [[], ["convert"], ["import", "dir", "store"],
                                  ["export", "s", "i", "d", "--overwrite"]])
def test_bad_usage_exits_2(args):
    r = run(*args)
    assert r.returncode == 2 and r.stderr.startswith("usage: python -m rocksdcp.torch.convert")
