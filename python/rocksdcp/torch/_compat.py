"""The installed torch's distributed checkpoint module, whichever it is.

torch 2.x: ``torch.distributed.checkpoint``. torch 1.13:
``torch.distributed._shard.checkpoint``, which Debian bookworm's torch 1.13.1
cannot import on Python 3.11: ``sharded_tensor/metadata.py`` declares a
dataclass field whose default is an instance of another dataclass
(``tensor_properties: TensorProperties = field(default=TensorProperties())``),
and Python 3.11's ``dataclasses`` refuses every default whose class is
unhashable ("mutable default ... use default_factory"). Python 3.10 only
refused list, dict and set.

The fix, applied once and only when that import fails with that error:
while the module is imported again, ``dataclasses.dataclass`` gives that one
class, ``TensorProperties`` of that module, a field-based ``__hash__``
(``unsafe_hash=True``), so that its instance passes 3.11's check. Nothing
else changes: the default is still the one shared instance it was under
Python 3.10, and every other class is decorated as it asks.
"""

import dataclasses
import importlib
import sys

_SHARDED_METADATA = "torch.distributed._shard.sharded_tensor.metadata"

#: True once the 3.11 fix above was applied in this process.
FIX_APPLIED = False


def _hashable_tensor_properties(original):
    def dataclass(cls=None, /, **kwargs):
        def wrap(c):
            if c.__module__ == _SHARDED_METADATA and c.__name__ == "TensorProperties":
                kwargs["unsafe_hash"] = True
            return original(c, **kwargs)
        return wrap if cls is None else wrap(cls)
    return dataclass


def _import_torch_1_13_dcp():
    global FIX_APPLIED
    name = "torch.distributed._shard.checkpoint"
    try:
        return importlib.import_module(name)
    except ValueError as e:
        if "mutable default" not in str(e) or "TensorProperties" not in str(e):
            raise
    # The failed import left no half-made module of the chain behind
    # (importlib removes a module whose execution raised), so it runs again
    # from the start, this time with the decorator above.
    original = dataclasses.dataclass
    dataclasses.dataclass = _hashable_tensor_properties(original)
    try:
        module = importlib.import_module(name)
    finally:
        dataclasses.dataclass = original
    FIX_APPLIED = True
    return module


def import_dcp():
    """(module, is_torch2): the installed torch's DCP package."""
    try:
        return importlib.import_module("torch.distributed.checkpoint"), True
    except ModuleNotFoundError:
        pass
    return _import_torch_1_13_dcp(), False


dcp, IS_TORCH2 = import_dcp()

# What the package needs of it, under the same names in both versions.
Metadata = dcp.metadata.Metadata
MetadataIndex = dcp.metadata.MetadataIndex
ChunkStorageMetadata = dcp.metadata.ChunkStorageMetadata
TensorStorageMetadata = dcp.metadata.TensorStorageMetadata
BytesStorageMetadata = dcp.metadata.BytesStorageMetadata
SavePlan = dcp.planner.SavePlan
LoadPlan = dcp.planner.LoadPlan
WriteItem = dcp.planner.WriteItem
ReadItem = dcp.planner.ReadItem
WriteItemType = dcp.planner.WriteItemType
LoadItemType = dcp.planner.LoadItemType
TensorWriteData = dcp.planner.TensorWriteData
WriteResult = dcp.storage.WriteResult
BaseStorageWriter = dcp.storage.StorageWriter
BaseStorageReader = dcp.storage.StorageReader
BaseDefaultSavePlanner = dcp.default_planner.DefaultSavePlanner
BaseDefaultLoadPlanner = dcp.default_planner.DefaultLoadPlanner
CheckpointException = dcp.api.CheckpointException
if hasattr(dcp.metadata, "TensorProperties"):
    TensorProperties = dcp.metadata.TensorProperties
else:
    TensorProperties = sys.modules[_SHARDED_METADATA].TensorProperties
StorageMeta = getattr(dcp.metadata, "StorageMeta", None)
if IS_TORCH2:
    # Writes a value into a nested state dict at a path of torch's
    # flattening (torch 1.13 does not flatten).
    from torch.distributed.checkpoint._traverse import set_element  # noqa: E402,F401
# The base of a storage writer that stages for async_save itself, as a
# tuple of bases: empty where torch has none (1.13).
_staging_module = getattr(dcp, "staging", None)
ASYNC_STAGER = (_staging_module.AsyncStager,) if hasattr(_staging_module, "AsyncStager") else ()
