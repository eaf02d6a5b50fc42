"""HuggingFace's ``safetensors`` library (PyPI), not a script of ours, reads
what ``rocksdcp export --safetensors`` writes of a checkpoint torch 2.x's
``dcp.save`` saved, and ``rocksdcp import`` reads what
``safetensors.torch.save_file`` writes: bit for bit, every dtype both know,
NaN payloads, infinities and -0.0 included, compared as raw bytes (issue
#37). The CLI is the build's (``ROCKSDCP_CLI``, set by ctest)."""

import base64
import io
import json
import struct
import subprocess

import pytest
import safetensors
import safetensors.torch as st
import torch

import rocksdcp
import rocksdcp.torch as rt
from conftest import dcp, tool, torchrun
from dcp_sharded_save import full_state

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# safetensors' names of torch's dtypes: every one both have (bare F8_E4M3
# is torch's float8_e4m3fn; rocksdcp has no F4 or F6, as torch has none
# but a packed float4 pair).
ST_DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
    torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32",
    torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL",
    torch.complex64: "C64",
}
for _name, _st in [("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2"),
                   ("float8_e4m3fnuz", "F8_E4M3FNUZ"), ("float8_e5m2fnuz", "F8_E5M2FNUZ"),
                   ("float8_e8m0fnu", "F8_E8M0"),
                   ("uint16", "U16"), ("uint32", "U32"), ("uint64", "U64")]:
    if hasattr(torch, _name):
        ST_DTYPES[getattr(torch, _name)] = _st


def cli(*args):
    proc = subprocess.run([tool("ROCKSDCP_CLI")] + [str(a) for a in args],
                          capture_output=True, text=True)
    assert proc.returncode == 0, "rocksdcp {} exited {}:\n{}".format(
        " ".join(str(a) for a in args), proc.returncode, proc.stderr)
    return proc


def raw(t):
    """The bytes of ``t``'s elements in C order, as a uint8 tensor: equal
    raw bytes are equal bits, NaN payloads and -0.0 included."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def raw_bytes(t):
    return bytes(raw(t).clone().untyped_storage())


def assert_same_bits(got, want, name):
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (name, got.shape, want.shape)
    assert torch.equal(raw(got), raw(want)), name


def from_bits(dtype, fmt, words):
    """A 1-d tensor of ``dtype`` whose elements have exactly these bits."""
    return torch.frombuffer(bytearray(struct.pack("<{}{}".format(len(words), fmt), *words)),
                            dtype=dtype).clone()


def special_values():
    """Quiet and signalling NaNs with payloads and either sign, infinities,
    -0.0, subnormals and the extremes, by their bits."""
    return {
        "special.f64": from_bits(torch.float64, "Q", [
            0x7FF8000000000000, 0xFFF8000000000001, 0x7FF0000000000001, 0x7FF0000000000000,
            0xFFF0000000000000, 0x8000000000000000, 0x0000000000000001, 0x7FEFFFFFFFFFFFFF]),
        "special.f32": from_bits(torch.float32, "I", [
            0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FBFFFFF, 0x7F800000, 0xFF800000,
            0x80000000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF]),
        "special.f16": from_bits(torch.float16, "H", [
            0x7E00, 0xFE01, 0x7C01, 0x7C00, 0xFC00, 0x8000, 0x0001, 0x7BFF]),
        "special.bf16": from_bits(torch.bfloat16, "H", [
            0x7FC0, 0xFFC1, 0x7F81, 0x7F80, 0xFF80, 0x8000, 0x0001, 0x7F7F]),
        # Every byte, as each float8.
        "special.e4m3": torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn),
        "special.e5m2": torch.arange(256, dtype=torch.uint8).view(torch.float8_e5m2),
    }


def dtype_zoo(g):
    """A tensor of every dtype safetensors knows, random bits."""
    zoo = {}
    for dtype in ST_DTYPES:
        size = torch.empty((), dtype=dtype).element_size()
        bits = torch.randint(0, 256, (40, 48 * size), dtype=torch.uint8, generator=g)
        if dtype == torch.bool:
            bits &= 1  # A bool is 0 or 1.
        zoo["zoo." + ST_DTYPES[dtype].lower()] = bits.view(dtype)
    return zoo


def training_state():
    """What a training job saves: a model and its AdamW state after a step
    (nested, through torch's flattening), a bf16 copy, every dtype, special
    values, 0-d, empty and non-contiguous tensors, and Python values that
    torch's planner pickles. About 2 MB."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Embedding(512, 64), torch.nn.Linear(64, 256),
                                torch.nn.LayerNorm(256), torch.nn.Linear(256, 64))
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randint(0, 512, (4, 8))).sum().backward()
    optim.step()
    base = torch.randn(96, 80, generator=g)
    tensors = {
        "scalar.f32": torch.tensor(-0.0),
        "scalar.i64": torch.tensor(-(2**62) - 3),
        "scalar.bool": torch.tensor(True),
        "empty.rows": torch.empty(0, 7),
        "empty.cols": torch.empty(5, 0, dtype=torch.bfloat16),
        "empty.flat": torch.empty(0, dtype=torch.int8),
        "view.transposed": base.t(),
        "view.strided": base[::3, 1::2],
        "view.permuted": torch.randn(6, 5, 4, generator=g).permute(2, 0, 1),
        "view.channels_last": torch.randn(2, 3, 8, 8, generator=g).to(
            memory_format=torch.channels_last),
        "view.expanded": torch.randn(1, 64, generator=g).expand(16, 64),
    }
    tensors.update(special_values())
    tensors.update(dtype_zoo(g))
    return {
        "model": model.state_dict(),
        "model_bf16": {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()},
        "optim": optim.state_dict(),
        "t": tensors,
        "epoch": 3,
        "note": "runs on a 2-core machine",
    }


