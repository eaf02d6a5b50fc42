"""DTensor state through torch 2.x's driver: a model sharded with FSDP2's
fully_shard on CPU / gloo, its Adam state, and tensors distributed with
Shard(0), Shard(1) and Replicate() on a CPU DeviceMesh
(dtensor_worker.py). Saved by 2 ranks, loaded by 4, by 1 process and
back by 2; every value exact each time."""

import os
import subprocess
import sys

import rocksdcp
from conftest import HERE, torchrun


def test_saved_by_2_loaded_by_4_by_1_and_by_2(tmp_path):
    torchrun("dtensor_worker.py", 2, "save", tmp_path, "w2")
    torchrun("dtensor_worker.py", 4, "load", tmp_path, "w2", "w4")
    one = subprocess.run([sys.executable, os.path.join(HERE, "dtensor_worker.py"), "load",
                          str(tmp_path), "w4", "w1"], capture_output=True, text=True)
    assert one.returncode == 0, one.stderr[-4000:]
    torchrun("dtensor_worker.py", 2, "load", tmp_path, "w1")
    with rocksdcp.Store(tmp_path / "store", read_only=True) as s:
        assert [(c.id, c.world_size) for c in s.list()] == [("w2", 2), ("w4", 4), ("w1", 1)]
        items = s.items("w2")
        # Saved as shards: the checkpoint holds each tensor whole, in the
        # chunks its ranks held.
        assert items["extra.s1"] == ("tensor", "float32", (36, 20))
        md = s._native.metadata("w2").state_dict_metadata
        assert len(md["extra.s0"].chunks) == 2 and len(md["extra.s1"].chunks) == 2
        assert len(md["extra.rep"].chunks) == 1
        assert len(s._native.metadata("w4").state_dict_metadata["extra.s1"].chunks) == 4
