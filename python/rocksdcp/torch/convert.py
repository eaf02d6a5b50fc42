"""Bring existing checkpoints in, and take them out: a directory written by
torch's ``FileSystemWriter`` (``dcp.save(sd, checkpoint_id=DIR)``) becomes a
checkpoint in a rocksdcp store, and a checkpoint of a store becomes such a
directory again, which torch's ``FileSystemReader`` loads. Every tensor
chunk keeps its dtype, shape, chunking and bits; every byte item keeps its
bytes (torch's pickles are stored as they are, never unpickled); the
checkpoint keeps the directory's ``state_dict_metadata`` and
``planner_data``::

    python -m rocksdcp.torch.convert import DIR STORE ID [--overwrite]
    python -m rocksdcp.torch.convert export STORE ID DIR

or ``import_dcp(DIR, STORE, ID)`` and ``export_dcp(STORE, ID, DIR)``.

Neither holds the state dict: each is a save driven through the storage's
own calls, as ``dcp.save`` drives them, with a planner whose items are the
saved chunks of the source's metadata and whose ``resolve_data`` reads one
chunk from the source when the writer asks for it. Importing, rocksdcp's
``StorageWriter`` asks for an item when one of its threads is about to
write it and lets go of it once written, and torch's ``FileSystemReader``
reads the chunk (``read_data`` with a plan of that one item). Exporting,
rocksdcp's ``StorageReader`` reads the chunk, and torch's
``FileSystemWriter`` writes it; as that writer keeps every tensor of a file
until the file is written, the export writes a file per
``max_file_bytes`` of tensors (a larger chunk alone). Memory holds a few
chunks at a time, whatever the checkpoint's size.

Importing reads the directory as torch's ``FileSystemReader`` does, which
unpickles its ``.metadata`` file: import only directories you trust, as
you would load them only if you trusted them. Tensors are read with
``torch.load(weights_only=True)``.
"""

import argparse
import dataclasses
import os
import shutil
import sys
import threading
import traceback

import torch

from rocksdcp.torch import _compat as c

if not c.IS_TORCH2:
    raise ImportError(
        "rocksdcp.torch.convert needs torch 2.x (torch.distributed.checkpoint's "
        "FileSystemReader and FileSystemWriter, driven as its dcp.save drives them); "
        "this is torch {}".format(torch.__version__))

from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter  # noqa: E402
from torch.distributed.checkpoint.planner import (  # noqa: E402
    LoadItemType,
    LoadPlan,
    LoadPlanner,
    ReadItem,
    SavePlan,
    SavePlanner,
    TensorWriteData,
    WriteItem,
    WriteItemType,
)

import rocksdcp  # noqa: E402
from rocksdcp.torch._storage import StorageReader, StorageWriter  # noqa: E402

__all__ = ["import_dcp", "export_dcp", "DirectoryPlanner", "StorePlanner",
           "DEFAULT_MAX_FILE_BYTES", "main"]

# At most this many bytes of tensors go into one file of an exported
# directory (a larger chunk goes alone): torch's FileSystemWriter holds
# every tensor of a file until the file is written.
DEFAULT_MAX_FILE_BYTES = 64 << 20

_METADATA_FILE = ".metadata"


# ---- What a checkpoint's metadata says ----

def _chunk_bytes(chunk, dtype):
    n = torch.empty((), dtype=dtype).element_size()
    for size in chunk.sizes:
        n *= int(size)
    return n


def _write_items(metadata):
    """One WriteItem per saved chunk of ``metadata`` (torch's Metadata), as
    torch's planner made them: TENSOR for a tensor saved whole, SHARD for
    each chunk of one saved in several, BYTE_IO for a byte item."""
    items = []
    for fqn, md in metadata.state_dict_metadata.items():
        if isinstance(md, c.BytesStorageMetadata):
            items.append(WriteItem(index=c.MetadataIndex(fqn), type=WriteItemType.BYTE_IO))
            continue
        kind = WriteItemType.TENSOR if len(md.chunks) == 1 else WriteItemType.SHARD
        for chunk in md.chunks:
            items.append(WriteItem(
                index=c.MetadataIndex(fqn, chunk.offsets), type=kind,
                tensor_data=TensorWriteData(chunk=chunk, properties=md.properties,
                                            size=md.size)))
    return items


