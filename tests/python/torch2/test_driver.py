"""torch 2.x's own driver (torch.distributed.checkpoint's save, load and
async_save, in one process) runs rocksdcp.torch's StorageWriter and
StorageReader: the checkpoint id passed to torch, torch's default planners
and rocksdcp's, nested state dicts, storage_meta, plan caching, lazy
resolution, devices and dtypes, planner_data, and every error with
rocksdcp's own exception."""

import dataclasses
import enum
import io
import pickle
import warnings
import weakref

import pytest
import torch
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner as TorchSavePlanner

import rocksdcp
import rocksdcp.torch as rt
from conftest import dcp, failure

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def save(path, cid, state, **kwargs):
    writer = kwargs.pop("writer", None) or rt.StorageWriter(path)
    return dcp.save(state, storage_writer=writer, checkpoint_id=cid, **kwargs)


def load(path, cid, state, **kwargs):
    reader = kwargs.pop("reader", None) or rt.StorageReader(path)
    dcp.load(state, storage_reader=reader, checkpoint_id=cid, **kwargs)


def model_state():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 4)).to(torch.bfloat16)
    return model.state_dict()


# ---- The checkpoint id, torch's planners and rocksdcp's ----

def test_dcp_save_and_load_name_the_checkpoint_inside_the_store(tmp_path):
    path = tmp_path / "store"
    state = model_state()
    save(path, "step-1", state)
    save(path, "step-2", {k: v * 2 for k, v in state.items()})
    assert [c.id for c in rocksdcp.Store(path, read_only=True).list()] == ["step-1", "step-2"]
    into = {k: torch.zeros_like(v) for k, v in state.items()}
    load(path, "step-1", into)
    assert all(torch.equal(into[k], v) for k, v in state.items())


def test_torch_default_planners_store_the_pickles_torch_makes_as_bytes(tmp_path):
    # torch's DefaultSavePlanner pickles (torch.save) what is not a tensor;
    # rocksdcp stores those bytes as a byte item, and torch's
    # DefaultLoadPlanner unpickles them into the nested state dict.
    path = tmp_path / "store"
    state = {"model": {"w": torch.arange(6.0)}, "extra": {"epoch": 3, "tags": ["a", "b"]}}
    save(path, "c", state)
    raw = rocksdcp.Store(path, read_only=True).load_bytes("c", "extra.epoch")["extra.epoch"]
    assert torch.load(io.BytesIO(raw), weights_only=True) == 3
    into = {"model": {"w": torch.zeros(6)}, "extra": {"epoch": 0, "tags": []}}
    load(path, "c", into)
    assert into["extra"] == {"epoch": 3, "tags": ["a", "b"]}
    assert torch.equal(into["model"]["w"], torch.arange(6.0))


def test_rocksdcp_load_planner_writes_byte_items_into_the_nested_state_dict(tmp_path):
    # torch flattens {"extra": {"blob": ...}} to "extra.blob"; the value
    # must reach the caller's nested dict, not only the flattened copy.
    path = tmp_path / "store"
    state = {"model": {"w": torch.ones(3)}, "extra": {"blob": b"\x00raw", "rng": b"state"}}
    save(path, "c", state, planner=rt.DefaultSavePlanner())
    into = {"model": {"w": torch.zeros(3)}, "extra": {"blob": b"", "rng": b""}}
    load(path, "c", into, planner=rt.DefaultLoadPlanner())
    assert into["extra"] == {"blob": b"\x00raw", "rng": b"state"}
    assert torch.equal(into["model"]["w"], torch.ones(3))


