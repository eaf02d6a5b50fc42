"""Saves a sharded checkpoint as a 2-process training job does, for the
torch 2.x tests: run by torch's own launcher (conftest.torchrun) in 2
processes of a gloo group on the CPU, it saves ``full_state()`` with its
tensors as DTensors over the 2 ranks (most sharded by rows, so that each is
saved in 2 chunks, one a rank; one replicated, saved once) through torch's
``dcp.save``:

    dcp_sharded_save.py DIR [STORE ID]

DIR: with torch's FileSystemWriter (a directory with a file per rank and
.metadata). STORE ID: also into the rocksdcp store STORE as checkpoint ID,
with rocksdcp.torch.StorageWriter.

The tests import ``full_state`` to know what was saved: every rank builds
the same values from the same seed."""

import sys

import torch


def full_state():
    """The state dict, whole: what loading the checkpoint into plain
    tensors gives back."""
    g = torch.Generator().manual_seed(1234)
    w = torch.randn(67, 24, generator=g)
    w[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0])
    return {
        "model": {
            "embed.weight": torch.randn(50, 16, generator=g).to(torch.bfloat16),
            "layer.weight": w,
            "layer.bias": torch.randn(67, generator=g).to(torch.float16),
            "norm.weight": torch.randn(24, generator=g, dtype=torch.float64),
            "ids": torch.randint(-2**40, 2**40, (33, 3), generator=g, dtype=torch.int64),
        },
        # Replicated on both ranks: one chunk.
        "scale": torch.randn(5, generator=g),
        # torch's planner pickles these.
        "step": 17,
        "config": {"name": "sharded", "sizes": [67, 24]},
    }


# Saved whole on every rank (Replicate), not sharded.
REPLICATED = {"scale"}


def main(directory, store=None, checkpoint_id=None):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))

    def shard(name, value):
        if isinstance(value, dict):
            return {k: shard(k, v) for k, v in value.items()}
        if isinstance(value, torch.Tensor):
            placement = Replicate() if name in REPLICATED else Shard(0)
            return distribute_tensor(value, mesh, [placement])
        return value

    state = {k: shard(k, v) for k, v in full_state().items()}
    dcp.save(state, storage_writer=dcp.FileSystemWriter(directory))
    if store is not None:
        import rocksdcp.torch as rt
        dcp.save(state, storage_writer=rt.StorageWriter(store), checkpoint_id=checkpoint_id)
    dist.barrier()
    from conftest import work_done
    work_done(dist.get_rank())
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