def _item_bytes(item):
    if item.type == WriteItemType.BYTE_IO:
        return 0
    return _chunk_bytes(item.tensor_data.chunk, item.tensor_data.properties.dtype)


def _read_item(write_item):
    """The ReadItem of one whole saved chunk (or byte item)."""
    if write_item.type == WriteItemType.BYTE_IO:
        zero = torch.Size([0])
        return ReadItem(type=LoadItemType.BYTE_IO, dest_index=write_item.index,
                        dest_offsets=zero, storage_index=write_item.index,
                        storage_offsets=zero, lengths=zero)
    chunk = write_item.tensor_data.chunk
    zeros = torch.Size([0] * len(chunk.sizes))
    return ReadItem(type=LoadItemType.TENSOR, dest_index=write_item.index,
                    dest_offsets=zeros, storage_index=write_item.index,
                    storage_offsets=zeros, lengths=torch.Size(chunk.sizes))


def _describe(item):
    if item.type == WriteItemType.BYTE_IO:
        return "item {!r}".format(item.index.fqn)
    return "item {!r} (chunk at {})".format(item.index.fqn, list(item.index.offset))


class _OneItem(LoadPlanner):
    """What a storage reader hands over for a plan of one item: a fresh
    tensor of the chunk's dtype and size that the reader fills in, or the
    byte item's BytesIO, exactly as read."""

    def __init__(self, dtype=None):
        self._dtype = dtype
        self.value = None

    def set_up_planner(self, *args, **kwargs):
        pass

    def create_local_plan(self):
        raise NotImplementedError

    def create_global_plan(self, global_plan):
        raise NotImplementedError

    def finish_plan(self, central_plan):
        raise NotImplementedError

    def load_bytes(self, read_item, value):
        self.value = value

    def resolve_tensor(self, read_item):
        self.value = torch.empty(read_item.lengths, dtype=self._dtype)
        return self.value

    def commit_tensor(self, read_item, tensor):
        self.value = tensor


def _read_one(reader, item):
    """One item of ``reader``'s checkpoint, read alone: a tensor of its
    chunk, or a BytesIO of its bytes."""
    dtype = None if item.type == WriteItemType.BYTE_IO else item.tensor_data.properties.dtype
    catcher = _OneItem(dtype)
    reader.read_data(LoadPlan([_read_item(item)]), catcher).wait()
    if catcher.value is None:
        raise rocksdcp.InternalError("{}: the reader handed nothing over".format(_describe(item)))
    return catcher.value


class _Progress:
    """Counts the bytes of tensor data resolved, from any thread, for a
    ``progress(done_bytes, total_bytes)`` callback."""

    def __init__(self, items, progress):
        self._progress = progress
        self._lock = threading.Lock()
        self.total = sum(_item_bytes(i) for i in items)
        self.done = 0

    def add(self, item):
        with self._lock:
            self.done += _item_bytes(item)
            if self._progress is not None:
                self._progress(self.done, self.total)


class _ChunkPlanner(SavePlanner):
    """A save planner of a checkpoint that already exists: its items are
    the source's saved chunks, its metadata the source's, and each item is
    read from the source when the storage writer asks for it
    (``read_chunk``)."""

    def __init__(self, metadata, progress=None):
        super().__init__()
        self.source_metadata = metadata
        self.items = _write_items(metadata)
        self._progress = _Progress(self.items, progress)

    def set_up_planner(self, state_dict=None, storage_meta=None, is_coordinator=True):
        pass

    def create_local_plan(self):
        return SavePlan(list(self.items))

    def create_global_plan(self, all_plans):
        md = c.Metadata(state_dict_metadata=dict(self.source_metadata.state_dict_metadata),
                        planner_data=self.source_metadata.planner_data)
        return all_plans, md

    def finish_plan(self, new_plan):
        return new_plan

    def resolve_data(self, write_item):
        data = self.read_chunk(write_item)
        self._progress.add(write_item)
        return data

    def read_chunk(self, write_item):
        raise NotImplementedError