def tensors_of(state, prefix=""):
    """{fqn: tensor} as torch's flattening names the tensors of ``state``
    (model.state_dict() keys and optimizer state keys joined with dots)."""
    out = {}
    for key, value in state.items():
        name = "{}{}".format(prefix, key)
        if isinstance(value, torch.Tensor):
            out[name] = value
        elif isinstance(value, dict):
            out.update(tensors_of(value, name + "."))
    return out


def read_file(path):
    """(header as parsed JSON, data) of a safetensors file."""
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def metadata_rule(byte_items):
    """The ``__metadata__`` that export writes for ``byte_items`` ({fqn:
    bytes}), as tools/README.md says: a UTF-8 value as itself, any other
    base64, its name listed under rocksdcp.base64_items."""
    md, encoded = {}, []
    for fqn, value in byte_items.items():
        try:
            md[fqn] = value.decode("utf-8")
        except UnicodeDecodeError:
            md[fqn] = base64.b64encode(value).decode("ascii")
            encoded.append(fqn)
    return md, encoded


def check_export(path, want_tensors, byte_items):
    """``path`` (what export wrote) read by safetensors' load_file and
    safe_open: the same names, dtypes, shapes and bits as ``want_tensors``,
    and byte items in ``__metadata__`` as metadata_rule says."""
    loaded = st.load_file(str(path))
    assert sorted(loaded) == sorted(want_tensors)
    for name, want in want_tensors.items():
        assert_same_bits(loaded[name], want, name)
    with safetensors.safe_open(str(path), framework="pt") as f:
        assert sorted(f.keys()) == sorted(want_tensors)
        for name, want in want_tensors.items():
            assert f.get_slice(name).get_dtype() == ST_DTYPES[want.dtype], name
            assert f.get_slice(name).get_shape() == list(want.shape), name
            assert_same_bits(f.get_tensor(name), want, name)
        metadata = f.metadata() or {}
    want_md, encoded = metadata_rule(byte_items)
    listed = json.loads(metadata.pop("rocksdcp.base64_items", "[]"))
    assert metadata == want_md
    assert sorted(listed) == sorted(encoded)
    return loaded, metadata


# ---- export: what dcp.save saved, read by safetensors ----

