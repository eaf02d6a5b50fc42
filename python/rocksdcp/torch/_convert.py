"""torch DCP's objects <-> rocksdcp's, field for field.

torch's ``Metadata``, ``MetadataIndex``, ``TensorProperties``, chunk and
storage metadata, plans and write results map onto the C++ library's data
model (include/rocksdcp/metadata.h) one field to one field, so that a
checkpoint saved from Python is the C++ library's checkpoint, and the other
way round. Nothing is pickled: a ``planner_data`` that is not plain data is
refused with ``InvalidArgument``.
"""

import dataclasses
import json

import torch

from rocksdcp import InvalidArgument, _rocksdcp
from rocksdcp.torch import _compat as c

# torch's MEM_FORMAT_ENCODING: what rocksdcp records of a memory format.
_MEMORY_FORMATS = [torch.contiguous_format, torch.channels_last, torch.preserve_format]

# Metadata.planner_data as stored: empty for None, raw for bytes, and this
# prefix and JSON for plain data (str, int, float, bool, list, dict).
_JSON_PREFIX = b"rocksdcp-json:"


# ---- dtypes and tensors ----

def dtype_name(dtype):
    """torch.bfloat16 -> "bfloat16": rocksdcp's name of a torch dtype."""
    return str(dtype)[len("torch."):]


def torch_dtype(name, fqn):
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise InvalidArgument(
            "item {!r}: dtype {} has no torch {} dtype".format(fqn, name, torch.__version__))
    return dtype


def tensor_view(tensor, fqn):
    """(data_ptr, dtype, sizes, strides) of a CPU tensor's own memory: what
    the native module reads from or writes into, in place."""
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgument("item {!r}: expected a tensor, got {}".format(fqn, type(tensor).__name__))
    if tensor.device.type != "cpu":
        raise InvalidArgument(
            "item {!r}: tensor is on {}; rocksdcp reads and writes CPU tensors only: "
            "copy it to the CPU first".format(fqn, tensor.device))
    if tensor.layout != torch.strided:
        raise InvalidArgument(
            "item {!r}: tensor has layout {}; rocksdcp saves strided (dense) tensors "
            "only".format(fqn, tensor.layout))
    if tensor.is_quantized:
        raise InvalidArgument("item {!r}: tensor is quantized ({})".format(fqn, tensor.dtype))
    if tensor.is_conj() or tensor.is_neg():
        raise InvalidArgument(
            "item {!r}: tensor has its lazy conjugate or negative bit set: call "
            "resolve_conj() / resolve_neg() first".format(fqn))
    return (tensor.data_ptr(), dtype_name(tensor.dtype), list(tensor.shape),
            list(tensor.stride()))


# ---- The data model ----

def _offset(size):
    return None if size is None else list(size)


def index_to_native(i):
    return _rocksdcp.MetadataIndex(i.fqn, _offset(i.offset), i.index)


def index_from_native(i):
    return c.MetadataIndex(i.fqn, i.offset, i.index)


def properties_to_native(p, fqn):
    if p.layout != torch.strided:
        raise InvalidArgument("item {!r}: layout {} is not strided".format(fqn, p.layout))
    try:
        memory_format = _MEMORY_FORMATS.index(p.memory_format)
    except ValueError:
        raise InvalidArgument(
            "item {!r}: memory format {} has no encoding".format(fqn, p.memory_format)) from None
    return _rocksdcp.TensorProperties(dtype_name(p.dtype), bool(p.requires_grad),
                                      memory_format, bool(p.pin_memory))


def properties_from_native(p, fqn):
    return c.TensorProperties(dtype=torch_dtype(p.dtype, fqn), layout=torch.strided,
                              requires_grad=p.requires_grad,
                              memory_format=_MEMORY_FORMATS[p.memory_format],
                              pin_memory=p.pin_memory)


def chunk_to_native(chunk):
    return _rocksdcp.ChunkStorageMetadata(list(chunk.offsets), list(chunk.sizes))


def chunk_from_native(chunk):
    return c.ChunkStorageMetadata(offsets=torch.Size(chunk.offsets), sizes=torch.Size(chunk.sizes))


def write_item_to_native(item):
    data = item.tensor_data
    native_data = None
    if data is not None:
        native_data = _rocksdcp.TensorWriteData(
            chunk_to_native(data.chunk), properties_to_native(data.properties, item.index.fqn),
            list(data.size))
    return _rocksdcp.WriteItem(index_to_native(item.index),
                               getattr(_rocksdcp.WriteItemType, item.type.name), native_data)


