#!/usr/bin/env python3
"""The same state dict through torch's distributed checkpoint driver, into
torch's FileSystemWriter and into rocksdcp, in one run, with a raw baseline.

Usage (from the repository root, after building the Python package):
  PYTHONPATH=build/python /usr/bin/python3 benchmarks/torch_dcp_bench.py \\
      [--gib 1.0] [--repeats 3] [--dir /tmp] [--json out.json]

The state dict is LLM-shaped: a decoder of 1024 hidden units whose layer
count makes --gib GiB (1 GiB: 28 layers), the embedding and output layer of
a 32k vocabulary, attention and down projections in fp32, the rest bf16,
every tensor filled from a seed. Cases, each --repeats times (median):

  raw save     every tensor's bytes written into one new file (os.writev),
               fsync: the bytes' physical limit on this disk
  raw load     the same file read back into the tensors (readinto), warm
               and cold (posix_fadvise DONTNEED first)
  fs save      save_state_dict(no_dist=True) with FileSystemWriter(path,
               single_file_per_rank=True, sync_files=True)
  fs load      load_state_dict(no_dist=True) with FileSystemReader, warm
               and cold
  rocksdcp     the same with rocksdcp.torch's StorageWriter and
               StorageReader, saving a new checkpoint id each time

Loads fill the same preallocated destination tensors. Targets (the issue's):
rocksdcp's save >= 3x FileSystemWriter's, its load >= 3x FileSystemReader's
warm and >= 1.5x cold. Prints a table of MB/s and ratios; --json writes the
raw figures.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch

import rocksdcp.torch as rt

dcp = rt.dcp

HIDDEN, KV, FFN, VOCAB = 1024, 256, 2816, 32000


def state_dict(gib):
    """fqn -> tensor, about `gib` GiB, filled from a seed."""
    def layer(i):
        p = "model.layers.{}.".format(i)
        return {
            p + "self_attn.q_proj.weight": (torch.float32, (HIDDEN, HIDDEN)),
            p + "self_attn.k_proj.weight": (torch.float32, (KV, HIDDEN)),
            p + "self_attn.v_proj.weight": (torch.float32, (KV, HIDDEN)),
            p + "self_attn.o_proj.weight": (torch.float32, (HIDDEN, HIDDEN)),
            p + "mlp.gate_proj.weight": (torch.bfloat16, (FFN, HIDDEN)),
            p + "mlp.up_proj.weight": (torch.bfloat16, (FFN, HIDDEN)),
            p + "mlp.down_proj.weight": (torch.float32, (HIDDEN, FFN)),
            p + "input_layernorm.weight": (torch.float32, (HIDDEN,)),
            p + "post_attention_layernorm.weight": (torch.float32, (HIDDEN,)),
        }
    specs = {"model.embed_tokens.weight": (torch.bfloat16, (VOCAB, HIDDEN)),
             "lm_head.weight": (torch.bfloat16, (VOCAB, HIDDEN)),
             "model.norm.weight": (torch.float32, (HIDDEN,))}

    def nbytes(s):
        return sum(torch.tensor([], dtype=d).element_size() * int(torch.tensor(sh).prod())
                   for d, sh in s.values())
    per_layer = nbytes(layer(0))
    layers = max(1, round((gib * 2**30 - nbytes(specs)) / per_layer))
    for i in range(layers):
        specs.update(layer(i))
    g = torch.Generator().manual_seed(2024)
    return {fqn: (torch.randn(shape, generator=g) * 0.02).to(dtype)
            for fqn, (dtype, shape) in specs.items()}


def drop_cache(path):
    for root, _, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def timed(fn, repeats, before=None):
    times = []
    for i in range(repeats):
        if before:
            before(i)
        start = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=None, help="scratch directory (default: $TMPDIR)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    sd = state_dict(args.gib)
    dest = {k: torch.empty_like(v) for k, v in sd.items()}
    for t in dest.values():
        t.zero_()  # Touched now, so that no load pays for first touch.
    total = sum(t.nbytes for t in sd.values()) if hasattr(torch.Tensor, "nbytes") else \
        sum(t.numel() * t.element_size() for t in sd.values())
    root = tempfile.mkdtemp(prefix="torch-dcp-bench-", dir=args.dir)
    results = {"bytes": total, "tensors": len(sd), "torch": torch.__version__, "cases": {}}
    try:
        # -- raw --
        raw = os.path.join(root, "raw")
        os.makedirs(raw)

        def raw_save(i):
            fd = os.open(os.path.join(raw, "f{}".format(i)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                views = [memoryview(t.view(-1).view(torch.uint8).numpy()) for t in sd.values()]
                for start in range(0, len(views), 512):
                    os.writev(fd, views[start:start + 512])
                os.fsync(fd)
            finally:
                os.close(fd)

        def raw_load(_):
            with open(os.path.join(raw, "f0"), "rb", buffering=0) as f:
                for t in dest.values():
                    f.readinto(memoryview(t.view(-1).view(torch.uint8).numpy()))

        # -- torch's FileSystemWriter / Reader --
        fs = os.path.join(root, "fs")

        def fs_save(i):
            dcp.save_state_dict(sd, no_dist=True, storage_writer=dcp.FileSystemWriter(
                os.path.join(fs, str(i)), single_file_per_rank=True, sync_files=True))

        def fs_load(_):
            dcp.load_state_dict(dest, no_dist=True,
                                storage_reader=dcp.FileSystemReader(os.path.join(fs, "0")))

        # -- rocksdcp --
        store = os.path.join(root, "store")

        def rocksdcp_save(i):
            dcp.save_state_dict(sd, no_dist=True,
                                storage_writer=rt.StorageWriter(store, "step-{}".format(i)))

        def rocksdcp_load(_):
            dcp.load_state_dict(dest, no_dist=True,
                                storage_reader=rt.StorageReader(store, "step-0"))

        cases = results["cases"]
        for name, save, load, where in (("raw", raw_save, raw_load, raw),
                                        ("fs", fs_save, fs_load, fs),
                                        ("rocksdcp", rocksdcp_save, rocksdcp_load, store)):
            cases[name + " save"] = timed(save, args.repeats)
            load(0)  # Untimed: warm.
            cases[name + " load warm"] = timed(load, args.repeats)
            cases[name + " load cold"] = timed(load, args.repeats, before=lambda _: drop_cache(where))
            for t in dest.values():
                t.zero_()
            load(0)
            bad = [k for k in sd if not torch.equal(sd[k], dest[k])]
            if bad:
                sys.exit("{}: loaded tensors differ: {}".format(name, bad[:5]))
            shutil.rmtree(where, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    mb = total / 1e6
    print("# {:.0f} MB in {} tensors, torch {}, median of {}".format(
        mb, len(sd), torch.__version__, args.repeats))
    print("| case | s | MB/s | x raw | x FileSystem |")
    print("|---|---:|---:|---:|---:|")
    targets = {"save": 3.0, "load warm": 3.0, "load cold": 1.5}
    checks = []
    for name, secs in results["cases"].items():
        kind = name.split(" ", 1)[1]
        backend = name.split(" ", 1)[0]
        vs_raw = results["cases"]["raw " + kind] / secs
        vs_fs = results["cases"]["fs " + kind] / secs
        mark = ""
        if backend == "rocksdcp":
            ok = vs_fs >= targets[kind]
            checks.append(ok)
            mark = " {} (>= {}x)".format("PASS" if ok else "MISS", targets[kind])
        print("| {} | {:.3f} | {:.0f} | {:.2f} | {:.2f}{} |".format(
            name, secs, mb / secs, vs_raw, vs_fs, mark))
    print("\ntargets: {} PASS, {} MISS".format(checks.count(True), checks.count(False)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
