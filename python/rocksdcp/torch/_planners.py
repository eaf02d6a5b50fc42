"""torch's default planners, saving as data what torch would pickle.

torch's ``DefaultSavePlanner`` pickles (``torch.save``) every value of the
state dict that is not a tensor into a byte item, and its
``DefaultLoadPlanner`` unpickles it (``torch.load``): a float learning
rate, Adam's ``betas`` tuple, a step count. A pickle is code, which a
checkpoint from an untrusted source must not run, and which the C++ library,
LibTorch and the ``rocksdcp`` CLI cannot read. These planners save such
values as data instead:

- ``bytes`` (``bytearray``, ``memoryview``): a byte item holding them.
- a ``bool``, ``int`` or ``float``: a 0-d tensor (bool, int64, float64),
  as the LibTorch adapter saves a hyperparameter.
- a non-empty tuple or list of them: a 1-d tensor (bool if all are bools,
  else float64 if any is a float, else int64), as the LibTorch adapter
  saves Adam's ``betas``.
- other plain data (``None``, strings, lists of names, nested lists and
  dicts, dataclasses): a byte item of rocksdcp's plain-data encoding
  (``rocksdcp/torch/_plain.py``, JSON behind a marker).

Loading, the destination says what each value becomes again: a tensor of
the checkpoint goes back into a number (a bool, int or float, as the
tensor's dtype says), a tuple or a list where the state dict holds one; a byte item comes back as bytes where it holds bytes,
else decoded. Values are written through torch's flattening into the state
dict the caller passed (``original_state_dict``), as torch's planner
writes its unpickled values.
"""

import io

import torch

from rocksdcp import InvalidArgument
from rocksdcp.torch import _compat as c
from rocksdcp.torch import _plain


def _number_kind(value):
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    if isinstance(value, float):
        return torch.float64
    return None


def _sequence_dtype(value):
    """The dtype of a non-empty tuple or list of numbers, else None."""
    if not isinstance(value, (tuple, list)) or not value or isinstance(value, torch.Size):
        return None
    kinds = {_number_kind(v) for v in value}
    if None in kinds:
        return None
    if kinds == {torch.bool}:
        return torch.bool
    return torch.float64 if torch.float64 in kinds else torch.int64


def _is_tensor_like(value):
    return isinstance(value, torch.Tensor) or (
        hasattr(value, "local_shards") and hasattr(value, "metadata"))


def _checkpoint_where(action, meta):
    """"save of checkpoint 'c'" (``meta``: torch 2.x's StorageMeta, which
    names it), else just the action: what an error of a planner begins
    with."""
    cid = getattr(meta, "checkpoint_id", None)
    return "{} of checkpoint {!r}".format(action, str(cid)) if cid is not None else action


def as_saved(fqn, value, where="save"):
    """What the save planner saves for ``value``: a tensor, bytes, or a
    BytesIO of plain data."""
    if _is_tensor_like(value) or isinstance(value, (bytes, bytearray, memoryview)):
        return value
    kind = _number_kind(value)
    if kind is not None:
        return torch.tensor(value, dtype=kind)
    kind = _sequence_dtype(value)
    if kind is not None:
        return torch.tensor(list(value), dtype=kind)
    return io.BytesIO(_plain.encode(value, "{}: item {!r}".format(where, fqn)))


def as_python(tensor, like, fqn, where="load"):
    """The tensor a checkpoint holds for ``fqn``, as a Python value of the
    kind the destination holds (``like``): a number, or a tuple or list.
    The number's type is the checkpoint's (a bool, int or float tensor),
    not the destination's, as torch's planner replaces a value with the
    one saved: a float learning rate saved into a state dict that held the
    int 0 comes back a float, never truncated."""
    if _number_kind(like) is not None:
        if tensor.numel() != 1:
            raise InvalidArgument("{}: item {!r}: the state dict holds a {} but the checkpoint a "
                                  "tensor of shape {}".format(where, fqn, type(like).__name__,
                                                              list(tensor.shape)))
        return tensor.item()
    if isinstance(like, (tuple, list)) and tensor.dim() == 1:
        return type(like)(tensor.tolist())
    raise InvalidArgument("{}: item {!r}: the state dict holds a {} where the checkpoint holds "
                          "a tensor".format(where, fqn, type(like).__name__))


def _kind(value):
    """What a checkpoint's item or a state dict's value is, in words."""
    if isinstance(value, c.TensorStorageMetadata) or _is_tensor_like(value):
        return "a tensor"
    if isinstance(value, (c.BytesStorageMetadata, bytes, bytearray, memoryview)):
        return "bytes"
    return "a " + type(value).__name__


def _is_value_leaf(value):
    return _number_kind(value) is not None or _sequence_dtype(value) is not None


