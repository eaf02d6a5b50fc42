"""rocksdcp: an embedded checkpoint store for training state, on RocksDB.

A store is one directory holding many checkpoints; each checkpoint is
committed atomically and every byte of it is checksummed. This package is
the Python binding of the C++ library (the same store, the same on-disk
format):

- ``rocksdcp.Store``: list, inspect, verify, delete and garbage-collect the
  checkpoints of a store, and read their byte items;
- ``rocksdcp.torch``: ``StorageWriter`` / ``StorageReader`` that PyTorch's
  distributed checkpoint (``save_state_dict`` / ``load_state_dict`` in torch
  1.13, ``dcp.save`` / ``dcp.load`` in torch 2.x) saves into and loads from.

Errors are exceptions of ``rocksdcp.Error``'s subclasses, one per status code
of the library, with its message (``rocksdcp.NotFound`` is also a
``KeyError``, ``rocksdcp.InvalidArgument`` a ``ValueError``, ...).
"""

import dataclasses
import os

from rocksdcp._errors import (  # noqa: F401 - the package's exceptions
    Aborted,
    AlreadyExists,
    Busy,
    Corruption,
    Error,
    FailedPrecondition,
    InternalError,
    InvalidArgument,
    IOError,
    NotFound,
    NotSupported,
    ResourceExhausted,
)
from rocksdcp import _rocksdcp

__all__ = [
    "Store", "CheckpointInfo", "Error", "NotFound", "Corruption",
    "InvalidArgument", "IOError", "AlreadyExists", "Busy",
    "FailedPrecondition", "NotSupported", "Aborted", "InternalError",
    "ResourceExhausted",
]


@dataclasses.dataclass(frozen=True)
class CheckpointInfo:
    """One committed checkpoint, as the store's catalog records it."""

    id: str
    #: The RocksDB column family holding it: the id, or "<id>~N" after an
    #: overwrite.
    column_family: str
    #: When it was committed, in microseconds since the Unix epoch.
    created_unix_micros: int
    #: Payload bytes (tensor data and byte items) and item count.
    bytes: int
    items: int
    world_size: int
    #: XXH3-64 of its encoded metadata.
    metadata_checksum: int
    #: An incremental save's references: the column families other than its
    #: own that hold pieces of it, and their payload bytes (part of
    #: ``bytes``).
    referenced_column_families: list = dataclasses.field(default_factory=list)
    referenced_bytes: int = 0
    #: What its column family takes on disk, and what deleting it would free
    #: now (0 while another checkpoint references it).
    stored_bytes: int = 0
    freed_by_delete: int = 0
    #: Empty for a sound catalog entry; for a damaged one, what is wrong
    #: (only ``id`` is set then, and the checkpoint can't be loaded).
    damage: str = ""


class Store:
    """One rocksdcp store: a RocksDB directory holding many checkpoints.

    ``Store(path)`` opens (or creates) it read-write; one process at a time
    may, and a second gets ``rocksdcp.Busy``. Within a process, every
    read-write ``Store`` of a path and every ``rocksdcp.torch.StorageWriter``
    share one handle. ``read_only=True`` opens it for inspection, beside a
    process that writes it; such a Store sees the checkpoints committed when
    it opened. Use it as a context manager, or call ``close()``.

    A read-write open reclaims what saves that never committed left (a
    process killed mid-save): what ``gc()`` would drop, never a save still
    running. ``reclaimed_on_open`` says what went; ``reclaim_torn_saves=False``
    leaves it all to ``gc()``.

    Thread-safe; the long calls (``verify``, ``gc``, ``delete``) release the
    GIL.
    """

    def __init__(self, path, read_only=False, *, create_if_missing=True,
                 reclaim_torn_saves=True):
        self._native = _rocksdcp.Store(
            os.fspath(path), read_only=read_only,
            create_if_missing=create_if_missing,
            reclaim_torn_saves=reclaim_torn_saves)
        self._read_only = read_only

    @property
    def reclaimed_on_open(self):
        """What the open reclaimed, as ``gc()`` returns it (empty lists and 0
        bytes for a read-only store, or when nothing was left). A store this
        process already held open read-write reports that open's."""
        return self._native.reclaimed_on_open

    @property
    def path(self):
        """The store's absolute path."""
        return self._native.path

    @property
    def read_only(self):
        return self._read_only

    @property
    def closed(self):
        return self._native.closed

    def close(self):
        """Lets go of the store. Idempotent."""
        self._native.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self.closed else ("read-only" if self._read_only else "read-write")
        return "rocksdcp.Store({!r}, {})".format(
            self._native.path if not self.closed else "?", state)

    def list(self):
        """The committed checkpoints, oldest first, as ``CheckpointInfo``; a
        damaged catalog entry comes first, its ``damage`` saying what is
        wrong."""
        return [CheckpointInfo(**c) for c in self._native.list()]

    def info(self, checkpoint_id):
        """``CheckpointInfo`` of one checkpoint; ``NotFound`` if not committed."""
        return CheckpointInfo(**self._native.info(checkpoint_id))

    def __contains__(self, checkpoint_id):
        try:
            self.info(checkpoint_id)
        except NotFound:
            return False
        return True

    def delete(self, checkpoint_id):
        """Deletes a committed checkpoint (its catalog entry first, synced)."""
        self._native.delete(checkpoint_id)

    def keep_last(self, n):
        """Deletes all but the newest ``n`` checkpoints, by created time.

        Returns ``(kept, deleted)``: lists of ids, newest first and oldest
        first.
        """
        report = self._native.keep_last(n)
        return report["kept"], report["deleted"]

    def gc(self, dry_run=False):
        """Drops what unfinished saves left: column families no catalog entry
        names, and staging files of writers no longer running. Returns a dict
        with ``dropped_column_families``, ``deleted_staging_files`` and
        ``freed_bytes``."""
        return self._native.gc(dry_run)

    def verify(self, checkpoint_ids=None, *, max_problems=10000, progress=None):
        """Checks every piece of the named checkpoints (every one if None) as
        a load would, and reports every problem instead of stopping.

        Returns a dict: ``ok``, and ``checkpoints``, one dict each with
        ``checkpoint_id``, ``ok``, ``items_checked``, ``pieces_checked``,
        ``bytes_checked``, ``problems`` (``item``, ``piece``, ``code``,
        ``message``), ``unlisted_problems`` and ``damaged_items``.
        ``progress(bytes_done, bytes_total)`` is called as pieces are
        checked. A damaged checkpoint is a finding, not an exception.
        """
        return self._native.verify(list(checkpoint_ids or []), max_problems, progress)

    def load_bytes(self, checkpoint_id, fqns):
        """The byte items ``fqns`` of a checkpoint, as ``{fqn: bytes}``, exactly
        as saved: nothing is unpickled."""
        if isinstance(fqns, str):
            fqns = [fqns]
        return self._native.load_bytes(checkpoint_id, list(fqns))

    def items(self, checkpoint_id):
        """What a checkpoint holds: ``{fqn: ("tensor", dtype, size) or
        ("bytes",)}``, dtype by torch's name (``"bfloat16"``)."""
        md = self._native.metadata(checkpoint_id)
        out = {}
        for fqn, item in md.state_dict_metadata.items():
            if isinstance(item, _rocksdcp.TensorStorageMetadata):
                out[fqn] = ("tensor", item.properties.dtype, tuple(item.size))
            else:
                out[fqn] = ("bytes",)
        return out
