"""docs/errors.md's rows named python-...: the errors rocksdcp.torch
itself raises (the C++ library's reach Python with their own rows' texts).
Each is made to happen here and checked against its row, code and message,
so that the two cannot drift apart. ROCKSDCP_PRINT_ERRORS=1 prints the rows
as the code produces them."""

import dataclasses
import os
import re

import pytest
import torch
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner as TorchSavePlanner

import rocksdcp
import rocksdcp.torch as rt
from conftest import dcp

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

DOC = os.path.join(os.environ.get("ROCKSDCP_SOURCE_DIR", os.path.join(
    os.path.dirname(__file__), "..", "..", "..")), "docs", "errors.md")
ROW = re.compile(r"^\| `(python-[a-z0-9-]+)` \|[^|]*\| (\w+) \| `(.*)` \|$")


def first_failure(e):
    """What torch's CheckpointException ``e`` wraps, of rank 0."""
    wrapped = e.failures[0]
    return wrapped[0] if isinstance(wrapped, tuple) else wrapped


def documented():
    with open(DOC) as f:
        return {m.group(1): (m.group(2), m.group(3)) for m in map(ROW.match, f) if m}


def produced(tmp_path, error):
    """(code, message) of ``error``, the store's path as <store>."""
    message = str(error).replace(str(tmp_path / "store"), "<store>")
    return type(error).__name__, message


def saved(tmp_path, state=None):
    path = tmp_path / "store"
    dcp.save(state or {"w": torch.ones(4, 8)}, storage_writer=rt.StorageWriter(path),
             checkpoint_id="c")
    return path


def use_collectives_false(tmp_path):
    writer = rt.StorageWriter(tmp_path / "store", "c")
    writer.set_up_storage_writer(False, rank=1, use_collectives=False)


def rank_conflict(tmp_path):
    rt.StorageWriter(tmp_path / "store", "c", rank=1).set_up_storage_writer(True, rank=0)


def plan_of_another_writer(tmp_path):
    writer = rt.StorageWriter(tmp_path / "store", "c")
    writer.set_up_storage_writer(True, rank=0)
    writer.write_data(rt.dcp.planner.SavePlan([]), TorchSavePlanner())


def planner_data_not_plain(tmp_path):
    class Planner(TorchSavePlanner):
        def create_global_plan(self, all_plans):
            plans, md = super().create_global_plan(all_plans)
            return plans, dataclasses.replace(md, planner_data={"f": print})

    saved_with(tmp_path, {"w": torch.ones(1)}, Planner())


def value_not_plain(tmp_path):
    saved_with(tmp_path, {"obj": object()}, rt.DefaultSavePlanner())


def saved_with(tmp_path, state, planner):
    try:
        dcp.save(state, storage_writer=rt.StorageWriter(tmp_path / "store"), checkpoint_id="c",
                 planner=planner)
    except dcp.CheckpointException as e:
        raise first_failure(e) from None


def loaded_with(tmp_path, into):
    try:
        dcp.load(into, storage_reader=rt.StorageReader(tmp_path / "store"), checkpoint_id="c",
                 planner=rt.DefaultLoadPlanner())
    except dcp.CheckpointException as e:
        raise first_failure(e) from None


def shape_mismatch(tmp_path):
    saved(tmp_path, {"w": torch.ones(4, 8), "b": torch.ones(3)})
    loaded_with(tmp_path, {"w": torch.zeros(8, 4), "b": torch.zeros(2)})


def kind_mismatch(tmp_path):
    saved(tmp_path, {"w": torch.ones(4, 8), "blob": b"x"})
    loaded_with(tmp_path, {"w": b"", "blob": torch.zeros(1)})


def value_from_tensor(tmp_path):
    saved(tmp_path, {"lr": torch.ones(3)})
    loaded_with(tmp_path, {"lr": 0.5})


def no_checkpoint_id(tmp_path):
    rt.StorageReader(saved(tmp_path)).read_metadata()


def plain_data_damaged(tmp_path):
    # A byte item another writer filled with what is not plain data.
    saved_with(tmp_path, {"name": b'rocksdcp-json:{"$rocksdcp": "tuple"}'},
               rt.DefaultSavePlanner())
    loaded_with(tmp_path, {"name": ""})


SCENARIOS = {
    "python-use-collectives-false": use_collectives_false,
    "python-rank-conflict": rank_conflict,
    "python-plan-of-another-writer": plan_of_another_writer,
    "python-planner-data-not-plain": planner_data_not_plain,
    "python-value-not-plain": value_not_plain,
    "python-shape-mismatch": shape_mismatch,
    "python-kind-mismatch": kind_mismatch,
    "python-value-from-tensor": value_from_tensor,
    "python-no-checkpoint-id": no_checkpoint_id,
    "python-plain-data-damaged": plain_data_damaged,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_message_is_the_documented_one(tmp_path, name):
    with pytest.raises(rocksdcp.Error) as e:
        SCENARIOS[name](tmp_path)
    code, message = produced(tmp_path, e.value)
    if os.environ.get("ROCKSDCP_PRINT_ERRORS"):
        print("\n| `{}` | | {} | `{}` |".format(name, code, message))
    assert documented().get(name) == (code, message)


def test_every_row_has_a_scenario():
    assert set(documented()) == set(SCENARIOS)
