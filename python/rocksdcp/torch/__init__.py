"""rocksdcp.torch: PyTorch's distributed checkpoint (DCP) saves into and
loads from rocksdcp stores.

``StorageWriter`` and ``StorageReader`` subclass the installed torch's DCP
storage classes and implement every method that torch version calls:
torch 1.13's ``torch.distributed._shard.checkpoint`` (``init``, ...) and
torch 2.x's ``torch.distributed.checkpoint`` (``reset``,
``set_up_storage_writer``, ``validate_checkpoint_id``, ``storage_meta``, ...).
On torch 1.13 with Python 3.11, importing this package makes torch's DCP
importable (see ``rocksdcp/torch/_compat.py``: a narrow fix of a dataclass
default that Python 3.11 refuses). ``dcp`` is that module.

Example, torch 1.13 (2.x: ``dcp.save`` / ``dcp.load``)::

    import rocksdcp.torch as rt
    rt.dcp.save_state_dict(model.state_dict(),
                           storage_writer=rt.StorageWriter("/data/ckpt", "step-100"),
                           no_dist=True)

Byte items: torch's default planners pickle non-tensor values on save and
unpickle byte items on load; ``DefaultSavePlanner`` and
``DefaultLoadPlanner`` here keep them as raw bytes instead.
"""

from rocksdcp.torch._compat import IS_TORCH2, dcp  # noqa: F401
from rocksdcp.torch._plain import PlainRecord, register_plain_type
from rocksdcp.torch._planners import DefaultLoadPlanner, DefaultSavePlanner
from rocksdcp.torch._storage import StorageReader, StorageWriter

CheckpointException = dcp.api.CheckpointException

__all__ = ["StorageWriter", "StorageReader", "DefaultSavePlanner",
           "DefaultLoadPlanner", "CheckpointException", "dcp", "IS_TORCH2",
           "register_plain_type", "PlainRecord"]
