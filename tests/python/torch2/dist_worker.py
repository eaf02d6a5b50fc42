"""One rank of test_dist.py's jobs, run by torch's own launcher (torchrun)
with gloo on 127.0.0.1:  dist_worker.py SCENARIO[,SCENARIO...] DIR.

Each scenario runs with the store DIR/<scenario>/store and asserts what
every rank sees, so that a failed assertion on any rank fails the job;
what the test checks from outside (the ids and errors the ranks saw) goes
to DIR/<scenario>/rank<r>.json. Several scenarios share one job: a job's
processes take seconds to start."""

import json
import os
import sys
import warnings

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner

import rocksdcp
import rocksdcp.torch as rt
from conftest import work_done

dcp = rt.dcp
warnings.simplefilter("ignore")


def rank_state(rank, step=0):
    """A state every rank holds in part: replicated tensors (torch's
    planner saves each once), tensors of this rank's own, nested dicts and
    values torch pickles."""
    g = torch.Generator().manual_seed(1234 + step)
    return {
        "model": {"shared.w": torch.randn(64, 32, generator=g),
                  "shared.b": torch.arange(32, dtype=torch.bfloat16) + step},
        "rank{}".format(rank): {"w": torch.full((16, 8), float(rank * 10 + step)),
                                "i": torch.arange(5, dtype=torch.int64) * (rank + 1)},
        "extra": {"step": step, "name": "run-a"},
    }


def zeros_like(state):
    if isinstance(state, dict):
        return {k: zeros_like(v) for k, v in state.items()}
    if isinstance(state, torch.Tensor):
        return torch.zeros_like(state)
    return type(state)() if not isinstance(state, str) else ""


def assert_equal(a, b, where=""):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), (where, a.keys(), b.keys())
        for k in a:
            assert_equal(a[k], b[k], where + "." + k)
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), where
    else:
        assert a == b, (where, a, b)


def report(store, name, rank, data):
    with open(os.path.join(os.path.dirname(store), "rank{}.json".format(rank)), "w") as f:
        json.dump(data, f)


def failures(e):
    """{rank: exception} of a CheckpointException."""
    return {r: (w[0] if isinstance(w, tuple) else w) for r, w in e.failures.items()}


def save_and_load(store, rank, world):
    state = rank_state(rank)
    md = dcp.save(state, storage_writer=rt.StorageWriter(store), checkpoint_id="ck")
    into = zeros_like(state)
    dcp.load(into, storage_reader=rt.StorageReader(store), checkpoint_id="ck")
    assert_equal(into, state)
    # dedup_save_to_lowest_rank: replicated tensors saved by rank 0.
    dcp.save(state, storage_writer=rt.StorageWriter(store), checkpoint_id="dedup",
             planner=DefaultSavePlanner(dedup_save_to_lowest_rank=True))
    into = zeros_like(state)
    dcp.load(into, storage_reader=rt.StorageReader(store), checkpoint_id="dedup")
    assert_equal(into, state)
    report(store, "save_and_load", rank, {"save_id": md.storage_meta.save_id})


def plan_caching(store, rank, world):
    writer = rt.StorageWriter(store)
    planner = DefaultSavePlanner(enable_plan_caching=True)
    ids = []
    for step in range(3):
        md = dcp.save(rank_state(rank, step), storage_writer=writer,
                      checkpoint_id="step-{}".format(step), planner=planner)
        ids.append(md.storage_meta.save_id)
    for step in range(3):
        into = zeros_like(rank_state(rank, step))
        dcp.load(into, storage_reader=rt.StorageReader(store), checkpoint_id="step-{}".format(step))
        assert_equal(into, rank_state(rank, step))
    report(store, "plan_caching", rank, {"save_ids": ids})


def async_thread(store, rank, world):
    state = rank_state(rank, 5)
    future = dcp.async_save(state, storage_writer=rt.StorageWriter(store), checkpoint_id="async")
    md = future.result()
    into = zeros_like(state)
    dcp.load(into, storage_reader=rt.StorageReader(store), checkpoint_id="async")
    assert_equal(into, state)
    report(store, "async_thread", rank, {"save_id": md.storage_meta.save_id})


def async_process(store, rank, world):
    from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType
    ids = []
    # Two saves through the same checkpointing process, with one writer
    # object each time pickled to it.
    writer = rt.StorageWriter(store)
    for step in range(2):
        state = rank_state(rank, step)
        future = dcp.async_save(state, storage_writer=writer, checkpoint_id="proc-{}".format(step),
                                async_checkpointer_type=AsyncCheckpointerType.PROCESS)
        md = future.result()
        ids.append(md.storage_meta.save_id)
        into = zeros_like(state)
        dcp.load(into, storage_reader=rt.StorageReader(store), checkpoint_id="proc-{}".format(step))
        assert_equal(into, state)
    report(store, "async_process", rank, {"save_ids": ids})


