"""torch 2.x's storage API, which no torch here has: rocksdcp.torch's methods
for it are driven in the call order of torch.distributed.checkpoint's
storage.py (the seed this project implements), against stand-in base
classes that declare that module's abstract methods. Nothing here ran on a
real torch 2.x."""

import abc
import dataclasses
from typing import Any, Dict, List, Optional

import pytest
import torch

import rocksdcp
import rocksdcp.torch as rt
from rocksdcp.torch import _compat
from rocksdcp.torch._storage import _ReaderMethods, _WriterMethods


class StandInStorageWriter(abc.ABC):
    """torch 2.x's StorageWriter: its abstract methods, as the seed has them."""

    @abc.abstractmethod
    def reset(self, checkpoint_id=None): ...

    @abc.abstractmethod
    def set_up_storage_writer(self, is_coordinator, *args, **kwargs): ...

    @abc.abstractmethod
    def prepare_local_plan(self, plan): ...

    @abc.abstractmethod
    def prepare_global_plan(self, plans): ...

    @abc.abstractmethod
    def write_data(self, plan, planner): ...

    @abc.abstractmethod
    def finish(self, metadata, results): ...

    @classmethod
    @abc.abstractmethod
    def validate_checkpoint_id(cls, checkpoint_id): ...

    def storage_meta(self):
        return None


class StandInStorageReader(abc.ABC):
    """torch 2.x's StorageReader, as the seed has it."""

    @abc.abstractmethod
    def reset(self, checkpoint_id=None): ...

    @abc.abstractmethod
    def read_metadata(self, *args, **kwargs): ...

    @abc.abstractmethod
    def set_up_storage_reader(self, metadata, is_coordinator, *args, **kwargs): ...

    @abc.abstractmethod
    def prepare_local_plan(self, plan): ...

    @abc.abstractmethod
    def prepare_global_plan(self, plans): ...

    @abc.abstractmethod
    def read_data(self, plan, planner): ...

    @classmethod
    @abc.abstractmethod
    def validate_checkpoint_id(cls, checkpoint_id): ...


class Writer2(_WriterMethods, StandInStorageWriter):
    pass


class Reader2(_ReaderMethods, StandInStorageReader):
    pass


@dataclasses.dataclass
class StandInStorageMeta:
    checkpoint_id: Optional[str] = None
    save_id: Optional[str] = None
    load_id: Optional[str] = None
    modules: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class StandInMetadata:
    state_dict_metadata: Dict[str, Any]
    planner_data: Any = None
    storage_data: Any = None
    storage_meta: Optional[StandInStorageMeta] = None
    version: Optional[str] = None


@pytest.fixture
def torch2_metadata(monkeypatch):
    """torch 2.x's Metadata and StorageMeta, which carry a checkpoint's ids."""
    monkeypatch.setattr(_compat, "StorageMeta", StandInStorageMeta)
    monkeypatch.setattr(_compat, "Metadata", StandInMetadata)


def test_classes_implement_every_abstract_method_of_torch_2():
    assert not Writer2.__abstractmethods__ and not Reader2.__abstractmethods__
    assert Writer2.validate_checkpoint_id("step-7")
    assert not Writer2.validate_checkpoint_id("default")
    assert not Reader2.validate_checkpoint_id("")


def test_save_then_load_in_torch_2_call_order(tmp_path, torch2_metadata):
    path = tmp_path / "store"
    state = {"w": torch.arange(12.0).reshape(3, 4), "blob": b"bytes"}

    # dcp.save(state, storage_writer=w, checkpoint_id="step-7"):
    w = Writer2(path)
    w.reset("step-7")                           # 0) the checkpoint id
    w.set_up_storage_writer(True, rank=0)       # 1)
    meta = w.storage_meta()
    assert meta.checkpoint_id == "step-7" and len(meta.save_id) == 32
    planner = rt.DefaultSavePlanner()
    planner.init(state, True)
    local = w.prepare_local_plan(planner.create_local_plan())          # 2)
    plans, metadata = planner.create_global_plan([local])
    plans = w.prepare_global_plan(plans)                               # 3)
    assert isinstance(plans[0].storage_data, bytes) and plans[0].storage_data
    results = w.write_data(planner.finish_plan(plans[0]), planner).wait()  # 4)
    assert {r.index.fqn for r in results} == {"w", "blob"}
    w.finish(metadata, [results])                                      # 5)
    # The save id the checkpoint records, as torch's own test compares it.
    assert w.storage_meta().save_id == meta.save_id

    # dcp.load(into, storage_reader=r, checkpoint_id="step-7"):
    into = {"w": torch.zeros(3, 4), "blob": b""}
    r = Reader2(path)
    r.reset("step-7")                           # 0)
    md = r.read_metadata()                      # 1)
    assert isinstance(md, StandInMetadata)
    assert md.storage_meta.checkpoint_id == "step-7"
    assert md.storage_meta.save_id == meta.save_id == w.storage_meta().save_id
    assert md.version == "1.0.0"
    r.set_up_storage_reader(md, True, rank=0)   # 2)
    planner = rt.DefaultLoadPlanner()
    planner.init(into, md, True)
    local = r.prepare_local_plan(planner.create_local_plan())          # 3)
    plans = r.prepare_global_plan(planner.create_global_plan([local]))  # 4)
    r.read_data(planner.finish_plan(plans[0]), planner).wait()          # 5)
    assert torch.equal(into["w"], state["w"]) and into["blob"] == b"bytes"


def test_reset_without_an_id_keeps_the_constructors(tmp_path):
    w = Writer2(tmp_path / "store", "from-constructor")
    w.reset(None)
    w.set_up_storage_writer(True)
    assert w._native.storage_meta().checkpoint_id == "from-constructor"
    r = Reader2(tmp_path / "store")
    r.reset(None)
    with pytest.raises(rocksdcp.InvalidArgument, match="no checkpoint_id"):
        r.read_metadata()