def test_rocksdcp_planners_save_values_as_data_a_cpp_reader_can_read(tmp_path):
    path = tmp_path / "store"
    state = {"optim": {"lr": 1e-3, "betas": (0.9, 0.999), "step": 10, "amsgrad": False,
                       "foreach": None, "name": "adamw", "params": ["a.w", "a.b"]}}
    save(path, "c", state, planner=rt.DefaultSavePlanner())
    items = rocksdcp.Store(path, read_only=True).items("c")
    assert items["optim.lr"] == ("tensor", "float64", ())
    assert items["optim.betas"] == ("tensor", "float64", (2,))
    assert items["optim.amsgrad"] == ("tensor", "bool", ())
    assert items["optim.foreach"] == ("bytes",)
    into = {"optim": {"lr": 0.0, "betas": (0.0, 0.0), "step": 0, "amsgrad": True,
                      "foreach": True, "name": "", "params": []}}
    load(path, "c", into, planner=rt.DefaultLoadPlanner())
    assert into == state
    assert type(into["optim"]["betas"]) is tuple and type(into["optim"]["step"]) is int


def test_a_number_loads_as_saved_whatever_number_the_state_dict_held(tmp_path):
    # torch's Adam defaults weight_decay to the int 0: a float saved for it
    # must not come back truncated.
    path = tmp_path / "store"
    save(path, "c", {"wd": 0.02, "n": 3, "flag": True}, planner=rt.DefaultSavePlanner())
    into = {"wd": 0, "n": 0.0, "flag": 0}
    load(path, "c", into, planner=rt.DefaultLoadPlanner())
    assert into == {"wd": 0.02, "n": 3, "flag": True}
    assert type(into["wd"]) is float and type(into["n"]) is int and type(into["flag"]) is bool


def test_a_checkpoint_with_pickles_loads_with_rocksdcp_planner_as_bytes(tmp_path):
    # rocksdcp's load planner never unpickles: a pickle torch's planner
    # wrote comes back as its bytes.
    path = tmp_path / "store"
    save(path, "c", {"w": torch.ones(2), "extra": b"x", "epoch": 5})
    into = {"w": torch.zeros(2), "extra": b"", "epoch": b""}
    load(path, "c", into, planner=rt.DefaultLoadPlanner())
    assert torch.load(io.BytesIO(into["epoch"]), weights_only=True) == 5


# ---- storage_meta and the Metadata torch returns ----

def test_storage_meta_is_known_before_set_up_and_recorded_by_the_save(tmp_path):
    writer = rt.StorageWriter(tmp_path / "store")
    writer.reset("step-7")
    before = writer.storage_meta()
    assert before.checkpoint_id == "step-7" and len(before.save_id) == 32

    seen = {}

    class Planner(TorchSavePlanner):
        def set_up_planner(self, state_dict, storage_meta=None, is_coordinator=False):
            seen["meta"] = storage_meta
            super().set_up_planner(state_dict, storage_meta, is_coordinator)

    md = dcp.save({"w": torch.ones(2)}, storage_writer=writer, checkpoint_id="step-7",
                  planner=Planner())
    # torch's reset(checkpoint_id) began a new save: its id is the one the
    # planner saw, and the one the checkpoint records.
    planned = seen["meta"]
    assert planned.checkpoint_id == "step-7" and len(planned.save_id) == 32
    assert md.storage_meta.checkpoint_id == "step-7"
    assert md.storage_meta.save_id == planned.save_id == writer.storage_meta().save_id
    assert md.version == "1.0.0"
    read = rt.StorageReader(tmp_path / "store", "step-7").read_metadata()
    assert read.storage_meta.save_id == planned.save_id
    assert read.version == md.version


def test_each_save_has_its_own_save_id(tmp_path):
    writer = rt.StorageWriter(tmp_path / "store")
    ids = [save(None, "s{}".format(i), {"w": torch.ones(1)}, writer=writer).storage_meta.save_id
           for i in range(3)]
    assert len(set(ids)) == 3


# ---- Plan caching ----