def test_safetensors_reads_an_exported_training_checkpoint_bit_for_bit(tmp_path):
    state = training_state()
    store = tmp_path / "store"
    dcp.save(state, storage_writer=rt.StorageWriter(store), checkpoint_id="step-1")
    out = tmp_path / "step-1.safetensors"
    proc = cli("export", store, "step-1", "--safetensors", out)
    assert "wrote" in proc.stdout

    want = tensors_of(state)
    assert len(want) > 50 and sum(t.nbytes for t in want.values()) > 1_000_000
    items = rocksdcp.Store(store, read_only=True).items("step-1")
    byte_fqns = [fqn for fqn, item in items.items() if item == ("bytes",)]
    # torch's planner pickled every Python value: the optimizer's
    # param_groups, the epoch, the note.
    assert "epoch" in byte_fqns and "optim.param_groups.0.lr" in byte_fqns
    byte_items = rocksdcp.Store(store, read_only=True).load_bytes("step-1", byte_fqns)
    _, metadata = check_export(out, want, byte_items)
    # The pickles come back whole: base64 of exactly the bytes the store
    # holds, and torch unpickles them into the values saved.
    assert torch.load(io.BytesIO(base64.b64decode(metadata["epoch"])), weights_only=True) == 3
    assert torch.load(io.BytesIO(base64.b64decode(metadata["optim.param_groups.0.betas"])),
                      weights_only=True) == (0.9, 0.999)


def test_export_aligns_each_tensor_as_safetensors_own_writer_does(tmp_path):
    # tools/README.md: the header padded with spaces to a multiple of 8,
    # then the tensors by element size (largest first) and name, each
    # aligned to its element size, in C order. (safetensors' own writer
    # orders by dtype, then name: the same alignment, another order.)
    want = tensors_of(training_state())
    store = tmp_path / "store"
    dcp.save(want, storage_writer=rt.StorageWriter(store), checkpoint_id="c")
    out = tmp_path / "c.safetensors"
    cli("export", store, "c", "--safetensors", out)
    file = out.read_bytes()
    n = struct.unpack("<Q", file[:8])[0]
    text = file[8:8 + n]
    assert n % 8 == 0 and text.rstrip(b" ").endswith(b"}")
    header, data = read_file(out)
    assert "__metadata__" not in header
    entries = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"])
    size = {name: t.element_size() for name, t in want.items()}
    assert [name for name, _ in entries] == sorted(want, key=lambda name: (-size[name], name))
    offset = 0
    for name, entry in entries:
        begin, end = entry["data_offsets"]
        assert begin == offset and (8 + n + begin) % size[name] == 0, name
        assert data[begin:end] == raw_bytes(want[name]), name
        offset = end
    assert offset == len(data)


def test_export_writes_utf8_byte_items_as_text_and_others_as_listed_base64(tmp_path):
    # rocksdcp's planner keeps bytes as they are and plain data as JSON
    # text; numbers become tensors.
    store = tmp_path / "store"
    state = {"w": torch.arange(6.0).reshape(2, 3),
             "text": b"caf\xc3\xa9 \xe2\x9c\x93",   # UTF-8: as itself.
             "empty": b"",
             "binary": bytes(range(256)),          # Not UTF-8: base64.
             "looks_base64": b"AAEC",              # UTF-8 text, kept as text.
             "config": {"name": "adamw", "layers": ["attn", "mlp"]},
             "lr": 0.5}
    dcp.save(state, storage_writer=rt.StorageWriter(store), checkpoint_id="c",
             planner=rt.DefaultSavePlanner())
    out = tmp_path / "c.safetensors"
    cli("export", store, "c", "--safetensors", out)
    byte_fqns = ["text", "empty", "binary", "looks_base64", "config.name", "config.layers"]
    byte_items = rocksdcp.Store(store, read_only=True).load_bytes("c", byte_fqns)
    assert byte_items["binary"] == bytes(range(256))
    want = {"w": state["w"], "lr": torch.tensor(0.5, dtype=torch.float64)}
    _, metadata = check_export(out, want, byte_items)
    assert metadata["text"] == "café ✓" and metadata["looks_base64"] == "AAEC"
    assert metadata["config.name"] == 'rocksdcp-json:"adamw"'
    assert metadata["config.layers"] == 'rocksdcp-json:["attn","mlp"]'
    assert base64.b64decode(metadata["binary"]) == bytes(range(256))


