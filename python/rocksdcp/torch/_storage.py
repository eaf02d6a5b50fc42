"""rocksdcp's StorageWriter and StorageReader for PyTorch's distributed
checkpoint: every method either torch version calls, each a conversion and a
call into the C++ writer or reader (include/rocksdcp/storage.h)."""

import io
import os

import torch
import torch.distributed as dist
from torch.futures import Future

from rocksdcp import InvalidArgument, _rocksdcp
from rocksdcp.torch import _compat as c
from rocksdcp.torch import _convert as cv


def _rank_and_world(rank, world_size, process_group):
    """This process's rank and the world size: as given, else
    torch.distributed's when it is initialized, else 0 and 1."""
    if rank is not None and world_size is not None:
        return rank, world_size
    if dist.is_available() and dist.is_initialized():
        return (dist.get_rank(process_group) if rank is None else rank,
                dist.get_world_size(process_group) if world_size is None else world_size)
    return (0 if rank is None else rank), (1 if world_size is None else world_size)


def _checkpoint_id(value, what):
    if value is None:
        raise InvalidArgument(
            "{}: no checkpoint_id: pass one to the constructor, or to torch's "
            "save/load".format(what))
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def _done(value):
    fut = Future()
    fut.set_result(value)
    return fut


class _WriterMethods:
    """StorageWriter's methods, for torch 1.13's base class and 2.x's."""

    def __init__(self, path, checkpoint_id=None, *, overwrite=False, rank=None,
                 world_size=None, process_group=None, max_piece_bytes=None,
                 base=None, base_on_newest=False, compress=False):
        """Saves into the rocksdcp store at ``path`` (created if missing) as
        checkpoint ``checkpoint_id`` (torch 2.x may pass it to ``reset``
        instead). ``overwrite`` replaces a committed checkpoint of that id,
        atomically. Rank and world size come from ``torch.distributed`` when
        it is initialized (of ``process_group``), else 0 and 1; ``rank`` and
        ``world_size`` override them (with ``no_dist=True`` in a process
        group, pass ``rank=0, world_size=1``). ``max_piece_bytes`` sets the
        piece size (default: the library's, 128 KiB).

        Incremental saves: ``base`` names a committed checkpoint of the
        store, or ``base_on_newest=True`` takes the newest; every piece
        whose bytes are identical to the base's is then stored as a
        reference to where the base holds it, not written again (only the
        coordinator's arguments count).

        ``compress=True`` (or ``"when_disk_bound"``) compresses pieces
        (byte planes, then zstd, kept where that saves at least 5%) while
        the disk, not the CPU, bounds the save: a disk slower than
        compression gets compressed pieces and a faster save, a fast disk
        a save at nearly its uncompressed speed, mostly uncompressed.
        ``compress="always"`` compresses every piece: the smallest
        checkpoint (trained bf16 and fp32 weights take less space, random
        bytes none), at the speed of compression. Every reader decodes
        them.

        The coordinator opens the store read-write when torch first calls
        (``init`` / ``set_up_storage_writer``), so that a locked store fails
        the save there; the other ranks open it as followers, which write
        staging files that the coordinator commits, only once the
        coordinator has it (``write_data``).
        """
        super().__init__()
        self._path = os.fspath(path)
        self._id = checkpoint_id
        self._overwrite = overwrite
        self._rank_arg, self._world_arg, self._group = rank, world_size, process_group
        self._max_piece_bytes = max_piece_bytes or 0
        self._base, self._base_on_newest = base or "", bool(base_on_newest)
        if compress in (True, "when_disk_bound"):
            self._compress = "when_disk_bound"
        elif compress == "always":
            self._compress = "always"
        elif compress in (False, None, ""):
            self._compress = ""
        else:
            raise ValueError(
                "compress must be True, False, 'always' or 'when_disk_bound',"
                f" not {compress!r}")
        self._native = None
        self._is_coordinator = False
        self._rank, self._world_size = 0, 1

    def _open(self, follower):
        store = _rocksdcp.Store(self._path, follower=follower)
        writer = store.new_writer(self._overwrite, self._max_piece_bytes,
                                  self._base, self._base_on_newest,
                                  self._compress)
        writer.reset(_checkpoint_id(self._id, "rocksdcp save"))
        writer.set_up(self._is_coordinator, self._rank, self._world_size)
        return writer

    # -- torch 2.x --

    def reset(self, checkpoint_id=None):
        """A new save begins; ``checkpoint_id``, when given, names it."""
        if checkpoint_id is not None:
            self._id = checkpoint_id
        self._native = None

    def set_up_storage_writer(self, is_coordinator, *args, **kwargs):
        """torch 2.x's init: ``rank`` may come as a keyword."""
        if self._rank_arg is None and "rank" in kwargs:
            self._rank_arg = kwargs["rank"]
        self.init(is_coordinator)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        """True if ``checkpoint_id`` can name a rocksdcp checkpoint: 1 to 128
        bytes, no control characters, not "default"."""
        try:
            _rocksdcp.Writer.validate_checkpoint_id(str(checkpoint_id))
        except InvalidArgument:
            return False
        return True

    def storage_meta(self):
        """The checkpoint id and this save's id, as torch 2.x's StorageMeta.

        Once the save is planned, and after it, until the next reset, the
        save id is the coordinator's: the one the checkpoint records.
        """
        if c.StorageMeta is None or self._native is None:
            return None
        meta = self._native.storage_meta()
        if meta is None:
            return None
        return c.StorageMeta(checkpoint_id=meta.checkpoint_id, save_id=meta.save_id)

    # -- torch 1.13, and both --

    def init(self, is_coordinator):
        """torch 1.13's set-up: learns the role, and the coordinator opens the
        store."""
        self._is_coordinator = is_coordinator
        self._rank, self._world_size = _rank_and_world(self._rank_arg, self._world_arg, self._group)
        self._native = self._open(follower=False) if is_coordinator else None

    def prepare_local_plan(self, plan):
        if self._native is None:
            # A follower, before its store is open: rocksdcp's writer leaves
            # local plans as they are (RocksDBStorageWriter::PrepareLocalPlan),
            # and write_data checks that it still does.
            return plan
        return cv.with_storage_data(plan, self._native.prepare_local_plan(cv.save_plan_to_native(plan)))

    def prepare_global_plan(self, plans):
        native = self._native.prepare_global_plan([cv.save_plan_to_native(p) for p in plans])
        return [cv.with_storage_data(p, n) for p, n in zip(plans, native)]

    def write_data(self, plan, planner):
        native_plan = cv.save_plan_to_native(plan)
        if self._native is None:
            self._native = self._open(follower=True)
            local = self._native.prepare_local_plan(native_plan)
            if len(local.items) != len(native_plan.items) or local.storage_data != native_plan.storage_data:
                raise InvalidArgument("rocksdcp's local storage planning changed a follower's plan")
        # Resolve every item first: tensors are views (the planner's, kept
        # alive here), bytes are copied once; then one native call writes
        # them all without the GIL.
        keep, resolved = [], []
        for item in plan.items:
            data = planner.resolve_data(item)
            if item.type == c.WriteItemType.BYTE_IO:
                if isinstance(data, io.BytesIO):
                    data = data.getvalue()
                if not isinstance(data, (bytes, bytearray, memoryview)):
                    raise InvalidArgument("item {!r}: the planner resolved a byte item to {}".format(
                        item.index.fqn, type(data).__name__))
                resolved.append(bytes(data))
            else:
                keep.append(data)
                resolved.append(cv.tensor_view(data, item.index.fqn))
        results = self._native.write_data(native_plan, resolved)
        del keep
        return _done([cv.write_result_from_native(r) for r in results])

    def finish(self, metadata, results):
        self._native.finish(cv.metadata_to_native(metadata),
                            [[cv.write_result_to_native(r) for r in rank] for rank in results])