def test_plan_caching_across_three_saves_records_each_save(tmp_path):
    # torch hands the storage the plan of the first save for the next two
    # (and the first save's Metadata object, which each save fills in).
    path = tmp_path / "store"
    writer = rt.StorageWriter(path)
    planner = TorchSavePlanner(enable_plan_caching=True)
    save_ids = []
    for step in range(3):
        state = {"w": torch.full((64,), float(step)), "b": torch.arange(4) + step}
        md = save(path, "step-{}".format(step), state, writer=writer, planner=planner)
        assert md.storage_meta.save_id == writer.storage_meta().save_id
        save_ids.append(md.storage_meta.save_id)
    assert len(set(save_ids)) == 3
    for step in range(3):
        md = rt.StorageReader(path, "step-{}".format(step)).read_metadata()
        assert md.storage_meta.save_id == save_ids[step]
        into = {"w": torch.zeros(64), "b": torch.zeros(4, dtype=torch.int64)}
        load(path, "step-{}".format(step), into)
        assert torch.equal(into["w"], torch.full((64,), float(step)))
        assert torch.equal(into["b"], torch.arange(4) + step)


def test_plan_caching_with_incremental_saves(tmp_path):
    path = tmp_path / "store"
    planner = TorchSavePlanner(enable_plan_caching=True)
    w = torch.randn(256, 256)
    for step in range(3):
        w[step] += 1  # One row changes each step.
        save(path, "step-{}".format(step), {"w": w},
             writer=rt.StorageWriter(path, base_on_newest=True), planner=planner)
        into = {"w": torch.zeros(256, 256)}
        load(path, "step-{}".format(step), into)
        assert torch.equal(into["w"], w)
    info = rocksdcp.Store(path, read_only=True).info("step-2")
    assert 0 < info.referenced_bytes < info.bytes


# ---- Resolution, devices, dtypes ----

class CountingPlanner(TorchSavePlanner):
    """Resolves each tensor to a fresh copy, as a planner that stages
    items may, and counts how many of those are alive at once."""

    def __init__(self):
        super().__init__()
        self.alive = 0
        self.most_alive = 0
        self.resolved = 0

    def _gone(self):
        self.alive -= 1

    def resolve_data(self, write_item):
        data = super().resolve_data(write_item)
        if isinstance(data, torch.Tensor):
            data = data.clone()
            self.alive += 1
            self.resolved += 1
            self.most_alive = max(self.most_alive, self.alive)
            weakref.finalize(data, self._gone)
        return data


def test_items_are_resolved_only_when_written_and_let_go_after(tmp_path):
    state = {"t{}".format(i): torch.full((256, 1024), float(i)) for i in range(48)}
    planner = CountingPlanner()
    save(tmp_path / "store", "c", state, planner=planner)
    assert planner.resolved == 48
    # The writer's threads hold at most one item each (and the cores are
    # few): never every item at once, as resolving up front would.
    assert planner.most_alive <= 8
    assert planner.alive == 0
    into = {k: torch.zeros_like(v) for k, v in state.items()}
    load(tmp_path / "store", "c", into)
    assert all(torch.equal(into[k], v) for k, v in state.items())


def test_an_exception_of_the_planner_reaches_the_caller_as_it_was_raised(tmp_path):
    class Failing(TorchSavePlanner):
        def resolve_data(self, write_item):
            raise KeyError("planner lost {}".format(write_item.index.fqn))

    with pytest.raises(dcp.CheckpointException) as e:
        save(tmp_path / "store", "c", {"w": torch.ones(2)}, planner=Failing())
    err = failure(e)
    assert isinstance(err, KeyError) and "planner lost w" in str(err)
    assert "c" not in rocksdcp.Store(tmp_path / "store", read_only=True)


def test_loads_convert_dtypes_as_torch_file_system_reader_does(tmp_path):
    path = tmp_path / "store"
    w = torch.randn(300, 70)
    state = {"w": w, "h": w.to(torch.bfloat16), "i": torch.arange(100, dtype=torch.int16)}
    save(path, "c", state)
    into = {"w": torch.zeros(300, 70, dtype=torch.float16),
            "h": torch.zeros(300, 70, dtype=torch.float32),
            "i": torch.zeros(100, dtype=torch.float64)}
    # Through a buffer smaller than the tensors: each is read alone.
    load(path, "c", into, reader=rt.StorageReader(path, convert_buffer_bytes=4096))
    assert torch.equal(into["w"], w.to(torch.float16))
    assert torch.equal(into["h"], w.to(torch.bfloat16).float())
    assert torch.equal(into["i"], torch.arange(100.0, dtype=torch.float64))
    # And what the torch reader gives for the same.
    ref = {"w": torch.zeros(300, 70, dtype=torch.float16)}
    fs = tmp_path / "fs"
    dcp.save(state, storage_writer=dcp.FileSystemWriter(fs))
    dcp.load(ref, storage_reader=dcp.FileSystemReader(fs))
    assert torch.equal(ref["w"], into["w"])


