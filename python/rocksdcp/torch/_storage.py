"""rocksdcp's StorageWriter and StorageReader for PyTorch's distributed
checkpoint: every method either torch version calls, each a conversion and a
call into the C++ writer or reader (include/rocksdcp/storage.h).

What torch asks of a storage beyond the C++ interface is done here as
torch's own ``FileSystemWriter`` / ``FileSystemReader`` do it: items are
resolved when the writer is about to write them; a tensor on another device
is copied to the CPU on save, and a load copies into its destination
whatever its device and dtype."""

import dataclasses
import io
import os
import secrets
import sys

import torch
import torch.distributed as dist
from torch.futures import Future

from rocksdcp import InvalidArgument, _rocksdcp
from rocksdcp.torch import _compat as c
from rocksdcp.torch import _convert as cv
from rocksdcp.torch import _staging

# A save plan's storage_data, as torch carries it between the ranks:
#   local plan:  _PLAN_TAG token
#   global plan: _PLAN_TAG token <rocksdcp's rank plan>
# The token is the rank's, fresh for each save: a plan that carries
# another one is not this save's (torch's plan caching hands write_data the
# previous save's plan; see _WriterMethods.write_data).
_PLAN_TAG = b"rocksdcp-plan\x00"
_TOKEN_BYTES = 16

# At most this many bytes of tensors in the checkpoint's dtype are held at
# once by a load whose destinations need converting (another device or
# dtype): they are read in batches of this size, through one reused buffer.
DEFAULT_CONVERT_BUFFER_BYTES = 64 << 20


def _new_save_id():
    # The form of the C++ library's own save ids: 32 hex digits.
    return secrets.token_hex(16)


def _group_size(process_group):
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(process_group)
    return 1


def _rank_and_world(given_rank, torch_rank, world_size, process_group, what):
    """This process's rank and the world size, for the C++ writer or reader.

    The rank: torch 2.x's driver passes it (``rank=``, the one it made the
    coordinator decision with), and it wins; a different ``rank`` given to
    the constructor is an error. Without it (torch 1.13): the constructor's,
    else torch.distributed's of ``process_group`` when initialized, else 0.
    The world size only bounds the rank here: the checkpoint records how
    many ranks the coordinator planned."""
    if torch_rank is not None and given_rank is not None and torch_rank != given_rank:
        raise InvalidArgument(
            "{}: torch's driver runs this process as rank {}, but it was made with "
            "rank={}".format(what, torch_rank, given_rank))
    rank = torch_rank if torch_rank is not None else given_rank
    if rank is None:
        rank = dist.get_rank(process_group) if dist.is_available() and dist.is_initialized() else 0
    world = world_size if world_size is not None else _group_size(process_group)
    return rank, max(world, rank + 1)


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


def _split_plan_data(storage_data, what):
    """(token, rocksdcp's rank plan) of a save plan's storage_data."""
    if not isinstance(storage_data, (bytes, bytearray)) or not storage_data.startswith(_PLAN_TAG):
        raise InvalidArgument("{}: the plan's storage_data {!r} is not rocksdcp's: was the plan "
                              "made by another storage writer?".format(what, storage_data))
    rest = bytes(storage_data[len(_PLAN_TAG):])
    return rest[:_TOKEN_BYTES], rest[_TOKEN_BYTES:]


