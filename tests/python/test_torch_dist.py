"""Ranks as processes: torch.distributed (gloo, a FileStore in the test's
temporary directory) drives rocksdcp.torch on 2 and 4 processes. The
coordinator's process opens the store read-write, the others write as
followers and read read-only, at the same path. A ShardedTensor saved
row-sharded on 2 ranks loads column-sharded on 4, and a tensor every rank
holds (replicated) is saved once."""

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import rocksdcp
import rocksdcp.torch as rt

ROWS, COLS = 64, 48


def full_tensor():
    return torch.arange(ROWS * COLS, dtype=torch.float32).reshape(ROWS, COLS) * 0.5


def replicated():
    return torch.linspace(-1, 1, 100, dtype=torch.float64)


def sharded(dim, world_size):
    # Imported here: rocksdcp.torch made torch 1.13's _shard importable.
    from torch.distributed._shard import sharded_tensor
    from torch.distributed._shard.sharding_spec import ChunkShardingSpec
    spec = ChunkShardingSpec(dim=dim, placements=["rank:{}/cpu".format(r) for r in range(world_size)])
    return sharded_tensor.zeros(spec, ROWS, COLS)


def local_boxes(st):
    for shard in st.local_shards():
        (r, c), (h, w) = shard.metadata.shard_offsets, shard.metadata.shard_sizes
        yield shard.tensor, (slice(r, r + h), slice(c, c + w))


def save_rank(rank, world_size, init, path):
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank,
                            world_size=world_size)
    st = sharded(0, world_size)
    for tensor, box in local_boxes(st):
        tensor.copy_(full_tensor()[box])
    rt.dcp.save_state_dict({"w": st, "rep": replicated()},
                           storage_writer=rt.StorageWriter(path, "ck"))
    dist.barrier()
    dist.destroy_process_group()


def load_rank(rank, world_size, init, path):
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank,
                            world_size=world_size)
    st = sharded(1, world_size)
    state = {"w": st, "rep": torch.zeros(100, dtype=torch.float64)}
    rt.dcp.load_state_dict(state, storage_reader=rt.StorageReader(path, "ck"))
    boxes = list(local_boxes(st))
    assert boxes, "rank {} holds no shard".format(rank)
    for tensor, box in boxes:
        assert torch.equal(tensor, full_tensor()[box]), "rank {}: shard {}".format(rank, box)
    assert torch.equal(state["rep"], replicated())
    dist.barrier()
    dist.destroy_process_group()


def test_two_ranks_save_row_shards_four_ranks_load_column_shards(tmp_path):
    path = str(tmp_path / "store")
    mp.spawn(save_rank, args=(2, str(tmp_path / "init-save"), path), nprocs=2, join=True)

    with rocksdcp.Store(path, read_only=True) as store:
        [info] = store.list()
        assert info.world_size == 2
        # The replicated tensor once, not once per rank.
        assert info.bytes == ROWS * COLS * 4 + 100 * 8
        md = store._native.metadata("ck").state_dict_metadata
        assert len(md["w"].chunks) == 2 and len(md["rep"].chunks) == 1
        assert store.verify()["ok"]

    mp.spawn(load_rank, args=(4, str(tmp_path / "init-load"), path), nprocs=4, join=True)