def test_a_shape_mismatch_fails_before_a_byte_is_copied(tmp_path):
    path = tmp_path / "store"
    save(path, "c", {"w": torch.ones(4, 8), "v": torch.ones(3)})
    into = {"w": torch.full((8, 4), -1.0), "v": torch.full((2,), -1.0)}
    with pytest.raises(dcp.CheckpointException) as e:
        load(path, "c", into, planner=rt.DefaultLoadPlanner())
    err = failure(e)
    assert isinstance(err, rocksdcp.InvalidArgument)
    assert "item 'w': shape mismatch" in str(err) and "item 'v': shape mismatch" in str(err)
    assert bool((into["w"] == -1).all()) and bool((into["v"] == -1).all())


# ---- planner_data ----

class Color(enum.Enum):
    RED = 1


@dataclasses.dataclass(frozen=True)
class Mapping:
    path: tuple
    color: Color
    extra: dict


def test_planner_data_of_dataclasses_and_tuples_round_trips_without_pickle(tmp_path):
    path = tmp_path / "store"
    data = {"a": Mapping(("model", 0, "w"), Color.RED, {1: float("nan"), "k": b"\x00"}),
            "size": torch.Size([2, 3]), "dtype": torch.bfloat16, "set": {1, 2}}

    class Planner(TorchSavePlanner):
        def create_global_plan(self, all_plans):
            plans, md = super().create_global_plan(all_plans)
            return plans, dataclasses.replace(md, planner_data=data)

    save(path, "c", {"w": torch.ones(2)}, planner=Planner())
    # A class this process did not register comes back as a record of it.
    got = rt.StorageReader(path, "c").read_metadata().planner_data
    assert isinstance(got["a"], rt.PlainRecord) and got["a"].path == ("model", 0, "w")
    assert got["size"] == torch.Size([2, 3]) and got["dtype"] is torch.bfloat16
    assert got["set"] == {1, 2}
    rt.register_plain_type(Mapping)
    rt.register_plain_type(Color)
    got = rt.StorageReader(path, "c").read_metadata().planner_data
    assert got["a"].path == data["a"].path and got["a"].color is Color.RED
    assert got["a"].extra["k"] == b"\x00" and got["a"].extra[1] != got["a"].extra[1]  # NaN
    assert isinstance(got["a"], Mapping)


def test_torch_flattening_mappings_come_back_as_tuples(tmp_path):
    path = tmp_path / "store"
    md = save(path, "c", {"model": {"layer": [torch.ones(1), torch.zeros(1)]}})
    read = rt.StorageReader(path, "c").read_metadata()
    assert read.planner_data == md.planner_data
    assert read.planner_data["model.layer.0"] == ("model", "layer", 0)


def test_planner_data_that_is_not_data_is_refused(tmp_path):
    class Planner(TorchSavePlanner):
        def create_global_plan(self, all_plans):
            plans, md = super().create_global_plan(all_plans)
            return plans, dataclasses.replace(md, planner_data={"f": lambda: 0})

    with pytest.raises(dcp.CheckpointException) as e:
        save(tmp_path / "store", "c", {"w": torch.ones(2)}, planner=Planner())
    assert isinstance(failure(e), rocksdcp.InvalidArgument)
    assert "planner_data['f']: a builtins.function is not plain data" in str(failure(e))


# ---- Errors reach the caller as rocksdcp's ----

def test_a_missing_checkpoint_raises_not_found_not_metadata_is_none(tmp_path):
    path = tmp_path / "store"
    save(path, "c", {"w": torch.ones(2)})
    with pytest.raises(dcp.CheckpointException) as e:
        load(path, "other", {"w": torch.zeros(2)})
    err = failure(e)
    assert isinstance(err, rocksdcp.NotFound)
    assert "checkpoint 'other' not found in store" in str(err)
    assert "metadata is None" not in str(e.value)
    # A direct call raises at once.
    with pytest.raises(rocksdcp.NotFound):
        rt.StorageReader(path, "other").read_metadata()