class _WriterMethods:
    """StorageWriter's methods, for torch 1.13's base class and 2.x's."""

    # (store path, ranks, rank) -> the last usable global plan of that rank,
    # as torch's plan caching keeps it (see prepare_global_plan).
    _last_plans = {}

    def __init__(self, path, checkpoint_id=None, *, overwrite=False, rank=None,
                 world_size=None, process_group=None, max_piece_bytes=None,
                 base=None, base_on_newest=False, compress=False, write_threads=0,
                 use_direct_writes=False, memory_budget=None,
                 cache_staged_state_dict=True):
        """Saves into the rocksdcp store at ``path`` (created if missing) as
        checkpoint ``checkpoint_id`` (torch 2.x may pass it to ``reset``
        instead: ``dcp.save(..., checkpoint_id=...)``). ``overwrite``
        replaces a committed checkpoint of that id, atomically. The rank
        is the one torch 2.x's driver gives (``rank``, ``world_size`` and
        ``process_group`` are for torch 1.13, whose driver gives none: by
        default torch.distributed's, when initialized, else 0 and 1).
        ``max_piece_bytes`` sets the piece size (default: the library's,
        128 KiB).

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

        ``write_threads`` (0: one per core, as the data allows),
        ``use_direct_writes`` (O_DIRECT staging files: no page cache, least
        CPU) and ``memory_budget`` (bytes a save's writer threads may
        hold; default 512 MiB) are the C++ writer's options of those names
        (include/rocksdcp/store_options.h, RocksDBWriterOptions).

        ``dcp.async_save`` stages the state dict through this writer (it
        is torch 2.x's ``AsyncStager``): into a copy it keeps and reuses
        from one async save to the next (``cache_staged_state_dict``, the
        default; False makes a fresh copy each time, as torch's stager
        does). The caller then waits only for the copy, not for fresh
        memory to be allocated and touched; the price is a copy of the
        state dict kept between saves (``close()`` lets go of it).

        The coordinator opens the store read-write when torch sets the
        writer up (``set_up_storage_writer`` / ``init``), so that a locked
        store fails the save there, and closes it once the save is
        committed (``finish``). The other ranks open it as followers, which
        write staging files that the coordinator commits.

        Items are resolved (``planner.resolve_data``) only when the writer
        is about to write them, and let go of once written; a tensor on
        another device is copied to the CPU then, as torch's
        FileSystemWriter does. A writer pickles (torch's ``async_save``
        with the process executor sends it to another process) without its
        open store and process group.
        """
        super().__init__()
        self._path = os.fspath(path)
        self._id = checkpoint_id
        self._overwrite = overwrite
        self._rank_arg, self._world_arg, self._group = rank, world_size, process_group
        self._max_piece_bytes = max_piece_bytes or 0
        self._base, self._base_on_newest = base or "", bool(base_on_newest)
        self._write_threads, self._direct = int(write_threads), bool(use_direct_writes)
        self._memory_budget = int(memory_budget or 0)
        self._cache_staged = bool(cache_staged_state_dict)
        self._stager = None
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
        self._new_save()

    def _new_save(self):
        self._native = None
        self._save_id = _new_save_id()
        self._token = secrets.token_bytes(_TOKEN_BYTES)
        self._is_coordinator = False
        self._rank, self._world_size = 0, 1
        # The coordinator's rank plans of this save, by rank.
        self._rank_plans = None
        # After the coordinator's finish: the committed StorageMeta.
        self._committed = None

    def __getstate__(self):
        state = self.__dict__.copy()
        # A store handle and a process group stay in their process; the
        # copy opens the store itself, and uses its own default group.
        state["_native"] = None
        state["_group"] = None
        state["_stager"] = None
        return state

    def _where(self):
        return "rocksdcp save of checkpoint {!r} into store {!r}".format(self._id, self._path)

    def _open(self, follower):
        store = _rocksdcp.Store(self._path, follower=follower)
        writer = store.new_writer(self._overwrite, self._max_piece_bytes,
                                  self._base, self._base_on_newest,
                                  self._compress, write_threads=self._write_threads,
                                  use_direct_writes=self._direct,
                                  memory_budget=self._memory_budget)
        try:
            writer.reset(_checkpoint_id(self._id, "rocksdcp save into store {!r}".format(
                self._path)), self._save_id)
            writer.set_up(self._is_coordinator, self._rank, self._world_size)
        except BaseException:
            # The exception's traceback keeps this frame: it must not keep
            # the store open, nor the id claimed, while a caller holds it.
            writer = store = None
            raise
        return writer

    @property
    def checkpoint_id(self):
        """The id of the checkpoint this writer saves (torch logs it)."""
        return self._id

    # -- torch 2.x --

    def reset(self, checkpoint_id=None):
        """A new save begins; ``checkpoint_id``, when given, names it."""
        if checkpoint_id is not None:
            self._id = checkpoint_id
        self._new_save()

    def set_up_storage_writer(self, is_coordinator, *args, **kwargs):
        """torch 2.x's set-up: ``rank`` and ``use_collectives`` come as
        keywords. Without collectives, only a world of one process can save
        into a store: the coordinator commits what every rank wrote, and
        only collectives tell it what they wrote and that they succeeded."""
        alone = is_coordinator and (self._world_arg == 1 or _group_size(self._group) == 1)
        if not kwargs.get("use_collectives", True) and not alone:
            raise InvalidArgument(
                "{}: use_collectives=False on rank {} of a save of more than one process: "
                "rocksdcp commits a checkpoint from one process, the coordinator, once every "
                "rank has written its part, and only collectives tell it so; save with "
                "use_collectives=True (the default), or from a single process".format(
                    self._where(), kwargs.get("rank", self._rank_arg)))
        self._set_up(is_coordinator, kwargs.get("rank"))

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
        """torch 2.x's StorageMeta of this save: the checkpoint id and the
        save id, known from ``reset`` on. Once the plan arrives
        (``write_data``), every rank reports the coordinator's save id, the
        one the checkpoint records, and after the commit, the committed
        one, until the next ``reset``. (A follower handed a cached plan by
        torch's plan caching keeps its own.)"""
        if c.StorageMeta is None:
            return None
        if self._committed is not None:
            return self._committed
        if self._native is not None:
            return cv.storage_meta_from_native(self._native.storage_meta())
        return c.StorageMeta(checkpoint_id=None if self._id is None else str(self._id),
                             save_id=self._save_id)

    # -- torch 2.x's AsyncStager, for dcp.async_save --

    # Staging is done when stage returns: nothing to wait for after.
    _synchronize_after_execute = False

    @property
    def should_synchronize_after_execute(self):
        return False

    def stage(self, state_dict):
        """A copy of ``state_dict`` on the CPU that training may not
        change, for ``dcp.async_save`` to save in the background; see
        ``cache_staged_state_dict`` (``__init__``)."""
        if self._stager is None:
            self._stager = _staging.Stager(self._cache_staged)
        return self._stager.stage(state_dict)

    def synchronize_staging(self):
        """Nothing: ``stage`` is done when it returns."""

    def close(self):
        """Lets go of the staging copy kept for ``dcp.async_save``."""
        if self._stager is not None:
            self._stager.close()

    # -- torch 1.13, and both --

    def init(self, is_coordinator):
        """torch 1.13's set-up: learns the role, and the coordinator opens the
        store."""
        self._set_up(is_coordinator, None)

    def _set_up(self, is_coordinator, torch_rank):
        self._native = None
        self._committed = None
        self._is_coordinator = is_coordinator
        self._rank, self._world_size = _rank_and_world(
            self._rank_arg, torch_rank, self._world_arg, self._group, self._where())
        if is_coordinator:
            self._native = self._open(follower=False)

    def prepare_local_plan(self, plan):
        return dataclasses.replace(plan, storage_data=_PLAN_TAG + self._token)

    def prepare_global_plan(self, plans):
        # A plan of torch's plan caching that stands for "unchanged" (not
        # usable, no items) was made by torch's planner: it carries no
        # rank's token, and the rank will write the items of the plan it
        # had before, which an incremental save needs to plan its
        # references: the last usable plan of that rank into this store.
        # (torch 1.13's plans have no `usable`: every one is.)
        usable = [getattr(p, "usable", True) for p in plans]
        tokens = [b"" if p.storage_data is None and not u else
                  _split_plan_data(p.storage_data, self._where())[0] for p, u in zip(plans, usable)]
        full = []
        for i, (p, u) in enumerate(zip(plans, usable)):
            key = (os.path.abspath(self._path), len(plans), i)
            if u:
                _WriterMethods._last_plans[key] = p
            full.append(p if u else _WriterMethods._last_plans.get(key, p))
        native = self._native.prepare_global_plan(
            [cv.save_plan_to_native(p, b"") for p in full])
        self._rank_plans = [n.storage_data for n in native]
        return [dataclasses.replace(p, storage_data=_PLAN_TAG + t + n)
                for p, t, n in zip(plans, tokens, self._rank_plans)]

    def _rank_plan(self, plan):
        """rocksdcp's rank plan for this save. torch's plan caching
        (``DefaultSavePlanner(enable_plan_caching=True)``) hands write_data
        the plan cached from an earlier save when the plans did not change,
        which carries that save's rank plan: the coordinator then uses the
        one it made for itself; a follower writes under its rank alone,
        referencing nothing of an incremental save's base (its pieces are
        stored whole) and keeping its own save id."""
        token, rank_plan = _split_plan_data(plan.storage_data, self._where())
        if self._is_coordinator and self._rank_plans is not None:
            return self._rank_plans[self._rank]
        if token == self._token:
            return rank_plan
        return "rank{}".format(self._rank).encode()

    def write_data(self, plan, planner):
        if self._native is None:
            self._native = self._open(follower=True)
        native_plan = cv.save_plan_to_native(plan, self._rank_plan(plan))
        items = plan.items

        def resolve(i):
            item = items[i]
            data = planner.resolve_data(item)
            if item.type != c.WriteItemType.BYTE_IO:
                return cv.save_view(data, item.index.fqn)
            if isinstance(data, io.BytesIO):
                return data.getbuffer(), data
            if isinstance(data, (bytes, bytearray, memoryview)):
                return data, data
            raise InvalidArgument("item {!r}: the planner resolved a byte item to {}".format(
                item.index.fqn, type(data).__name__))

        try:
            results = self._native.write_data(native_plan, resolve)
        except BaseException:
            # Nothing of this save is committed: let go of the id and the
            # store now, not when this writer object goes.
            self._native = None
            raise
        return _done([cv.write_result_from_native(r) for r in results])

    def finish(self, metadata, results):
        """Commits the checkpoint (coordinator), and fills in the
        ``storage_meta`` and ``version`` of the ``metadata`` torch's save
        returns, as torch's own writers do."""
        if not self._is_coordinator or self._native is None:
            raise InvalidArgument("{}: finish called on rank {}, which is not the coordinator "
                                  "that set the save up".format(self._where(), self._rank))
        try:
            try:
                native = cv.metadata_to_native(metadata)
            except InvalidArgument as e:
                raise InvalidArgument("{}: {}".format(self._where(), e)) from None
            committed = self._native.finish(
                native, [[cv.write_result_to_native(r) for r in rank] for rank in results])
        except BaseException:
            self._native = None
            raise
        cv.set_identity(metadata, committed)
        self._committed = cv.storage_meta_from_native(committed.storage_meta)
        # The store's lock goes with it: another process (async_save's)
        # may save into the store next.
        self._native = None