class DirectoryPlanner(_ChunkPlanner):
    """Plans the import of a DCP directory: resolves each item through
    torch's ``FileSystemReader`` of it (``reader``, set up with its
    metadata), one chunk per read."""

    def __init__(self, directory, reader, metadata, progress=None):
        super().__init__(metadata, progress)
        self._directory = directory
        self._reader = reader

    def read_chunk(self, write_item):
        try:
            return _read_one(self._reader, write_item)
        except Exception as e:
            info = self._reader.storage_data.get(write_item.index)
            where = ("{}, {} bytes at offset {}".format(
                os.path.join(self._directory, info.relative_path), info.length, info.offset)
                if info is not None else "no file: .metadata does not say where it is")
            error = rocksdcp.IOError if isinstance(e, OSError) else rocksdcp.Corruption
            raise error("DCP checkpoint {!r}: {}: cannot read it ({}): {}: {}".format(
                self._directory, _describe(write_item), where, type(e).__name__, e)) from e


class StorePlanner(_ChunkPlanner):
    """Plans the export of a store's checkpoint: resolves each item through
    rocksdcp's ``StorageReader`` of it (``reader``, set up), one chunk per
    read; byte items as the BytesIO of their bytes."""

    def __init__(self, reader, metadata, progress=None):
        super().__init__(metadata, progress)
        self._reader = reader

    def read_chunk(self, write_item):
        return _read_one(self._reader, write_item)


# ---- Driving a storage writer as dcp.save does ----

def _save(writer, planner, write):
    """Drives ``writer`` (coordinator, rank 0 of 1) and ``planner`` through
    torch 2.x's save: reset, set_up_storage_writer, the plans, then
    ``write(plan)`` (which calls write_data, once or more, and returns the
    write results), and finish. Returns the metadata committed."""
    writer.reset()
    planner.set_up_planner({}, writer.storage_meta(), True)
    writer.set_up_storage_writer(True, rank=0, use_collectives=True)
    local_plan = writer.prepare_local_plan(planner.create_local_plan())
    plans, metadata = planner.create_global_plan([local_plan])
    plans = writer.prepare_global_plan(plans)
    results = write(planner.finish_plan(plans[0]))
    writer.finish(metadata=metadata, results=[results])
    return metadata


def _written(future):
    future.wait()
    return future.value()


def _check_directory(directory):
    if not os.path.isdir(directory):
        raise FileNotFoundError("DCP checkpoint directory {!r} does not exist".format(directory))
    if not os.path.isfile(os.path.join(directory, _METADATA_FILE)):
        raise FileNotFoundError(
            "{!r} holds no DCP checkpoint: it has no {} file (torch's FileSystemWriter "
            "writes it last: was the save interrupted?)".format(directory, _METADATA_FILE))


def import_dcp(directory, store_path, checkpoint_id, *, overwrite=False, progress=None):
    """Saves the DCP checkpoint in ``directory`` (torch's FileSystemWriter
    wrote it) into the rocksdcp store at ``store_path`` (created if
    missing) as ``checkpoint_id``, chunk for chunk and byte for byte, one
    chunk in memory per writer thread. ``overwrite`` replaces a committed
    checkpoint of that id (else ``rocksdcp.AlreadyExists``).
    ``progress(done_bytes, total_bytes)``, if given, is called as tensor
    data is read (from the writer's threads). Returns torch's Metadata of
    the checkpoint committed."""
    directory = os.fspath(directory)
    _check_directory(directory)
    reader = FileSystemReader(directory)
    try:
        metadata = reader.read_metadata()
    except Exception as e:
        raise rocksdcp.Corruption("DCP checkpoint {!r}: its {} can't be read: {}: {}".format(
            directory, _METADATA_FILE, type(e).__name__, e)) from e
    if not isinstance(metadata, c.Metadata) or getattr(metadata, "storage_data", None) is None:
        raise rocksdcp.Corruption(
            "DCP checkpoint {!r}: its {} holds a {}, not the Metadata with storage_data that "
            "torch's FileSystemWriter writes".format(directory, _METADATA_FILE,
                                                    type(metadata).__name__))
    reader.set_up_storage_reader(metadata, True, rank=0)
    writer = StorageWriter(store_path, checkpoint_id, overwrite=overwrite, rank=0, world_size=1)
    planner = DirectoryPlanner(directory, reader, metadata, progress)
    try:
        return _save(writer, planner, lambda plan: _written(writer.write_data(plan, planner)))
    except BaseException as e:
        # The store's writer claims the id until it is gone: let go of it
        # now (reset), and of one a failed set-up left in the frames of
        # the exception's traceback, not when the caller drops the
        # exception, so that the id can be saved again at once.
        writer.reset()
        traceback.clear_frames(e.__traceback__)
        raise