def test_a_deleted_checkpoint_raises_not_found(tmp_path):
    path = tmp_path / "store"
    save(path, "c", {"w": torch.ones(2)})
    with rocksdcp.Store(path) as store:
        store.delete("c")
    with pytest.raises(dcp.CheckpointException) as e:
        load(path, "c", {"w": torch.zeros(2)})
    assert isinstance(failure(e), rocksdcp.NotFound)


def test_a_locked_store_fails_the_save_with_busy(tmp_path, lock_holder):
    path = tmp_path / "store"
    save(path, "c", {"w": torch.ones(2)})
    lock_holder(path)
    with pytest.raises(dcp.CheckpointException) as e:
        save(path, "d", {"w": torch.ones(2)})
    assert isinstance(failure(e), rocksdcp.Busy)
    assert "is locked by another process" in str(failure(e))


def test_the_store_is_unlocked_once_the_save_commits(tmp_path, lock_holder):
    path = tmp_path / "store"
    writer = rt.StorageWriter(path)
    save(path, "c", {"w": torch.ones(2)}, writer=writer)
    lock_holder(path)  # Another process takes the lock: nobody holds it.


# ---- use_collectives, no_dist, async ----

def test_use_collectives_false_in_one_process(tmp_path):
    path = tmp_path / "store"
    md = dcp.save({"w": torch.ones(3)}, storage_writer=rt.StorageWriter(path),
                  checkpoint_id="c", use_collectives=False)
    assert md.storage_meta.checkpoint_id == "c"
    into = {"w": torch.zeros(3)}
    load(path, "c", into)
    assert torch.equal(into["w"], torch.ones(3))


def test_no_dist(tmp_path):
    path = tmp_path / "store"
    dcp.save({"w": torch.ones(3)}, storage_writer=rt.StorageWriter(path),
             checkpoint_id="c", no_dist=True)
    into = {"w": torch.zeros(3)}
    dcp.load(into, storage_reader=rt.StorageReader(path), checkpoint_id="c", no_dist=True)
    assert torch.equal(into["w"], torch.ones(3))
    assert rocksdcp.Store(path, read_only=True).info("c").world_size == 1


def test_async_save_with_the_thread_executor(tmp_path):
    path = tmp_path / "store"
    state = model_state()
    future = dcp.async_save(state, storage_writer=rt.StorageWriter(path), checkpoint_id="c")
    md = future.result()
    assert md.storage_meta.checkpoint_id == "c"
    into = {k: torch.zeros_like(v) for k, v in state.items()}
    load(path, "c", into)
    assert all(torch.equal(into[k], v) for k, v in state.items())


def test_async_save_stages_into_a_copy_the_writer_reuses(tmp_path):
    path = tmp_path / "store"
    writer = rt.StorageWriter(path)
    w = torch.randn(256, 64)
    state = {"w": w, "nested": {"b": torch.arange(7.0)}, "step": 1}
    reused = []
    for step in range(3):
        w.fill_(float(step))
        state["step"] = step
        future = dcp.async_save(state, storage_writer=writer, checkpoint_id="s{}".format(step))
        reused.append(writer._stager.reused)
        # Training goes on at once: the save writes what was staged.
        w.fill_(-1.0)
        future.result()
    # The first stage makes the copy; the next ones copy into it.
    assert reused == [False, True, True]
    for step in range(3):
        into = {"w": torch.zeros(256, 64), "nested": {"b": torch.zeros(7)}, "step": 0}
        load(path, "s{}".format(step), into)
        assert bool((into["w"] == step).all()) and into["step"] == step
        assert torch.equal(into["nested"]["b"], torch.arange(7.0))