def storage_data_bytes(value, what):
    """A plan's storage_data as bytes: rocksdcp's own (bytes), or None."""
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise InvalidArgument("{}: storage_data {!r} is not rocksdcp's".format(what, value))


def save_plan_to_native(plan):
    return _rocksdcp.SavePlan([write_item_to_native(i) for i in plan.items],
                              storage_data_bytes(plan.storage_data, "save plan"))


def read_item_to_native(item):
    return _rocksdcp.ReadItem(getattr(_rocksdcp.LoadItemType, item.type.name),
                              index_to_native(item.dest_index), list(item.dest_offsets),
                              index_to_native(item.storage_index), list(item.storage_offsets),
                              list(item.lengths))


def load_plan_to_native(plan):
    return _rocksdcp.LoadPlan([read_item_to_native(i) for i in plan.items],
                              storage_data_bytes(plan.storage_data, "load plan"))


def with_storage_data(plan, native):
    """``plan`` with the storage_data rocksdcp's planning gave it: the only
    field rocksdcp's storage planning changes."""
    if len(native.items) != len(plan.items):
        raise InvalidArgument("rocksdcp's storage planning changed a plan's items")
    return dataclasses.replace(plan, storage_data=native.storage_data or None)


def write_result_to_native(r):
    return _rocksdcp.WriteResult(index_to_native(r.index), int(r.size_in_bytes),
                                 storage_data_bytes(r.storage_data, "write result"))


def write_result_from_native(r):
    return c.WriteResult(index=index_from_native(r.index), size_in_bytes=r.size_in_bytes,
                         storage_data=r.storage_data)


def _planner_data_to_bytes(value):
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray)):
        if bytes(value).startswith(_JSON_PREFIX):
            raise InvalidArgument("planner_data starts with rocksdcp's JSON marker")
        return bytes(value)
    try:
        return _JSON_PREFIX + json.dumps(value, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise InvalidArgument(
            "planner_data of type {} is not plain data (None, bytes, str, numbers, lists "
            "and dicts of them) and rocksdcp never pickles: {}".format(type(value).__name__, e)) from None


def _planner_data_from_bytes(data):
    if not data:
        return None
    if data.startswith(_JSON_PREFIX):
        return json.loads(data[len(_JSON_PREFIX):].decode("utf-8"))
    return data


def metadata_to_native(md):
    native = _rocksdcp.Metadata()
    items = {}
    for fqn, item in md.state_dict_metadata.items():
        if isinstance(item, c.BytesStorageMetadata):
            items[fqn] = _rocksdcp.BytesStorageMetadata()
        elif isinstance(item, c.TensorStorageMetadata):
            items[fqn] = _rocksdcp.TensorStorageMetadata(
                properties_to_native(item.properties, fqn), list(item.size),
                [chunk_to_native(ch) for ch in item.chunks])
        else:
            raise InvalidArgument("item {!r}: unknown storage metadata {}".format(
                fqn, type(item).__name__))
    native.state_dict_metadata = items
    native.planner_data = _planner_data_to_bytes(md.planner_data)
    return native


def metadata_from_native(native):
    items = {}
    for fqn, item in native.state_dict_metadata.items():
        if isinstance(item, _rocksdcp.BytesStorageMetadata):
            items[fqn] = c.BytesStorageMetadata()
        else:
            items[fqn] = c.TensorStorageMetadata(
                properties=properties_from_native(item.properties, fqn),
                size=torch.Size(item.size),
                chunks=[chunk_from_native(ch) for ch in item.chunks])
    md = c.Metadata(state_dict_metadata=items,
                    planner_data=_planner_data_from_bytes(native.planner_data))
    fields = {f.name for f in dataclasses.fields(md)}
    meta = native.storage_meta
    if c.StorageMeta is not None and "storage_meta" in fields and meta is not None:
        kwargs = {}
        for name in ("checkpoint_id", "save_id", "load_id", "modules"):
            if name in {f.name for f in dataclasses.fields(c.StorageMeta)}:
                kwargs[name] = getattr(meta, name)
        md.storage_meta = c.StorageMeta(**kwargs)
    if "version" in fields:
        md.version = native.version
    return md