def errors(store, rank, world):
    state = rank_state(rank)
    dcp.save(state, storage_writer=rt.StorageWriter(store), checkpoint_id="ck")
    seen = {}
    # A missing id: every rank gets rocksdcp's NotFound.
    try:
        dcp.load(zeros_like(state), storage_reader=rt.StorageReader(store), checkpoint_id="nope")
        raise AssertionError("loaded a missing checkpoint")
    except dcp.CheckpointException as e:
        f = failures(e)
        assert set(f) == set(range(world)), f
        assert all(isinstance(x, rocksdcp.NotFound) for x in f.values()), f
        seen["missing"] = str(f[rank])
    # A taken id without overwrite: AlreadyExists, from the coordinator.
    try:
        dcp.save(state, storage_writer=rt.StorageWriter(store), checkpoint_id="ck")
        raise AssertionError("overwrote without overwrite=True")
    except dcp.CheckpointException as e:
        f = failures(e)
        assert isinstance(f[0], rocksdcp.AlreadyExists), f
        seen["exists"] = str(f[0])
    # A shape that differs: InvalidArgument before a byte is copied.
    into = zeros_like(state)
    into["model"]["shared.w"] = torch.full((32, 64), -1.0)
    try:
        dcp.load(into, storage_reader=rt.StorageReader(store), checkpoint_id="ck",
                 planner=rt.DefaultLoadPlanner())
        raise AssertionError("loaded into a tensor of another shape")
    except dcp.CheckpointException as e:
        f = failures(e)
        assert all(isinstance(x, rocksdcp.InvalidArgument) for x in f.values()), f
        assert "item 'model.shared.w': shape mismatch" in str(f[rank])
        assert bool((into["model"]["shared.w"] == -1).all())
    report(store, "errors", rank, seen)


def busy(store, rank, world):
    # Another process holds the store (the test started it): the
    # coordinator's set-up fails with Busy, and every rank learns it.
    try:
        dcp.save(rank_state(rank), storage_writer=rt.StorageWriter(store), checkpoint_id="b")
        raise AssertionError("saved into a locked store")
    except dcp.CheckpointException as e:
        f = failures(e)
        assert isinstance(f[0], rocksdcp.Busy), f
        report(store, "busy", rank, {"error": str(f[0])})


def corrupt(store, rank, world):
    # The test flipped a byte of a piece: loads fail with Corruption.
    into = zeros_like(rank_state(rank))
    try:
        dcp.load(into, storage_reader=rt.StorageReader(store), checkpoint_id="ck")
        raise AssertionError("loaded a corrupt checkpoint")
    except dcp.CheckpointException as e:
        f = failures(e)
        assert any(isinstance(x, rocksdcp.Corruption) for x in f.values()), f
        report(store, "corrupt", rank, {"errors": {str(r): str(x) for r, x in f.items()}})


def no_collectives(store, rank, world):
    # Without collectives, only one process can save: every rank is told so
    # at set-up, and nothing is written.
    try:
        dcp.save(rank_state(rank), storage_writer=rt.StorageWriter(store), checkpoint_id="nc",
                 use_collectives=False)
        raise AssertionError("saved without collectives")
    except rocksdcp.InvalidArgument as e:
        assert "use_collectives=False on rank {} of a save of more than one process".format(rank) in str(e), e
        report(store, "no_collectives", rank, {"error": str(e)})
    dist.barrier()


def no_dist(store, rank, world):
    # no_dist: each process saves on its own, as rank 0 of a world of one,
    # into a store of its own.
    own = "{}-{}".format(store, rank)
    state = rank_state(rank)
    dcp.save(state, storage_writer=rt.StorageWriter(own), checkpoint_id="nd", no_dist=True)
    into = zeros_like(state)
    dcp.load(into, storage_reader=rt.StorageReader(own), checkpoint_id="nd", no_dist=True)
    assert_equal(into, state)
    with rocksdcp.Store(own, read_only=True) as s:
        assert s.info("nd").world_size == 1
        # Every item of this rank's state, its own and the replicated ones.
        assert set(s.items("nd")) >= {"rank{}.w".format(rank), "model.shared.w"}
    dist.barrier()


def subgroups(store, rank, world):
    # Ranks 0,1 and 2,3 save through groups of their own, each into its
    # own store: the checkpoint records the group's 2 ranks.
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    group = groups[rank // 2]
    own = "{}-g{}".format(store, rank // 2)
    state = {"w": torch.full((4,), float(rank // 2)), "r{}".format(rank): torch.ones(2) * rank}
    dcp.save(state, storage_writer=rt.StorageWriter(own), checkpoint_id="g", process_group=group)
    into = {k: torch.zeros_like(v) for k, v in state.items()}
    dcp.load(into, storage_reader=rt.StorageReader(own), checkpoint_id="g", process_group=group)
    assert_equal(into, state)
    dist.barrier()
    if rank % 2 == 0:
        with rocksdcp.Store(own, read_only=True) as s:
            assert s.info("g").world_size == 2, s.info("g")
            assert set(s.items("g")) == {"w", "r{}".format(rank), "r{}".format(rank + 1)}


def reshard_load(store, rank, world):
    # The checkpoint save_and_load wrote with 2 ranks, loaded by this
    # job's ranks: the replicated part on every rank, and each of the two
    # saving ranks' own part.
    saved = os.path.join(os.path.dirname(os.path.dirname(store)), "save_and_load", "store")
    owner = rank % 2
    into = {"model": zeros_like(rank_state(owner)["model"]),
            "rank{}".format(owner): zeros_like(rank_state(owner)["rank{}".format(owner)])}
    dcp.load(into, storage_reader=rt.StorageReader(saved), checkpoint_id="ck")
    expected = rank_state(owner)
    assert_equal(into, {k: expected[k] for k in into})


def main():
    scenarios, base = sys.argv[1].split(","), sys.argv[2]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        for scenario in scenarios:
            os.makedirs(os.path.join(base, scenario), exist_ok=True)
            globals()[scenario](os.path.join(base, scenario, "store"), rank, world)
            dist.barrier()
        work_done(rank)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