class _ReaderMethods:
    """StorageReader's methods, for torch 1.13's base class and 2.x's."""

    def __init__(self, path, checkpoint_id=None, *, rank=None, world_size=None,
                 process_group=None):
        """Loads checkpoint ``checkpoint_id`` (or the one torch 2.x passes to
        ``reset``) from the rocksdcp store at ``path``, opened read-only when
        torch first calls (``read_metadata``): every rank may open it, beside
        a process that writes it. In a process that holds the store
        read-write, that store is used, and sees every commit. Rank and world
        size as for ``StorageWriter``.

        Before a byte is copied, ``read_data`` checks the destinations of
        torch's planner (its ``state_dict``) against the checkpoint: a shape
        or dtype that differs fails the load naming each fqn, where torch
        1.13's default planner would load the overlapping box.
        """
        super().__init__()
        self._path = os.fspath(path)
        self._id = checkpoint_id
        self._rank_arg, self._world_arg, self._group = rank, world_size, process_group
        self._native = None

    # -- torch 2.x --

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self._id = checkpoint_id
        self._native = None

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        if self._rank_arg is None and "rank" in kwargs:
            self._rank_arg = kwargs["rank"]
        self.init(metadata, is_coordinator)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        try:
            _rocksdcp.Reader.validate_checkpoint_id(str(checkpoint_id))
        except InvalidArgument:
            return False
        return True

    # -- torch 1.13, and both --

    def read_metadata(self, *args, **kwargs):
        store = _rocksdcp.Store(self._path, read_only=True, share_writable_for_reads=True)
        self._native = store.new_reader()
        self._native.reset(_checkpoint_id(self._id, "rocksdcp load"))
        return cv.metadata_from_native(self._native.read_metadata())

    def init(self, metadata, is_coordinator):
        rank, world_size = _rank_and_world(self._rank_arg, self._world_arg, self._group)
        self._native.set_up(is_coordinator, rank, world_size)

    def prepare_local_plan(self, plan):
        return cv.with_storage_data(plan, self._native.prepare_local_plan(cv.load_plan_to_native(plan)))

    def prepare_global_plan(self, plans):
        native = self._native.prepare_global_plan([cv.load_plan_to_native(p) for p in plans])
        return [cv.with_storage_data(p, n) for p, n in zip(plans, native)]

    def _check_destinations(self, planner):
        state_dict = getattr(planner, "state_dict", None)
        if not isinstance(state_dict, dict):
            return
        dests = []
        for fqn, value in state_dict.items():
            if isinstance(value, torch.Tensor):
                dests.append((fqn, cv.dtype_name(value.dtype), list(value.shape)))
            elif hasattr(value, "local_shards") and hasattr(value, "metadata"):
                # A ShardedTensor: its global size and dtype.
                md = value.metadata()
                dests.append((fqn, cv.dtype_name(md.tensor_properties.dtype), list(md.size)))
            else:
                dests.append((fqn, None, []))
        self._native.check_destinations(dests)

    def read_data(self, plan, planner):
        self._check_destinations(planner)
        keep, views = [], []
        for item in plan.items:
            if item.type == c.LoadItemType.BYTE_IO:
                views.append(None)
                continue
            dest = planner.resolve_tensor(item)
            keep.append(dest)
            views.append(cv.tensor_view(dest, item.dest_index.fqn))
        byte_items = self._native.read_data(cv.load_plan_to_native(plan), views)
        dests = iter(keep)
        for i, item in enumerate(plan.items):
            if item.type == c.LoadItemType.BYTE_IO:
                planner.load_bytes(item, io.BytesIO(byte_items[i]))
            else:
                planner.commit_tensor(item, next(dests))
        return _done(None)


class StorageWriter(_WriterMethods, c.BaseStorageWriter):
    """Saves a PyTorch distributed checkpoint into a rocksdcp store.

    A subclass of the installed torch's DCP ``StorageWriter``: torch 1.13's
    ``save_state_dict(sd, storage_writer=StorageWriter(path, "step-100"))``
    and torch 2.x's ``dcp.save(sd, storage_writer=StorageWriter(path),
    checkpoint_id="step-100")`` drive it. See ``__init__`` for the options.
    """


class StorageReader(_ReaderMethods, c.BaseStorageReader):
    """Loads a PyTorch distributed checkpoint from a rocksdcp store.

    A subclass of the installed torch's DCP ``StorageReader``, for
    ``load_state_dict`` (torch 1.13) and ``dcp.load`` (torch 2.x). Byte
    items reach torch's planner as ``io.BytesIO``; torch's default planner
    unpickles them (``torch.load``), ``rocksdcp.torch.DefaultLoadPlanner``
    hands them over as ``bytes``.
    """
