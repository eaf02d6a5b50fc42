"""One rank of a trainer that test_training.py kills and resumes, run by
torchrun (gloo):

    train_worker.py STORE STEPS EVERY PLANNERS FINAL

A DDP model whose parameters three optimizers share out (Adam, AdamW and
SGD with momentum), trained on data that depends only on the step and the
rank. At start it resumes from the store's newest checkpoint, if any,
through torch.distributed.checkpoint.state_dict's get_state_dict /
set_state_dict; every EVERY steps it saves with dcp.save and keeps the
newest 3. PLANNERS is "torch" (torch's default planners, which pickle the
optimizers' hyperparameters) or "rocksdcp" (rocksdcp.torch's, which save
them as tensors and data). Rank 0 writes the final state to FINAL.

Each rank prints events the test kills it on: "event <rank> <pid> <what>"."""

import os
import sys
import warnings

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel

import rocksdcp
import rocksdcp.torch as rt

dcp = rt.dcp
warnings.simplefilter("ignore")


def event(rank, what):
    print("event {} {} {}".format(rank, os.getpid(), what), flush=True)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 8))


def make_optimizers(model):
    layers = [model[0], model[2], model[4]]
    return [torch.optim.Adam(layers[0].parameters(), lr=1e-2, betas=(0.8, 0.99)),
            torch.optim.AdamW(layers[1].parameters(), lr=5e-3, weight_decay=0.1, amsgrad=True),
            torch.optim.SGD(layers[2].parameters(), lr=0.05, momentum=0.9, nesterov=True)]


def batch(step, rank):
    g = torch.Generator().manual_seed(step * 100 + rank)
    x = torch.randn(16, 32, generator=g)
    return x, torch.sin(x[:, :8] * 3)


def state(model, optimizers, step):
    msd, osd = get_state_dict(model, optimizers)
    return {"model": msd, "optim": osd, "trainer": {"step": step}}


def planners(kind):
    if kind == "rocksdcp":
        return rt.DefaultSavePlanner(), rt.DefaultLoadPlanner()
    return None, None


def newest(store, rank):
    ids = [None]
    if rank == 0 and os.path.exists(os.path.join(store, "CURRENT")):
        with rocksdcp.Store(store, read_only=True) as s:
            listed = [c.id for c in s.list() if not c.damage]
        ids = [listed[-1] if listed else None]
    dist.broadcast_object_list(ids, src=0)
    return ids[0]


def main():
    store, steps, every, kind, final = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        sys.argv[4], sys.argv[5]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    model = make_model()
    ddp = DistributedDataParallel(model)
    optimizers = make_optimizers(model)
    save_planner, load_planner = planners(kind)
    start = 0
    resume = newest(store, rank)
    if resume is not None:
        sd = state(ddp, optimizers, 0)
        dcp.load(sd, storage_reader=rt.StorageReader(store), checkpoint_id=resume,
                 planner=load_planner)
        set_state_dict(ddp, optimizers, model_state_dict=sd["model"],
                       optim_state_dict=sd["optim"])
        start = sd["trainer"]["step"]
    event(rank, "resumed {}".format(start))
    for step in range(start, steps):
        x, y = batch(step, rank)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        for opt in optimizers:
            opt.zero_grad()
        loss.backward()
        for opt in optimizers:
            opt.step()
        event(rank, "step {}".format(step + 1))
        if (step + 1) % every == 0:
            event(rank, "save-begin {}".format(step + 1))
            dcp.save(state(ddp, optimizers, step + 1), storage_writer=rt.StorageWriter(store),
                     checkpoint_id="step-{:06d}".format(step + 1), planner=save_planner)
            event(rank, "save-end {}".format(step + 1))
            if rank == 0:
                with rocksdcp.Store(store) as s:
                    s.keep_last(3)
            dist.barrier()
    if rank == 0:
        torch.save({"model": model.state_dict(),
                    "optim": [opt.state_dict() for opt in optimizers]}, final)
    event(rank, "done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
