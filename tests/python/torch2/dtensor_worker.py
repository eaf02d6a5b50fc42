"""One rank of test_dtensor.py's jobs (torchrun, gloo, a CPU DeviceMesh),
or the whole job in one process without torch.distributed:

    dtensor_worker.py save DIR ID
    dtensor_worker.py load DIR SRC [DST]

A model sharded with FSDP2's fully_shard and its Adam state, through
get_state_dict / set_state_dict, and three tensors distributed by hand
with Shard(0), Shard(1) and Replicate(). "save" trains a step and saves
checkpoint ID into DIR/store; rank 0 writes every value, whole, to
DIR/expected.pt. "load" loads SRC (whatever world saved it) into a fresh
model and optimizer, checks every value they then hold against
DIR/expected.pt, and saves it again as DST with this world. Without
torch.distributed initialized (no launcher), the model is not sharded
and the tensors are whole: the state of one process."""

import os
import sys
import warnings

import torch
import torch.distributed as dist

import rocksdcp.torch as rt
from conftest import work_done

dcp = rt.dcp
warnings.simplefilter("ignore")

ROWS, COLS = 36, 20  # 36 rows: 2, 3 and 4 ranks shard them unevenly or not.


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(COLS, ROWS), torch.nn.ReLU(),
                               torch.nn.Linear(ROWS, 10, bias=False))


def whole(name):
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    return torch.randn(ROWS, COLS, generator=g, dtype=torch.float64)


def distributed():
    return dist.is_available() and dist.is_initialized()


def parts(trained):
    """(model, optimizer, extra state): FSDP2-sharded and DTensors across
    the world, or whole in one process. ``trained`` takes an Adam step."""
    m = model()
    extra = {"s0": whole("s0"), "s1": whole("s1").float(), "rep": whole("rep").to(torch.bfloat16)}
    if distributed():
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        fully_shard(m[0], mesh=mesh)
        fully_shard(m, mesh=mesh)
        extra = {"s0": distribute_tensor(extra["s0"], mesh, [Shard(0)]),
                 "s1": distribute_tensor(extra["s1"], mesh, [Shard(1)]),
                 "rep": distribute_tensor(extra["rep"], mesh, [Replicate()])}
    opt = torch.optim.Adam(m.parameters(), lr=0.1)
    if trained:
        torch.manual_seed(1)
        m(torch.randn(8, COLS)).pow(2).sum().backward()
        opt.step()
    else:
        extra = {k: v * 0 for k, v in extra.items()}
    return m, opt, extra


def state(m, opt, extra):
    from torch.distributed.checkpoint.state_dict import get_state_dict
    msd, osd = get_state_dict(m, opt)
    return {"model": msd, "optim": osd, "extra": extra}


def as_whole(value):
    """Every tensor of a nested state, whole (a DTensor gathered)."""
    if isinstance(value, dict):
        return {k: as_whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_whole(v) for v in value]
    if hasattr(value, "full_tensor"):
        return value.full_tensor()
    return value


def check(sd, expected, where=""):
    if isinstance(expected, dict):
        assert sd.keys() == expected.keys(), (where, sd.keys(), expected.keys())
        for k in expected:
            check(sd[k], expected[k], "{}.{}".format(where, k))
    elif isinstance(expected, list):
        assert len(sd) == len(expected), where
        for i, (a, b) in enumerate(zip(sd, expected)):
            check(a, b, "{}[{}]".format(where, i))
    elif isinstance(expected, torch.Tensor):
        assert sd.dtype == expected.dtype and torch.equal(sd, expected), where
    else:
        assert sd == expected, (where, sd, expected)


def load_into_fresh(store, checkpoint_id):
    from torch.distributed.checkpoint.state_dict import set_state_dict
    m, opt, extra = parts(trained=False)
    sd = state(m, opt, extra)
    dcp.load(sd, storage_reader=rt.StorageReader(store), checkpoint_id=checkpoint_id)
    set_state_dict(m, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
    # What the model and optimizer now hold, not only the dict loaded.
    return m, opt, state(m, opt, sd["extra"])


def main():
    phase, base, ids = sys.argv[1], sys.argv[2], sys.argv[3:]
    store = os.path.join(base, "store")
    if "RANK" in os.environ:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed() else 0
    if phase == "save":
        m, opt, extra = parts(trained=True)
        sd = state(m, opt, extra)
        dcp.save(sd, storage_writer=rt.StorageWriter(store), checkpoint_id=ids[0])
        expected = as_whole(sd)
        if rank == 0:
            torch.save(expected, os.path.join(base, "expected.pt"))
    else:
        expected = torch.load(os.path.join(base, "expected.pt"), weights_only=True)
        m, opt, sd = load_into_fresh(store, ids[0])
        check(as_whole(sd), expected)
        if len(ids) > 1:
            dcp.save(sd, storage_writer=rt.StorageWriter(store), checkpoint_id=ids[1])
    if distributed():
        dist.barrier()
        work_done(rank)
        dist.destroy_process_group()
    print("{} rank {} ok".format(" ".join(sys.argv[1:]), rank), flush=True)


if __name__ == "__main__":
    main()