def _file_batches(items, max_file_bytes):
    """``items`` in runs of at most ``max_file_bytes`` of tensor data (a
    larger chunk alone), in their order."""
    batches, batch, size = [], [], 0
    for item in items:
        n = _item_bytes(item)
        if batch and size + n > max_file_bytes:
            batches.append(batch)
            batch, size = [], 0
        batch.append(item)
        size += n
    if batch or not batches:
        batches.append(batch)
    return batches


def export_dcp(store_path, checkpoint_id, directory, *, progress=None,
               max_file_bytes=DEFAULT_MAX_FILE_BYTES):
    """Writes checkpoint ``checkpoint_id`` of the rocksdcp store at
    ``store_path`` into ``directory`` (created; it must not exist or be
    empty) with torch's FileSystemWriter, chunk for chunk and byte for
    byte, for torch's FileSystemReader (``dcp.load(sd, checkpoint_id=DIR)``).
    The directory holds a file per ``max_file_bytes`` of tensor data (a
    larger chunk alone), torch's ``.metadata`` last; a failed export
    removes what it wrote. ``rocksdcp.NotFound`` if the store or checkpoint
    does not exist; ``FileExistsError`` if the directory holds anything.
    ``progress(done_bytes, total_bytes)`` as for ``import_dcp``. Returns
    torch's Metadata of the directory."""
    directory = os.fspath(directory)
    reader = StorageReader(store_path, checkpoint_id, rank=0, world_size=1)
    metadata = reader.read_metadata()
    reader.set_up_storage_reader(metadata, True, rank=0)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise FileExistsError("{!r} is not a directory".format(directory))
    created = not os.path.exists(directory)
    if not created and os.listdir(directory):
        raise FileExistsError(
            "directory {!r} is not empty: export checkpoint {!r} into a new or empty "
            "directory".format(directory, checkpoint_id))
    writer = FileSystemWriter(directory, overwrite=False)
    planner = StorePlanner(reader, metadata, progress)

    def write(plan):
        batches = _file_batches(plan.items, max_file_bytes)
        if len(batches) == 1:
            return _written(writer.write_data(plan, planner))
        # One write_data per batch, each naming its files by the prefix
        # torch's prepare_global_plan gave, and the batch's number.
        results = []
        for i, batch in enumerate(batches):
            storage_data = dataclasses.replace(
                plan.storage_data, prefix="{}{}_".format(plan.storage_data.prefix, i))
            batch_plan = dataclasses.replace(plan, items=batch, storage_data=storage_data)
            results += _written(writer.write_data(batch_plan, planner))
        return results

    try:
        return _save(writer, planner, write)
    except BaseException:
        # What this export wrote goes: the directory was new or empty.
        if created:
            shutil.rmtree(directory, ignore_errors=True)
        elif os.path.isdir(directory):
            for name in os.listdir(directory):
                os.remove(os.path.join(directory, name))
        raise


# ---- The command line ----

_PROG = "python -m rocksdcp.torch.convert"


def _human(n):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return "{} {}".format(n, unit) if unit == "bytes" else "{:.1f} {}".format(n, unit)
        n /= 1024.0
    return str(n)


