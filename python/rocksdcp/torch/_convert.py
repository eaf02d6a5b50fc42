"""torch DCP's objects <-> rocksdcp's, field for field.

torch's ``Metadata``, ``MetadataIndex``, ``TensorProperties``, chunk and
storage metadata, plans and write results map onto the C++ library's data
model (include/rocksdcp/metadata.h) one field to one field, so that a
checkpoint saved from Python is the C++ library's checkpoint, and the other
way round. Nothing is pickled: ``planner_data`` is stored as plain data
(``_plain``), and one that is not is refused with ``InvalidArgument``.
"""

import dataclasses

import torch

from rocksdcp import InvalidArgument, _rocksdcp
from rocksdcp.torch import _compat as c
from rocksdcp.torch import _plain

# torch's MEM_FORMAT_ENCODING: what rocksdcp records of a memory format.
_MEMORY_FORMATS = [torch.contiguous_format, torch.channels_last, torch.preserve_format]


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


def _check_dense(tensor, fqn):
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgument("item {!r}: expected a tensor, got {}".format(fqn, type(tensor).__name__))
    if tensor.layout != torch.strided:
        raise InvalidArgument(
            "item {!r}: tensor has layout {}; rocksdcp saves strided (dense) tensors "
            "only".format(fqn, tensor.layout))
    if tensor.is_quantized:
        raise InvalidArgument("item {!r}: tensor is quantized ({})".format(fqn, tensor.dtype))
    if tensor.device.type == "meta":
        raise InvalidArgument("item {!r}: tensor is on the meta device: it has no data".format(fqn))


def _view(tensor):
    return (tensor.data_ptr(), dtype_name(tensor.dtype), list(tensor.shape),
            list(tensor.stride()))


def save_view(tensor, fqn):
    """(view, owner) of what a save writes for ``tensor``: the tensor's own
    memory when it is a plain CPU tensor, else a CPU copy, as torch's
    FileSystemWriter copies (``tensor.cpu()``) a tensor on another device,
    and resolves a lazily conjugated or negated one. ``owner`` keeps the
    memory alive."""
    _check_dense(tensor, fqn)
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    return _view(t), t


def load_view(tensor, stored_dtype, fqn):
    """The view a load writes into ``tensor`` in place, or None when it
    must go through a tensor of the checkpoint's dtype on the CPU and be
    copied in (another device, another dtype, a lazy conjugate or negative
    bit), as torch's FileSystemReader copies (``target.copy_(tensor)``)."""
    _check_dense(tensor, fqn)
    if (tensor.device.type != "cpu" or tensor.dtype != stored_dtype or tensor.is_conj()
            or tensor.is_neg()):
        return None
    return _view(tensor)


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


def stored_dtype(metadata, fqn):
    """The dtype the checkpoint holds ``fqn`` in (torch's Metadata)."""
    md = metadata.state_dict_metadata.get(fqn)
    if not isinstance(md, c.TensorStorageMetadata):
        raise InvalidArgument("item {!r}: the checkpoint holds no tensor of that name".format(fqn))
    return md.properties.dtype


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


def save_plan_to_native(plan, storage_data):
    return _rocksdcp.SavePlan([write_item_to_native(i) for i in plan.items], storage_data)


def read_item_to_native(item):
    return _rocksdcp.ReadItem(getattr(_rocksdcp.LoadItemType, item.type.name),
                              index_to_native(item.dest_index), list(item.dest_offsets),
                              index_to_native(item.storage_index), list(item.storage_offsets),
                              list(item.lengths))


def load_plan_to_native(plan, items=None):
    """``plan``, or the subset ``items`` of its items, as rocksdcp's."""
    return _rocksdcp.LoadPlan([read_item_to_native(i) for i in (plan.items if items is None else items)],
                              storage_data_bytes(plan.storage_data, "load plan"))


def write_result_to_native(r):
    return _rocksdcp.WriteResult(index_to_native(r.index), int(r.size_in_bytes),
                                 storage_data_bytes(r.storage_data, "write result"))


def write_result_from_native(r):
    return c.WriteResult(index=index_from_native(r.index), size_in_bytes=r.size_in_bytes,
                         storage_data=r.storage_data)


def _planner_data_to_bytes(value):
    """Metadata.planner_data as stored: empty for None, raw for bytes (that
    do not look encoded), else plain data (``_plain``)."""
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray)) and value and not _plain.is_encoded(value):
        return bytes(value)
    return _plain.encode(value, "planner_data")


def _planner_data_from_bytes(data):
    if not data:
        return None
    if _plain.is_encoded(data):
        return _plain.decode(data, "the checkpoint's planner_data")
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
    set_identity(md, native)
    return md


def storage_meta_from_native(meta):
    """torch 2.x's StorageMeta of rocksdcp's, or None (torch 1.13 has none)."""
    if c.StorageMeta is None or meta is None:
        return None
    names = {f.name for f in dataclasses.fields(c.StorageMeta)}
    return c.StorageMeta(**{name: getattr(meta, name)
                            for name in ("checkpoint_id", "save_id", "load_id", "modules")
                            if name in names})


def set_identity(md, native):
    """Sets torch's ``md.storage_meta`` and ``md.version`` (torch 2.x's
    fields) from rocksdcp's metadata ``native``, as torch's own storages
    fill them in."""
    fields = {f.name for f in dataclasses.fields(md)}
    if "storage_meta" in fields and native.storage_meta is not None:
        md.storage_meta = storage_meta_from_native(native.storage_meta)
    if "version" in fields:
        md.version = native.version