class DefaultSavePlanner(c.BaseDefaultSavePlanner):
    """torch's ``DefaultSavePlanner`` (every argument of it), saving each
    value that is not a tensor as data, never a pickle (module docstring):
    the C++ library, the LibTorch adapter and the ``rocksdcp`` CLI read
    every item, and no checkpoint runs code when loaded. A value that is
    not plain data is refused with ``InvalidArgument`` naming its fqn."""

    def set_up_planner(self, state_dict, storage_meta=None, *args, **kwargs):  # torch 2.x
        super().set_up_planner(state_dict, storage_meta, *args, **kwargs)
        self._as_data(_checkpoint_where("save", storage_meta))

    def init(self, state_dict, is_coordinator):  # torch 1.13
        super().init(state_dict, is_coordinator)
        self._as_data("save")

    def _as_data(self, where):
        self.state_dict = {fqn: as_saved(fqn, v, where) for fqn, v in self.state_dict.items()}

    def transform_object(self, write_item, object):  # noqa: A002 - torch's name
        if write_item.type != c.WriteItemType.BYTE_IO:
            return super().transform_object(write_item, object)
        if isinstance(object, io.BytesIO):
            return object
        return io.BytesIO(bytes(object))


class DefaultLoadPlanner(c.BaseDefaultLoadPlanner):
    """torch's ``DefaultLoadPlanner`` (every argument of it), loading what
    ``rocksdcp.torch.DefaultSavePlanner``, the C++ library and the LibTorch
    adapter save: byte items as bytes or decoded data, never unpickled
    (module docstring), so a checkpoint from any source is safe to load;
    tensors the checkpoint holds for ints, floats, bools, tuples and lists
    of the state dict come back as those."""

    def set_up_planner(self, state_dict, metadata=None, *args, **kwargs):  # torch 2.x
        super().set_up_planner(state_dict, metadata, *args, **kwargs)
        self._tensors_for_values(metadata)

    def init(self, state_dict, metadata, is_coordinator):  # torch 1.13
        super().init(state_dict, metadata, is_coordinator)
        self._tensors_for_values(metadata)

    def _tensors_for_values(self, metadata):
        """Python values the checkpoint holds as tensors are read into
        tensors of the checkpoint's dtype and size, converted back in
        commit_tensor."""
        self._where = _checkpoint_where("load", getattr(metadata, "storage_meta", None))
        self._values = {}
        saved = metadata.state_dict_metadata if metadata is not None else {}
        for fqn, value in list(self.state_dict.items()):
            md = saved.get(fqn)
            if isinstance(md, c.TensorStorageMetadata) and _is_value_leaf(value):
                self._values[fqn] = value
                self.state_dict[fqn] = torch.empty(md.size, dtype=md.properties.dtype)

    def create_local_plan(self):
        """torch's local plan, after checking every destination against
        the checkpoint: one InvalidArgument names each fqn whose shape or
        kind (tensor or bytes) differs, before a byte is read (torch's
        planner stops at the first)."""
        problems = []
        saved = self.metadata.state_dict_metadata if self.metadata is not None else {}
        for fqn, value in self.state_dict.items():
            md = saved.get(fqn)
            if md is None:
                continue
            if isinstance(md, c.TensorStorageMetadata) != _is_tensor_like(value):
                problems.append("item {!r}: kind mismatch: checkpoint has {}, state dict has "
                                "{}".format(fqn, _kind(md), _kind(value)))
                continue
            if _is_tensor_like(value):
                size = value.metadata().size if hasattr(value, "local_shards") else value.shape
                if list(md.size) != list(size):
                    problems.append("item {!r}: shape mismatch: checkpoint has {}, state dict "
                                    "has {}".format(fqn, list(md.size), list(size)))
        if problems:
            raise InvalidArgument("{}: {}".format(self._where, "; ".join(problems)))
        return super().create_local_plan()

    def _set(self, fqn, value):
        """Writes ``value`` where the caller's state dict has ``fqn``:
        through torch 2.x's flattening (its ``mappings``) when it
        flattened, as torch's own ``load_bytes`` does."""
        mappings = getattr(self, "mappings", None)
        if getattr(self, "flatten_state_dict", False) and mappings and fqn in mappings:
            c.set_element(self.original_state_dict, mappings[fqn], value)
        else:
            self.state_dict[fqn] = value

    def load_bytes(self, read_item, value):
        fqn = read_item.dest_index.fqn
        data = value.getvalue()
        current = self.state_dict.get(fqn)
        if not isinstance(current, (bytes, bytearray, memoryview)) and _plain.is_encoded(data):
            self._set(fqn, _plain.decode(data, "{}: item {!r}".format(self._where, fqn)))
        else:
            self._set(fqn, data)

    def commit_tensor(self, read_item, tensor):
        fqn = read_item.dest_index.fqn
        if fqn in getattr(self, "_values", {}):
            self._set(fqn, as_python(tensor, self._values[fqn], fqn, self._where))
            return
        super().commit_tensor(read_item, tensor)
