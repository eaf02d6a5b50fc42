"""Ranks as processes under torch 2.x's own launcher: torchrun starts 2 or
4 processes (gloo, rendezvous on 127.0.0.1), and torch's save, load and
async_save (thread and process executors) drive rocksdcp.torch in each
(tests/python/torch2/dist_worker.py). The coordinator's process opens the
store read-write, the others write as followers; every rocksdcp error
reaches every rank as rocksdcp's own exception."""

import json
import os

import pytest

import rocksdcp
from conftest import LockHolder, torchrun
from dist_worker import rank_state


def reports(base, scenario):
    d = os.path.join(base, scenario)
    out = {}
    for name in sorted(os.listdir(d)):
        if name.startswith("rank") and name.endswith(".json"):
            with open(os.path.join(d, name)) as f:
                out[int(name[4:-5])] = json.load(f)
    return out


def store(base, scenario):
    return rocksdcp.Store(os.path.join(base, scenario, "store"), read_only=True)


def test_two_ranks(tmp_path):
    torchrun("dist_worker.py", 2,
             "save_and_load,plan_caching,async_thread,errors,no_collectives,no_dist",
             tmp_path)
    with store(tmp_path, "save_and_load") as s:
        info = s.info("ck")
        assert info.world_size == 2 and s.verify()["ok"]
        assert set(s.items("ck")) == {"model.shared.w", "model.shared.b", "rank0.w", "rank0.i",
                                      "rank1.w", "rank1.i", "extra.step", "extra.name"}
        # Replicated tensors are saved once, by default or by the lowest rank.
        assert s.info("dedup").bytes == info.bytes
    # Every rank reports the save id the coordinator's checkpoint records.
    r = reports(tmp_path, "save_and_load")
    assert r[0]["save_id"] == r[1]["save_id"]
    # Plan caching: three saves, three save ids, the same on every rank.
    r = reports(tmp_path, "plan_caching")
    assert len(set(r[0]["save_ids"])) == 3 and r[0]["save_ids"] == r[1]["save_ids"]
    with store(tmp_path, "plan_caching") as s:
        for step in range(3):
            md = s._native.metadata("step-{}".format(step))
            assert md.storage_meta.save_id == r[0]["save_ids"][step]
    r = reports(tmp_path, "errors")
    assert "checkpoint 'nope' not found in store" in r[1]["missing"]
    assert "already exists" in r[0]["exists"]
    assert "use_collectives=False on rank 1" in reports(tmp_path, "no_collectives")[1]["error"]
    assert not os.path.exists(os.path.join(tmp_path, "no_collectives", "store", "CURRENT")) or \
        "nc" not in store(tmp_path, "no_collectives")


def test_four_ranks_load_what_two_saved_and_save_in_subgroups(tmp_path):
    torchrun("dist_worker.py", 2, "save_and_load", tmp_path)
    torchrun("dist_worker.py", 4, "reshard_load,errors,subgroups", tmp_path)
    assert set(reports(tmp_path, "errors")) == {0, 1, 2, 3}
    with store(tmp_path, "errors") as s:
        assert s.info("ck").world_size == 4


def test_async_save_with_the_process_executor(tmp_path):
    torchrun("dist_worker.py", 2, "async_process", tmp_path, timeout=600)
    r = reports(tmp_path, "async_process")
    assert r[0]["save_ids"] == r[1]["save_ids"] and len(set(r[0]["save_ids"])) == 2
    with store(tmp_path, "async_process") as s:
        assert [c.id for c in s.list()] == ["proc-0", "proc-1"]


def test_a_locked_store_fails_every_rank_with_busy(tmp_path):
    path = tmp_path / "busy" / "store"
    path.parent.mkdir()
    holder = LockHolder(path)
    try:
        torchrun("dist_worker.py", 2, "busy", tmp_path)
    finally:
        holder.close()
    r = reports(tmp_path, "busy")
    assert set(r) == {0, 1}
    assert all("is locked by another process" in x["error"] for x in r.values())


def test_a_corrupt_piece_fails_the_load_on_every_rank(tmp_path):
    torchrun("dist_worker.py", 2, "save_and_load", tmp_path)
    # The corrupt scenario reads the store save_and_load wrote.
    os.makedirs(tmp_path / "corrupt")
    os.rename(tmp_path / "save_and_load" / "store", tmp_path / "corrupt" / "store")
    # One byte of a replicated tensor's data, found by its bytes, as a bad
    # disk would flip it.
    path = str(tmp_path / "corrupt" / "store")
    data = rank_state(0)["model"]["shared.w"].numpy().tobytes()[256:320]
    flipped = 0
    for name in os.listdir(path):
        if name.endswith(".sst"):
            with open(os.path.join(path, name), "r+b") as f:
                content = f.read()
                at = content.find(data)
                while at >= 0:
                    f.seek(at + 7)
                    f.write(bytes([content[at + 7] ^ 0x5A]))
                    flipped += 1
                    at = content.find(data, at + 1)
    assert flipped >= 1
    torchrun("dist_worker.py", 2, "corrupt", tmp_path)
    r = reports(tmp_path, "corrupt")
    assert set(r) == {0, 1}
    assert any("load of checkpoint 'ck'" in e for x in r.values() for e in x["errors"].values())