def test_a_second_async_save_in_flight_gets_a_copy_of_its_own(tmp_path):
    path = tmp_path / "store"
    writer = rt.StorageWriter(path)
    w = torch.zeros(64, 64)
    first = dcp.async_save({"w": w}, storage_writer=writer, checkpoint_id="a")
    w.fill_(1.0)
    # Whether or not the first save is done, the second never writes into
    # the copy the first may still be saving from.
    second = dcp.async_save({"w": w}, storage_writer=rt.StorageWriter(path), checkpoint_id="b")
    first.result()
    second.result()
    third = dcp.async_save({"w": w * 3}, storage_writer=writer, checkpoint_id="c")
    assert writer._stager.reused  # The first save is done: its copy is free.
    third.result()
    for cid, value in (("a", 0.0), ("b", 1.0), ("c", 3.0)):
        into = {"w": torch.full((64, 64), -1.0)}
        load(path, cid, into)
        assert bool((into["w"] == value).all()), cid
    writer.close()
    assert writer._stager._copy is None


def test_the_staging_copy_is_not_kept_when_asked(tmp_path):
    writer = rt.StorageWriter(tmp_path / "store", cache_staged_state_dict=False)
    for step in range(2):
        dcp.async_save({"w": torch.ones(8)}, storage_writer=writer,
                       checkpoint_id="s{}".format(step)).result()
        assert not writer._stager.reused and writer._stager._copy is None


def test_direct_writes_and_write_threads_save_the_same(tmp_path):
    state = {"t{}".format(i): torch.randn(300, 200) for i in range(6)}
    path = tmp_path / "store"
    save(path, "direct", state, writer=rt.StorageWriter(path, use_direct_writes=True,
                                                        write_threads=2,
                                                        memory_budget=64 << 20))
    into = {k: torch.zeros_like(v) for k, v in state.items()}
    load(path, "direct", into)
    assert all(torch.equal(into[k], v) for k, v in state.items())


def test_a_writer_pickles_without_its_store(tmp_path):
    path = tmp_path / "store"
    writer = rt.StorageWriter(path, compress=True)
    save(path, "c", {"w": torch.ones(2)}, writer=writer)
    dcp.async_save({"w": torch.ones(2)}, storage_writer=writer, checkpoint_id="s").result()
    assert writer._stager._copy is not None
    copy = pickle.loads(pickle.dumps(writer))
    assert copy._stager is None and copy._native is None
    save(path, "d", {"w": torch.full((2,), 2.0)}, writer=copy)
    into = {"w": torch.zeros(2)}
    load(path, "d", into)
    assert torch.equal(into["w"], torch.full((2,), 2.0))


def test_validate_checkpoint_id():
    assert rt.StorageWriter.validate_checkpoint_id("step-7")
    assert not rt.StorageWriter.validate_checkpoint_id("default")
    assert not rt.StorageReader.validate_checkpoint_id("")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert rt.StorageWriter("/nonexistent").checkpoint_id is None


def test_a_failed_save_lets_go_of_the_id_and_the_store(tmp_path, lock_holder):
    path = tmp_path / "store"
    save(path, "c", {"w": torch.ones(2)})
    # The exceptions are kept, as a caller that logs them keeps them.
    with pytest.raises(dcp.CheckpointException) as exists:
        save(path, "c", {"w": torch.ones(2)})
    assert isinstance(failure(exists), rocksdcp.AlreadyExists)

    class Failing(TorchSavePlanner):
        def resolve_data(self, write_item):
            raise RuntimeError("staging failed")

    writer = rt.StorageWriter(path, overwrite=True)
    with pytest.raises(dcp.CheckpointException) as failed:
        save(path, "c", {"w": torch.ones(2)}, writer=writer, planner=Failing())
    assert "staging failed" in str(failure(failed))
    # Neither the failed set-up nor the failed write holds the id or the
    # store: another writer overwrites the id, another process locks.
    save(path, "c", {"w": torch.zeros(2)}, writer=rt.StorageWriter(path, overwrite=True))
    into = {"w": torch.ones(2)}
    load(path, "c", into)
    assert torch.equal(into["w"], torch.zeros(2))
    lock_holder(path)
    assert writer is not None and exists.value is not None