def test_safetensors_reads_a_checkpoint_saved_in_two_shards_whole(tmp_path):
    # Saved by 2 processes, each tensor in 2 chunks: export reassembles them.
    store = tmp_path / "store"
    torchrun("dcp_sharded_save.py", 2, tmp_path / "dir", store, "sharded")
    out = tmp_path / "sharded.safetensors"
    cli("export", store, "sharded", "--safetensors", out)
    byte_fqns = ["step", "config.name", "config.sizes"]
    byte_items = rocksdcp.Store(store, read_only=True).load_bytes("sharded", byte_fqns)
    _, metadata = check_export(out, tensors_of(full_state()), byte_items)
    assert torch.load(io.BytesIO(base64.b64decode(metadata["step"])), weights_only=True) == 17


# ---- import: what safetensors wrote, loaded by dcp.load ----

def hf_tensors():
    """What a Hugging Face checkpoint holds: contiguous tensors of every
    dtype (safetensors refuses views and shared memory)."""
    return {name: t.contiguous().clone() for name, t in tensors_of(training_state()).items()}


def load_through_dcp(store, cid, tensors, byte_names=()):
    """dcp.load of checkpoint ``cid`` with rocksdcp's reader and planner
    into fresh tensors and bytes."""
    into = {name: torch.zeros_like(t) for name, t in tensors.items()}
    into.update({name: b"" for name in byte_names})
    dcp.load(into, storage_reader=rt.StorageReader(store), checkpoint_id=cid,
             planner=rt.DefaultLoadPlanner())
    return into


def test_import_of_a_file_safetensors_wrote_loads_bit_for_bit(tmp_path):
    tensors = hf_tensors()
    metadata = {"format": "pt", "note": "café ✓", "empty": "", "looks_base64": "AAEC"}
    path = tmp_path / "model.safetensors"
    st.save_file(tensors, str(path), metadata=metadata)
    store = tmp_path / "store"
    proc = cli("import", path, store, "hf")
    assert "hf" in proc.stdout

    items = rocksdcp.Store(store, read_only=True).items("hf")
    assert items == dict({name: ("tensor", str(t.dtype)[len("torch."):], tuple(t.shape))
                          for name, t in tensors.items()},
                         **{name: ("bytes",) for name in metadata})
    into = load_through_dcp(store, "hf", tensors, metadata)
    for name, want in tensors.items():
        assert_same_bits(into[name], want, name)
    # __metadata__ entries are byte items of their UTF-8 text, verbatim.
    assert {name: into[name] for name in metadata} == {
        name: value.encode("utf-8") for name, value in metadata.items()}
    assert rocksdcp.Store(store, read_only=True).verify(["hf"])["ok"]


def test_import_then_export_gives_back_what_safetensors_wrote(tmp_path):
    # The C++ path both ways: safetensors reads the same tensors and
    # metadata back; a file whose tensors safetensors' writer ordered as
    # export orders them (one dtype) comes back byte for byte.
    tensors = hf_tensors()
    store = tmp_path / "store"
    for name, metadata in [("plain", None), ("with_metadata", {"format": "pt", "a": "b"})]:
        path = tmp_path / "{}.safetensors".format(name)
        st.save_file(tensors, str(path), metadata=metadata)
        cli("import", path, store, name)
        back = tmp_path / "{}.back.safetensors".format(name)
        cli("export", store, name, "--safetensors", back)
        check_export(back, tensors, {k: v.encode() for k, v in (metadata or {}).items()})
    f32 = {name: t for name, t in tensors.items() if t.dtype == torch.float32}
    path = tmp_path / "f32.safetensors"
    st.save_file(f32, str(path), metadata={"format": "pt"})
    cli("import", path, store, "f32")
    back = tmp_path / "f32.back.safetensors"
    cli("export", store, "f32", "--safetensors", back)
    assert back.read_bytes() == path.read_bytes()


def test_an_imported_file_loads_into_a_model(tmp_path):
    # The usual move: a model's weights from the Hub into a store, then
    # into a model through dcp.load.
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 8)).to(torch.bfloat16)
    path = tmp_path / "model.safetensors"
    st.save_file(model.state_dict(), str(path), metadata={"format": "pt"})
    store = tmp_path / "store"
    cli("import", path, store, "base")
    fresh = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 8)).to(torch.bfloat16)
    state = fresh.state_dict()
    dcp.load(state, storage_reader=rt.StorageReader(store), checkpoint_id="base")
    fresh.load_state_dict(state)
    for name, want in model.state_dict().items():
        assert_same_bits(fresh.state_dict()[name], want, name)