def _called_by_torch_loader():
    caller = sys._getframe(2)
    return caller.f_globals.get("__name__") == "torch.distributed.checkpoint.state_dict_loader"


class _ReaderMethods:
    """StorageReader's methods, for torch 1.13's base class and 2.x's."""

    def __init__(self, path, checkpoint_id=None, *, rank=None, world_size=None,
                 process_group=None, convert_buffer_bytes=DEFAULT_CONVERT_BUFFER_BYTES):
        """Loads checkpoint ``checkpoint_id`` (or the one torch 2.x passes to
        ``reset``) from the rocksdcp store at ``path``, opened read-only when
        torch first calls (``read_metadata``): every rank may open it, beside
        a process that writes it. In a process that holds the store
        read-write, that store is used, and sees every commit. Rank and world
        size as for ``StorageWriter``.

        Before a byte is copied, ``read_data`` checks the destinations of
        torch's planner (its ``state_dict``) against the checkpoint: a shape
        or kind (tensor or bytes) that differs fails the load naming each
        fqn. A destination of another dtype, on another device, or with a
        lazy conjugate or negative bit is loaded as torch's
        FileSystemReader loads it: read into a tensor of the checkpoint's
        dtype on the CPU, then copied in (``copy_``), at most
        ``convert_buffer_bytes`` of them at a time (one larger tensor
        alone); every other destination is written in place.
        """
        super().__init__()
        self._path = os.fspath(path)
        self._id = checkpoint_id
        self._rank_arg, self._world_arg, self._group = rank, world_size, process_group
        self._convert_buffer_bytes = int(convert_buffer_bytes)
        self._native = None
        self._metadata = None
        self._deferred = None
        self._buffer = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(_native=None, _group=None, _buffer=None)
        return state

    def _where(self):
        return "rocksdcp load of checkpoint {!r} from store {!r}".format(self._id, self._path)

    @property
    def checkpoint_id(self):
        """The id of the checkpoint this reader loads (torch logs it)."""
        return self._id

    # -- torch 2.x --

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self._id = checkpoint_id
        self._native = None
        self._metadata = None
        self._deferred = None

    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs):
        self._set_up(is_coordinator, kwargs.get("rank"))

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        try:
            _rocksdcp.Reader.validate_checkpoint_id(str(checkpoint_id))
        except InvalidArgument:
            return False
        return True

    # -- torch 1.13, and both --

    def read_metadata(self, *args, **options):
        """The checkpoint's metadata.

        torch 2.x's loader catches what this raises and raises instead an
        AssertionError ("metadata is None") that keeps only its text, after
        asking again for a rank's own metadata of readers whose parameter
        is named ``kwargs`` (this one's is not: a rocksdcp checkpoint has
        one metadata). So when torch's loader calls it, a failure is kept,
        an empty Metadata returned, and the error itself raised by
        ``set_up_storage_reader``, which torch calls next: the caller sees
        rocksdcp's exception (``NotFound``, ``Busy``, ``Corruption``, ...).
        Any other caller gets the exception at once."""
        self._deferred = None
        try:
            store = _rocksdcp.Store(self._path, read_only=True, share_writable_for_reads=True)
            self._native = store.new_reader()
            self._native.reset(_checkpoint_id(self._id, "rocksdcp load from store {!r}".format(
                self._path)))
            self._metadata = cv.metadata_from_native(self._native.read_metadata())
            return self._metadata
        except Exception as e:
            if not _called_by_torch_loader():
                raise
            self._native = None
            self._deferred = e
            return c.Metadata(state_dict_metadata={})

    def init(self, metadata, is_coordinator):
        self._set_up(is_coordinator, None)

    def _set_up(self, is_coordinator, torch_rank):
        if self._deferred is not None:
            e, self._deferred = self._deferred, None
            raise e
        if self._native is None:
            raise InvalidArgument("{}: set up before read_metadata".format(self._where()))
        rank, world_size = _rank_and_world(self._rank_arg, torch_rank, self._world_arg,
                                           self._group, self._where())
        self._native.set_up(is_coordinator, rank, world_size)

    def prepare_local_plan(self, plan):
        return plan

    def prepare_global_plan(self, plans):
        return plans

    def _check_destinations(self, planner):
        state_dict = getattr(planner, "state_dict", None)
        if not isinstance(state_dict, dict):
            return
        dests = []
        for fqn, value in state_dict.items():
            if isinstance(value, torch.Tensor):
                dests.append((fqn, cv.dtype_name(value.dtype), list(value.shape), False))
            elif hasattr(value, "local_shards") and hasattr(value, "metadata"):
                # A ShardedTensor: its global size and dtype.
                md = value.metadata()
                dests.append((fqn, cv.dtype_name(md.tensor_properties.dtype), list(md.size),
                              False))
            else:
                dests.append((fqn, None, [], True))
        self._native.check_destinations(dests)

    def _read(self, plan, items, views):
        """Reads ``items`` of ``plan`` into ``views`` (by position; None for
        a byte item); returns {position: bytes} of the byte items."""
        return self._native.read_data(cv.load_plan_to_native(plan, items), views)

    def _convert_buffer(self, nbytes):
        if self._buffer is None or self._buffer.numel() < nbytes:
            self._buffer = torch.empty(nbytes, dtype=torch.uint8)
        return self._buffer

    def read_data(self, plan, planner):
        """Reads ``plan`` for ``planner``: first every byte item and every
        tensor that is written in place, in one read, then the tensors
        that need converting, in batches (see ``__init__``)."""
        self._check_destinations(planner)
        direct, views, dests = [], [], []
        converting = []
        for item in plan.items:
            if item.type == c.LoadItemType.BYTE_IO:
                direct.append(item)
                views.append(None)
                dests.append(None)
                continue
            dest = planner.resolve_tensor(item).detach()
            stored = cv.stored_dtype(self._metadata, item.storage_index.fqn)
            view = cv.load_view(dest, stored, item.dest_index.fqn)
            if view is None:
                converting.append((item, dest, stored))
            else:
                direct.append(item)
                views.append(view)
                dests.append(dest)
        byte_items = self._read(plan, direct, views)
        for i, (item, dest) in enumerate(zip(direct, dests)):
            if item.type == c.LoadItemType.BYTE_IO:
                planner.load_bytes(item, io.BytesIO(byte_items[i]))
            else:
                planner.commit_tensor(item, dest)
        for batch in self._batches(converting):
            self._read_converting(plan, planner, batch)
        return _done(None)

    def _batches(self, converting):
        batch, size = [], 0
        for entry in converting:
            item, _, stored = entry
            n = _aligned(_nbytes(item.lengths, stored))
            if batch and size + n > self._convert_buffer_bytes:
                yield batch
                batch, size = [], 0
            batch.append(entry)
            size += n
        if batch:
            yield batch

    def _read_converting(self, plan, planner, batch):
        # Each tensor starts on a 64-byte boundary of the buffer, which
        # viewing its bytes as the dtype needs.
        sizes = [_aligned(_nbytes(item.lengths, stored)) for item, _, stored in batch]
        total = sum(sizes)
        # One larger than the buffer is read alone, into memory of its own.
        buffer = (self._convert_buffer(total) if total <= self._convert_buffer_bytes
                  else torch.empty(total, dtype=torch.uint8))
        temps, offset = [], 0
        for (item, _, stored), n in zip(batch, sizes):
            exact = _nbytes(item.lengths, stored)
            temps.append(buffer[offset:offset + exact].view(stored).view(list(item.lengths)))
            offset += n
        self._read(plan, [item for item, _, _ in batch],
                   [cv.load_view(t, t.dtype, item.dest_index.fqn)
                    for t, (item, _, _) in zip(temps, batch)])
        for temp, (item, dest, _) in zip(temps, batch):
            dest.copy_(temp)
            planner.commit_tensor(item, dest)