class _StderrProgress:
    """A one-line bar on stderr when it is a terminal, else a line at each
    quarter of the tensor data."""

    def __init__(self, verb, stream=None):
        self._verb = verb
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._quarter = 0
        self._drawn = False

    def __call__(self, done, total):
        fraction = done / total if total else 1.0
        if self._tty:
            width = 30
            filled = int(width * fraction)
            self._stream.write("\r{} [{}{}] {:3d}% {} of {}".format(
                self._verb, "#" * filled, " " * (width - filled), int(100 * fraction),
                _human(done), _human(total)))
            self._stream.flush()
            self._drawn = True
            return
        while self._quarter < 4 and fraction >= (self._quarter + 1) / 4:
            self._quarter += 1
            self._stream.write("{}: {}% ({} of {} of tensor data)\n".format(
                self._verb, 25 * self._quarter, _human(done), _human(total)))
            self._stream.flush()

    def end(self):
        if self._drawn:
            self._stream.write("\n")
            self._stream.flush()
            self._drawn = False


def _summary(metadata):
    tensors = sum(1 for md in metadata.state_dict_metadata.values()
                  if isinstance(md, c.TensorStorageMetadata))
    chunks = sum(len(md.chunks) for md in metadata.state_dict_metadata.values()
                 if isinstance(md, c.TensorStorageMetadata))
    data = sum(_chunk_bytes(ch, md.properties.dtype)
               for md in metadata.state_dict_metadata.values()
               if isinstance(md, c.TensorStorageMetadata) for ch in md.chunks)
    byte_items = len(metadata.state_dict_metadata) - tensors
    return "{} in {} ({}), {}".format(_count(tensors, "tensor"), _count(chunks, "chunk"),
                                      _human(data), _count(byte_items, "byte item"))


def _count(n, what):
    return "{} {}{}".format(n, what, "" if n == 1 else "s")


def _parser():
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="Convert PyTorch distributed checkpoints (DCP) between a directory of "
                    "torch's FileSystemWriter and a rocksdcp store, chunk for chunk and "
                    "byte for byte, a few chunks in memory at a time.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    imp = commands.add_parser(
        "import", help="save a DCP directory into a store as checkpoint ID",
        description="Save the DCP checkpoint in directory DIR (torch's FileSystemWriter "
                    "wrote it) into the rocksdcp store STORE (created if missing) as "
                    "checkpoint ID. DIR's .metadata is unpickled, as torch's "
                    "FileSystemReader does: import only directories you trust.")
    imp.add_argument("directory", metavar="DIR")
    imp.add_argument("store", metavar="STORE")
    imp.add_argument("checkpoint_id", metavar="ID")
    imp.add_argument("--overwrite", action="store_true",
                     help="replace checkpoint ID if the store holds it")
    exp = commands.add_parser(
        "export", help="write checkpoint ID of a store as a DCP directory",
        description="Write checkpoint ID of the rocksdcp store STORE into directory DIR "
                    "(new or empty) with torch's FileSystemWriter, for torch's "
                    "FileSystemReader (dcp.load(state_dict, checkpoint_id=DIR)).")
    exp.add_argument("store", metavar="STORE")
    exp.add_argument("checkpoint_id", metavar="ID")
    exp.add_argument("directory", metavar="DIR")
    return parser


def main(argv=None):
    """The command line; returns the exit code: 0 done, 1 failed, 2 bad
    usage (argparse exits with 2 itself)."""
    args = _parser().parse_args(argv)
    where = "{} {}".format(_PROG, args.command)
    progress = _StderrProgress(args.command)
    try:
        if args.command == "import":
            md = import_dcp(args.directory, args.store, args.checkpoint_id,
                            overwrite=args.overwrite, progress=progress)
            progress.end()
            print("imported {} from {} into store {} as checkpoint {}".format(
                _summary(md), args.directory, args.store, args.checkpoint_id))
        else:
            md = export_dcp(args.store, args.checkpoint_id, args.directory, progress=progress)
            progress.end()
            print("exported checkpoint {} of store {}: {} into {}".format(
                args.checkpoint_id, args.store, _summary(md), args.directory))
    except KeyboardInterrupt:
        progress.end()
        print("{}: interrupted".format(where), file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - every failure is reported, exit 1
        progress.end()
        message = str(e)
        if isinstance(e, rocksdcp.AlreadyExists):
            message += " (pass --overwrite to replace it)"
        if not isinstance(e, rocksdcp.Error):
            message = "{}: {}".format(type(e).__name__, message)
        else:
            message = "{}: {}".format(e.code, message)
        print("{}: {}".format(where, message), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
