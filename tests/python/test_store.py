"""rocksdcp.Store from Python: the catalog, retention, verify, gc, byte
items, and errors as exception classes with the library's messages."""

import os

import pytest
import torch

import rocksdcp
import rocksdcp.torch as rt
from conftest import flip_byte, sst_files


def save(path, checkpoint_id, state, overwrite=False):
    rt.dcp.save_state_dict(state, no_dist=True, planner=rt.DefaultSavePlanner(),
                           storage_writer=rt.StorageWriter(path, checkpoint_id,
                                                           overwrite=overwrite))


def example(seed):
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(64, 64, generator=g), "step": seed.to_bytes(8, "little")}


def test_list_info_and_delete(tmp_path):
    path = tmp_path / "store"
    save(path, "step-1", example(1))
    save(path, "step-2", example(2))
    with rocksdcp.Store(path) as store:
        ids = [c.id for c in store.list()]
        assert ids == ["step-1", "step-2"]
        info = store.info("step-2")
        assert info.items == 2 and info.world_size == 1
        assert info.bytes == 64 * 64 * 4 + 8
        assert "step-1" in store and "nope" not in store
        assert store.items("step-1") == {"w": ("tensor", "float32", (64, 64)),
                                         "step": ("bytes",)}
        assert store.load_bytes("step-2", "step") == {"step": (2).to_bytes(8, "little")}
        store.delete("step-1")
        assert [c.id for c in store.list()] == ["step-2"]
        with pytest.raises(rocksdcp.NotFound) as e:
            store.delete("step-1")
        where = store.path
    assert isinstance(e.value, KeyError)
    assert str(e.value) == "checkpoint 'step-1' not found in store '{}'".format(where)
    assert store.closed


def test_keep_last_keeps_the_newest(tmp_path):
    path = tmp_path / "store"
    for i in (5, 1, 9, 3):
        save(path, "c{}".format(i), example(i))
    with rocksdcp.Store(path) as store:
        kept, deleted = store.keep_last(2)
        assert kept == ["c3", "c9"] and deleted == ["c5", "c1"]
        assert [c.id for c in store.list()] == ["c9", "c3"]


def test_verify_finds_a_damaged_piece_and_gc_reports(tmp_path):
    path = tmp_path / "store"
    state = example(1)
    save(path, "good", state)
    with rocksdcp.Store(path) as store:
        report = store.verify()
        assert report["ok"] and report["checkpoints"][0]["items_checked"] == 2
        assert store.gc(dry_run=True)["dropped_column_families"] == []
    # Inside w's data: where its first row is in the file.
    sst = sst_files(str(path))[0]
    with open(sst, "rb") as f:
        at = f.read().find(state["w"][0].numpy().tobytes())
    assert at > 0
    flip_byte(sst, at + 100)
    seen = []
    with rocksdcp.Store(path, read_only=True) as store:
        report = store.verify(progress=lambda done, total: seen.append((done, total)))
    assert not report["ok"]
    [c] = report["checkpoints"]
    # w's pieces (4 KiB or more) have RocksDB blocks of their own.
    assert {d["fqn"] for d in c["damaged_items"]} == {"w"}
    assert c["problems"][0]["code"] == "Corruption"
    assert seen and seen[-1][1] > 0


def test_errors_are_classes_with_the_library_messages(tmp_path, lock_holder):
    path = tmp_path / "store"
    save(path, "c", example(1))
    with pytest.raises(rocksdcp.NotFound, match="does not exist"):
        rocksdcp.Store(tmp_path / "nowhere", create_if_missing=False)
    with rocksdcp.Store(path) as store:
        with pytest.raises(rocksdcp.InvalidArgument,
                           match="checkpoint id contains control character 0x09") as e:
            store.info("bad\tid")
        assert isinstance(e.value, ValueError)
        with pytest.raises(rocksdcp.AlreadyExists, match="already exists"):
            writer = store._native.new_writer()
            writer.reset("c")
            writer.set_up(True, 0, 1)
    with rocksdcp.Store(path, read_only=True) as store:
        with pytest.raises(rocksdcp.FailedPrecondition, match="read-only"):
            store.delete("c")
    # Exceptions hold their frames, and so the stores above: let them go
    # before another process opens the store.
    del e, writer
    lock_holder(path)
    with pytest.raises(rocksdcp.Busy, match="is locked by another process"):
        rocksdcp.Store(path)
    # Reading beside the writer works.
    assert [c.id for c in rocksdcp.Store(path, read_only=True).list()] == ["c"]
    for cls in (rocksdcp.NotFound, rocksdcp.Corruption, rocksdcp.InvalidArgument,
                rocksdcp.IOError, rocksdcp.Busy, rocksdcp.NotSupported,
                rocksdcp.ResourceExhausted):
        assert issubclass(cls, rocksdcp.Error)
    assert issubclass(rocksdcp.IOError, OSError)
    assert issubclass(rocksdcp.ResourceExhausted, MemoryError)
    # Every code the library has maps to its class.
    from rocksdcp._errors import error_class
    assert error_class("ResourceExhausted") is rocksdcp.ResourceExhausted


def test_one_process_shares_its_read_write_store(tmp_path):
    path = tmp_path / "store"
    with rocksdcp.Store(path) as store:
        # A StorageWriter of the same path in this process uses this store,
        # where a second read-write open would be Busy.
        save(path, "c", example(3))
        assert [c.id for c in store.list()] == ["c"]
        other = rocksdcp.Store(os.path.join(str(path), "..", "store"))
        assert other.path == store.path
        other.close()
        assert not store.closed


def test_a_read_write_open_reclaims_what_a_killed_save_left(tmp_path):
    path = tmp_path / "store"
    save(path, "kept", example(1))
    # A process whose save dies before its commit (os._exit in finish, as
    # a kill there would): its staging files stay behind.
    import subprocess
    import sys
    child = (
        "import os, sys, torch\n"
        "import rocksdcp.torch as rt\n"
        "rt.StorageWriter.finish = lambda *a, **k: os._exit(0)\n"
        "w = rt.StorageWriter(sys.argv[1], 'torn')\n"
        "rt.dcp.save_state_dict({'w': torch.ones(256, 256)}, no_dist=True,\n"
        "                       planner=rt.DefaultSavePlanner(), storage_writer=w)\n"
        "sys.exit(3)\n")
    done = subprocess.run([sys.executable, "-c", child, str(path)],
                          env=dict(os.environ), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with rocksdcp.Store(path, reclaim_torn_saves=False) as store:
        assert store.reclaimed_on_open["deleted_staging_files"] == []
        left = store.gc(dry_run=True)
        assert left["deleted_staging_files"] and left["freed_bytes"] >= 256 * 256 * 4
    with rocksdcp.Store(path, read_only=True) as store:
        assert store.reclaimed_on_open["freed_bytes"] == 0
    with rocksdcp.Store(path) as store:
        reclaimed = store.reclaimed_on_open
        assert sorted(reclaimed["deleted_staging_files"]) == sorted(left["deleted_staging_files"])
        assert reclaimed["freed_bytes"] == left["freed_bytes"]
        assert store.gc(dry_run=True) == {"dropped_column_families": [],
                                          "deleted_staging_files": [],
                                          "freed_bytes": 0}
        assert [c.id for c in store.list()] == ["kept"]