def _aligned(n):
    return (n + 63) // 64 * 64


def _nbytes(lengths, dtype):
    n = torch.empty((), dtype=dtype).element_size()
    for length in lengths:
        n *= int(length)
    return n


class StorageWriter(_WriterMethods, c.BaseStorageWriter, *c.ASYNC_STAGER):
    """Saves a PyTorch distributed checkpoint into a rocksdcp store.

    A subclass of the installed torch's DCP ``StorageWriter``: torch 2.x's
    ``dcp.save(sd, storage_writer=StorageWriter(path), checkpoint_id="step-100")``
    and ``dcp.async_save`` (either executor), and torch 1.13's
    ``save_state_dict(sd, storage_writer=StorageWriter(path, "step-100"))``
    drive it. See ``__init__`` for the options.
    """


class StorageReader(_ReaderMethods, c.BaseStorageReader):
    """Loads a PyTorch distributed checkpoint from a rocksdcp store.

    A subclass of the installed torch's DCP ``StorageReader``, for
    ``dcp.load`` (torch 2.x) and ``load_state_dict`` (torch 1.13). Byte
    items reach torch's planner as ``io.BytesIO``; torch's default planner
    unpickles them (``torch.load``), ``rocksdcp.torch.DefaultLoadPlanner``
    hands them over as saved.
    """
