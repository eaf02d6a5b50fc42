#!/usr/bin/env python3
"""One LLM-shaped state dict through torch 2.x's own driver and its peers.

Google Benchmark (its Python module, ``google_benchmark``) cases that save
and load the same state dict, built once per process from a fixed seed,
through every path a trainer on torch 2.x might take, in one run:

  raw          BM_RawWriteFsync (one file: os.writev, fsync),
               BM_RawWriteDirect/writers:K (O_DIRECT, K threads of 8 MiB
               aligned mmap buffers), BM_RawRead/cold:C (readinto the
               preallocated tensors), BM_RawReadDirect/qd:Q (O_DIRECT, Q
               threads each with one 8 MiB pread in flight, cold), and
               BM_Memcpy/threads:T (memcpy into the destination on 1 and on
               torch's number of threads: the machine's copy limit, which
               bounds every warm load);
               their copies are glibc's memcpy (ctypes, without the GIL)
  torch DCP    BM_DcpFsSave/threads:N: dcp.save into FileSystemWriter(dir,
               single_file_per_rank=True, sync_files=True, thread_count=N),
               N = 1, 2, 4; BM_DcpFsLoad/cold:C: dcp.load with
               FileSystemReader (of the thread_count=1 checkpoint)
  torch.save   BM_TorchSave: torch.save(sd, file), fsync of the file and its
               directory; BM_TorchLoad/cold:C: torch.load(file, mmap=True,
               weights_only=True), then copy_ into the destination (what
               load_state_dict does)
  safetensors  BM_SafetensorsSave: safetensors.torch.save_file, fsync of
               the file and its directory; BM_SafetensorsLoad/cold:C:
               load_file, then copy_ into the destination
  rocksdcp     BM_RocksdcpSave: dcp.save with rocksdcp.torch.StorageWriter
               (one writer for every iteration, as a trainer keeps one) and a
               new checkpoint_id each iteration; BM_RocksdcpLoad/cold:C:
               dcp.load with a new rocksdcp.torch.StorageReader
  async        BM_AsyncSaveFs, BM_AsyncSaveRocksdcp: dcp.async_save (thread
               executor) into FileSystemWriter (thread_count=1) and into
               rocksdcp's StorageWriter; the case's time is how long the
               caller was blocked (until async_save returned), blocking_ms
               and total_ms (until its future completed) are counters

The state dict (default: --hidden 1280 --layers 28, 1153 MiB in 255
tensors): a LLaMA-like decoder, model.embed_tokens.weight [32000, H] fp32;
per layer input_layernorm / post_attention_layernorm [H] fp32,
self_attn.{q,o}_proj [H, H], self_attn.{k,v}_proj [256, H], mlp.{gate,up}_proj
[F, H], mlp.down_proj [H, F] in bf16 (F = 2.7 H rounded to 128); model.norm
[H] fp32; lm_head.weight [32000, H] bf16. Values: torch.randn (seed 37;
norms 1 + 0.1 randn). Loads go into a preallocated state dict of the same
shapes, zeroed before each load case; after its last iteration the
destination is checked equal to the source byte for byte (and the file an
O_DIRECT writer wrote, and the checkpoint each async case saved, read back
and checked), else the case fails.

Timing: manual (UseManualTime), time.perf_counter around exactly the
measured call, a fixed --iterations (3) per case; the reported time and
bytes_per_second are the mean over the iterations (Google Benchmark's own
figure: total bytes over total time), best_ms / worst_ms show the spread.
Each save iteration writes a new directory (a new checkpoint id into the one
rocksdcp store); the previous iteration's is removed first, outside the
timed region. A cold iteration first drops the files it reads from the page
cache (fsync, posix_fadvise(DONTNEED) per file: no other process's cache
is touched); a warm one first reads them into it (and a warm case does one
untimed load first). cached_mib: the bytes of those files the page cache
held just before each timed call (mincore; the mean), which says whether
cold was cold and warm was warm.

Memory: rss_added_mib is the peak RSS (VmHWM of /proc/self/status, reset
by writing 5 to /proc/self/clear_refs once the case's inputs exist, after
malloc_trim) minus the RSS at that reset; anon_added_mib / file_added_mib
split the peak into anonymous memory and mapped file pages, sampled from
/proc/self/statm every --rss_sample_ms (a shorter peak can be missed).

Usage (from the repository root, with the Python package built):
  PYTHONPATH=build/python /root/.cache/rocksdcp/torch2-venv/bin/python \\
      benchmarks/torch2_bench.py --benchmark_out=torch2.json \\
      --benchmark_out_format=json [--bench_dir=/tmp] [--iterations=3] \\
      [--torch_threads=N] [--hidden=1280 --layers=28] [--keep]
  python3 benchmarks/torch2_ratios.py torch2.json

Google Benchmark's flags (--benchmark_filter=..., ...) pass through; a load
case whose save case did not run saves its checkpoint itself, untimed.
Benchmarks report; they never assert a timing.
"""

import argparse
import ctypes
import gc
import itertools
import mmap
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings

import google_benchmark as benchmark
import safetensors
import safetensors.torch
import torch
import torch.distributed.checkpoint as dcp

import rocksdcp
import rocksdcp.torch as rt

warnings.filterwarnings("ignore")

MIB = 1 << 20
BLOCK = 8 * MIB  # O_DIRECT block: 8 MiB, as the C++ benchmarks.
ALIGN = 4096

# Set by main().
ARGS = None
ROOT = None
SRC = None    # fqn -> tensor, the state dict saved
DEST = None   # fqn -> tensor, the same shapes, what loads fill
TOTAL = 0     # payload bytes
# path -> where its last save left a checkpoint, for the load cases:
#   "raw": file, "fs": dir, "torch": file, "safetensors": file,
#   "rocksdcp": (store, checkpoint id)
CHECKPOINTS = {}
_counter = itertools.count()

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_PAGE = os.sysconf("SC_PAGE_SIZE")
# glibc's memcpy, called without the GIL (ctypes releases it), on one
# thread: the raw cases' gather and scatter, and BM_Memcpy.
_memmove = ctypes.memmove


# ---- The state dict ----

def llama_state_dict(hidden, layers, vocab=32000, kv=256, seed=37):
    ffn = (int(hidden * 2.7) + 127) // 128 * 128
    specs = [("model.embed_tokens.weight", torch.float32, (vocab, hidden))]
    for i in range(layers):
        p = "model.layers.{}.".format(i)
        specs += [
            (p + "input_layernorm.weight", torch.float32, (hidden,)),
            (p + "self_attn.q_proj.weight", torch.bfloat16, (hidden, hidden)),
            (p + "self_attn.k_proj.weight", torch.bfloat16, (kv, hidden)),
            (p + "self_attn.v_proj.weight", torch.bfloat16, (kv, hidden)),
            (p + "self_attn.o_proj.weight", torch.bfloat16, (hidden, hidden)),
            (p + "post_attention_layernorm.weight", torch.float32, (hidden,)),
            (p + "mlp.gate_proj.weight", torch.bfloat16, (ffn, hidden)),
            (p + "mlp.up_proj.weight", torch.bfloat16, (ffn, hidden)),
            (p + "mlp.down_proj.weight", torch.bfloat16, (hidden, ffn)),
        ]
    specs += [("model.norm.weight", torch.float32, (hidden,)),
              ("lm_head.weight", torch.bfloat16, (vocab, hidden))]
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for fqn, dtype, shape in specs:
        t = torch.randn(shape, generator=g, dtype=dtype)
        if len(shape) == 1:
            t.mul_(0.1).add_(1.0)
        else:
            t.mul_(0.02)
        sd[fqn] = t
    return sd


def u8(t):
    return t.view(-1).view(torch.uint8)


def mv(t):
    return memoryview(u8(t).numpy())


def verify(what):
    bad = [k for k in SRC if not torch.equal(u8(SRC[k]), u8(DEST[k]))]
    if bad:
        raise RuntimeError("{}: {} of {} tensors differ from the saved ones, e.g. {}".format(
            what, len(bad), len(SRC), bad[:3]))


def zero_dest():
    for t in DEST.values():
        t.zero_()


# ---- Files and the page cache ----

def files_of(path):
    if os.path.isfile(path):
        return [path]
    out = []
    for root, _, names in os.walk(path):
        out += [os.path.join(root, n) for n in sorted(names)]
    return out


def drop_cache(path):
    """Drops `path`'s files (a file or a tree) from the page cache."""
    for f in files_of(path):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


_WARM_BUF = bytearray(b"\x01") * BLOCK  # Touched before any case's RSS window.


def warm_cache(path):
    """Reads `path`'s files, so that the page cache holds them."""
    for f in files_of(path):
        with open(f, "rb", buffering=0) as fh:
            while fh.readinto(_WARM_BUF):
                pass


def cached_bytes(path):
    """How many bytes of `path`'s files the page cache holds (mincore)."""
    total = 0
    for f in files_of(path):
        size = os.path.getsize(f)
        if size == 0:
            continue
        fd = os.open(f, os.O_RDONLY)
        try:
            addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                continue
            try:
                pages = (size + _PAGE - 1) // _PAGE
                vec = (ctypes.c_ubyte * pages)()
                if _libc.mincore(addr, size, vec) == 0:
                    total += (pages - bytes(vec).count(0)) * _PAGE
            finally:
                _libc.munmap(addr, size)
        finally:
            os.close(fd)
    return total


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove(path):
    if path is None:
        return
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.unlink(path)


def fresh(prefix):
    return os.path.join(ROOT, "{}-{}".format(prefix, next(_counter)))


# ---- Memory ----

def _status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[k] = int(v.split()[0]) * 1024
    return out


def _statm():
    with open("/proc/self/statm") as f:
        fields = f.read().split()
    resident, shared = int(fields[1]) * _PAGE, int(fields[2]) * _PAGE
    return resident - shared, shared


class RssMeter:
    """Peak RSS above the RSS at start(): exact (VmHWM), and split into
    anonymous memory and mapped file pages by a sampling thread."""

    def start(self):
        gc.collect()
        try:
            _libc.malloc_trim(0)
        except AttributeError:
            pass
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        s = _status()
        self.base_rss = s["VmRSS"]
        self.base_anon = s["RssAnon"]
        self.base_file = s["RssFile"] + s.get("RssShmem", 0)
        self.peak_anon, self.peak_file = self.base_anon, self.base_file
        self._stop = threading.Event()
        self._thread = None
        if ARGS.rss_sample_ms > 0:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(ARGS.rss_sample_ms / 1000):
            anon, shared = _statm()
            self.peak_anon = max(self.peak_anon, anon)
            self.peak_file = max(self.peak_file, shared)

    def stop(self, state):
        self._stop.set()
        if self._thread:
            self._thread.join()
        s = _status()
        state.counters["peak_rss_mib"] = s["VmHWM"] / MIB
        state.counters["rss_added_mib"] = max(0, s["VmHWM"] - self.base_rss) / MIB
        if self._thread:
            state.counters["anon_added_mib"] = max(0, self.peak_anon - self.base_anon) / MIB
            state.counters["file_added_mib"] = max(0, self.peak_file - self.base_file) / MIB


# ---- The cases' frame ----

def _report(state, times, cached=None, extra=None):
    state.bytes_processed = TOTAL * len(times)
    if times:
        state.counters["mean_ms"] = 1000 * sum(times) / len(times)
        state.counters["best_ms"] = 1000 * min(times)
        state.counters["worst_ms"] = 1000 * max(times)
        state.counters["best_MBps"] = TOTAL / min(times) / 1e6
    state.counters["bytes"] = TOTAL
    state.counters["tensors"] = len(SRC)
    if cached:
        state.counters["cached_mib"] = sum(cached) / len(cached) / MIB
    state.counters["load1"] = os.getloadavg()[0]
    for k, v in (extra or {}).items():
        state.counters[k] = v


def save_case(name, save, after=None):
    """A save case: save(dest) writes a new checkpoint at `dest` (from
    fresh()); the previous iteration's is removed before the next one. The
    last one is kept for the load cases (after(dest))."""
    def bm(state):
        try:
            meter = RssMeter().start()
            times, prev = [], None
            while state:
                remove(prev)
                gc.collect()
                dest = fresh(name)
                start = time.perf_counter()
                save(dest)
                elapsed = time.perf_counter() - start
                state.set_iteration_time(elapsed)
                times.append(elapsed)
                prev = dest
            meter.stop(state)
            if after is not None:
                after(prev)
            else:
                remove(prev)
            _report(state, times)
        except Exception as e:  # pragma: no cover - reported, not raised
            state.skip_with_error("{}: {!r}".format(name, e))
    return bm


def load_case(name, where, load, cold, cleanup=None):
    """A load case: where() gives the checkpoint (saving one if no save
    case left it), load(ckpt) fills DEST from it."""
    def bm(state):
        try:
            ckpt = where()
            files = ckpt[0] if isinstance(ckpt, tuple) else ckpt
            zero_dest()
            meter = RssMeter().start()
            if not cold:
                warm_cache(files)
                load(ckpt)  # Untimed: a first load, warm.
                if cleanup:
                    cleanup()
            times, cached = [], []
            while state:
                gc.collect()
                if cold:
                    drop_cache(files)
                else:
                    warm_cache(files)
                cached.append(cached_bytes(files))
                start = time.perf_counter()
                load(ckpt)
                elapsed = time.perf_counter() - start
                state.set_iteration_time(elapsed)
                times.append(elapsed)
                if cleanup:
                    cleanup()
            meter.stop(state)
            verify(name)
            _report(state, times, cached, {"cold": int(cold)})
        except Exception as e:  # pragma: no cover
            state.skip_with_error("{}: {!r}".format(name, e))
    return bm


# ---- raw ----

def _writev_all(fd, views):
    views = list(views)
    while views:
        n = os.writev(fd, views[:1024])
        while n:
            if n >= len(views[0]):
                n -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][n:]
                n = 0


def raw_write(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _writev_all(fd, [mv(t) for t in SRC.values()])
        os.fsync(fd)
    finally:
        os.close(fd)


def _block_map(tensors):
    """Per 8 MiB block of the concatenated payload: [(u8 view, offset in the
    tensor, offset in the block, length)]."""
    blocks, cur, fill = [], [], 0
    for t in tensors:
        b, off, n = u8(t), 0, t.numel() * t.element_size()
        while off < n:
            take = min(n - off, BLOCK - fill)
            cur.append((b, off, fill, take))
            off += take
            fill += take
            if fill == BLOCK:
                blocks.append(cur)
                cur, fill = [], 0
    if cur:
        blocks.append(cur)
    return blocks


def _run_threads(k, fn):
    errors = []

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: B902 - reported by the caller
            errors.append(e)
    threads = [threading.Thread(target=run) for _ in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _direct_blocks(fd, tensors, threads, move):
    """Moves the tensors' bytes, BLOCK at a time, between the O_DIRECT file
    ``fd`` and aligned buffers of their own on ``threads`` threads:
    ``move(buffer, base_address, block_number, pieces)`` for each block."""
    blocks = _block_map(tensors)
    next_block = itertools.count()

    def worker():
        mm = mmap.mmap(-1, BLOCK, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        buf = torch.frombuffer(mm, dtype=torch.uint8)
        try:
            while True:
                b = next(next_block)
                if b >= len(blocks):
                    return
                move(mm, buf.data_ptr(), b, blocks[b])
        finally:
            del buf
            mm.close()
    _run_threads(threads, worker)


def raw_write_direct(path, writers):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)

    def write(mm, base, b, pieces):
        fill = 0
        for src, off, at, n in pieces:
            _memmove(base + at, src.data_ptr() + off, n)
            fill = at + n
        padded = (fill + ALIGN - 1) // ALIGN * ALIGN
        view, pos = memoryview(mm)[:padded], b * BLOCK
        while view:
            n = os.pwrite(fd, view, pos)
            view, pos = view[n:], pos + n
        view.release()
    try:
        _direct_blocks(fd, SRC.values(), writers, write)
        os.ftruncate(fd, TOTAL)
        os.fsync(fd)
    finally:
        os.close(fd)


def raw_read(path):
    with open(path, "rb", buffering=0) as f:
        for t in DEST.values():
            view = mv(t)
            while view:
                n = f.readinto(view)
                if not n:
                    raise EOFError(path)
                view = view[n:]


def raw_read_direct(path, qd):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)

    def read(mm, base, b, pieces):
        want = pieces[-1][2] + pieces[-1][3]
        got = os.preadv(fd, [mm], b * BLOCK)
        if got < want:
            raise EOFError("{}: block {}: {} of {} bytes".format(path, b, got, want))
        for dst, off, at, n in pieces:
            _memmove(dst.data_ptr() + off, base + at, n)
    try:
        _direct_blocks(fd, DEST.values(), qd, read)
    finally:
        os.close(fd)


def raw_file():
    if "raw" not in CHECKPOINTS:
        path = fresh("raw-for-load")
        raw_write(path)
        CHECKPOINTS["raw"] = path
    return CHECKPOINTS["raw"]


def check_file(path, what):
    """The file holds the payload: read back (untimed) and compared."""
    zero_dest()
    raw_read(path)
    verify(what)


# ---- torch DCP, FileSystemWriter / Reader ----

def fs_save(path, threads=1):
    dcp.save(SRC, storage_writer=dcp.FileSystemWriter(
        path, single_file_per_rank=True, sync_files=True, thread_count=threads))


def fs_load(path):
    dcp.load(DEST, storage_reader=dcp.FileSystemReader(path))


def fs_checkpoint():
    if "fs" not in CHECKPOINTS:
        path = fresh("fs-for-load")
        fs_save(path)
        CHECKPOINTS["fs"] = path
    return CHECKPOINTS["fs"]


# ---- torch.save ----

def torch_save(path):
    torch.save(SRC, path)
    fsync_path(path)
    fsync_path(os.path.dirname(path))


_loaded = {}


def torch_load(path):
    loaded = torch.load(path, mmap=True, weights_only=True)
    _loaded["sd"] = loaded  # Let go of (unmapped) outside the timed region.
    with torch.no_grad():
        for k, t in DEST.items():
            t.copy_(loaded[k])


def drop_loaded():
    _loaded.clear()
    gc.collect()


def torch_file():
    if "torch" not in CHECKPOINTS:
        path = fresh("torch-for-load")
        torch_save(path)
        CHECKPOINTS["torch"] = path
    return CHECKPOINTS["torch"]


# ---- safetensors ----

def st_save(path):
    safetensors.torch.save_file(SRC, path)
    fsync_path(path)
    fsync_path(os.path.dirname(path))


def st_load(path):
    loaded = safetensors.torch.load_file(path)
    _loaded["sd"] = loaded
    with torch.no_grad():
        for k, t in DEST.items():
            t.copy_(loaded[k])


def st_file():
    if "safetensors" not in CHECKPOINTS:
        path = fresh("st-for-load")
        st_save(path)
        CHECKPOINTS["safetensors"] = path
    return CHECKPOINTS["safetensors"]


# ---- rocksdcp ----

def store_path():
    path = os.path.join(ROOT, "rocksdcp-store")
    if not os.path.exists(path):
        rocksdcp.Store(path).close()  # Created outside any timed region.
    return path


def delete_checkpoint(cid):
    with rocksdcp.Store(store_path()) as s:
        if cid in s:
            s.delete(cid)


def rocksdcp_save_case():
    """dcp.save into rocksdcp: one StorageWriter for every iteration, a new
    checkpoint id each; the previous one is deleted first, untimed."""
    name = "BM_RocksdcpSave"

    def bm(state):
        try:
            path = store_path()
            writer = rt.StorageWriter(path)
            meter = RssMeter().start()
            times, prev = [], None
            while state:
                if prev is not None:
                    delete_checkpoint(prev)
                gc.collect()
                cid = "save-{}".format(next(_counter))
                start = time.perf_counter()
                dcp.save(SRC, storage_writer=writer, checkpoint_id=cid)
                elapsed = time.perf_counter() - start
                state.set_iteration_time(elapsed)
                times.append(elapsed)
                prev = cid
            meter.stop(state)
            old = CHECKPOINTS.get("rocksdcp")
            CHECKPOINTS["rocksdcp"] = (path, prev)
            if old is not None and old[1] != prev:
                delete_checkpoint(old[1])
            _report(state, times)
        except Exception as e:  # pragma: no cover
            state.skip_with_error("{}: {!r}".format(name, e))
    return bm


def rocksdcp_checkpoint():
    if "rocksdcp" not in CHECKPOINTS:
        cid = "for-load"
        dcp.save(SRC, storage_writer=rt.StorageWriter(store_path()), checkpoint_id=cid)
        CHECKPOINTS["rocksdcp"] = (store_path(), cid)
    return CHECKPOINTS["rocksdcp"]


def rocksdcp_load(ckpt):
    path, cid = ckpt
    dcp.load(DEST, storage_reader=rt.StorageReader(path), checkpoint_id=cid)


# ---- async ----

def async_case(name, into_rocksdcp):
    """dcp.async_save (thread executor): the time until it returns (the
    case's time), and until its future completes (total_ms). Each iteration
    completes before the next; the last checkpoint is loaded back and
    checked, untimed."""
    def bm(state):
        try:
            writer = rt.StorageWriter(store_path()) if into_rocksdcp else None
            meter = RssMeter().start()
            blocking, totals, prev = [], [], None
            while state:
                if into_rocksdcp:
                    if prev is not None:
                        delete_checkpoint(prev)
                else:
                    remove(prev)
                gc.collect()
                if into_rocksdcp:
                    prev = "async-{}".format(next(_counter))
                    start = time.perf_counter()
                    fut = dcp.async_save(SRC, storage_writer=writer, checkpoint_id=prev)
                else:
                    prev = fresh(name)
                    w = dcp.FileSystemWriter(prev, single_file_per_rank=True, sync_files=True)
                    start = time.perf_counter()
                    fut = dcp.async_save(SRC, storage_writer=w)
                returned = time.perf_counter()
                result = getattr(fut, "upload_completion", fut)
                result.result()
                done = time.perf_counter()
                state.set_iteration_time(returned - start)
                blocking.append(returned - start)
                totals.append(done - start)
                del fut, result
            meter.stop(state)
            zero_dest()
            if into_rocksdcp:
                rocksdcp_load((store_path(), prev))
                delete_checkpoint(prev)
            else:
                fs_load(prev)
                remove(prev)
            verify(name)
            n = len(blocking)
            _report(state, blocking, extra={
                "blocking_ms": 1000 * sum(blocking) / n,
                "total_ms": 1000 * sum(totals) / n,
                "total_MBps": TOTAL * n / sum(totals) / 1e6})
        except Exception as e:  # pragma: no cover
            state.skip_with_error("{}: {!r}".format(name, e))
    return bm


# ---- Registration ----

def memcpy_case(threads):
    """memcpy of every tensor into the destination, the tensors shared out
    between ``threads`` threads (ctypes lets go of the GIL): how fast this
    machine copies the state dict's bytes from warm memory at all, the
    limit of any warm load."""
    def bm(state):
        memcpy_run(state, threads)
    return bm


def memcpy_run(state, threads):
    try:
        zero_dest()
        meter = RssMeter().start()
        times = []
        keys = list(DEST)

        def copy(share):
            for k in share:
                t = DEST[k]
                _memmove(t.data_ptr(), SRC[k].data_ptr(), t.numel() * t.element_size())
        while state:
            start = time.perf_counter()
            workers = [threading.Thread(target=copy, args=(keys[i::threads],))
                       for i in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            elapsed = time.perf_counter() - start
            state.set_iteration_time(elapsed)
            times.append(elapsed)
        meter.stop(state)
        verify("BM_Memcpy")
        _report(state, times, extra={"cold": 0})
    except Exception as e:  # pragma: no cover
        state.skip_with_error("BM_Memcpy: {!r}".format(e))


def register_all():
    cases = []

    def keep_raw(p):
        old = CHECKPOINTS.get("raw")
        CHECKPOINTS["raw"] = p
        if old != p:
            remove(old)

    def keep(kind):
        def after(p):
            old = CHECKPOINTS.get(kind)
            CHECKPOINTS[kind] = p
            if old != p:
                remove(old)
        return after

    def direct_after(what):
        def after(p):
            check_file(p, what)
            remove(p)
        return after

    # raw
    cases.append(("BM_RawWriteFsync", save_case("BM_RawWriteFsync", raw_write, keep_raw)))
    for k in (1, 2, 4):
        name = "BM_RawWriteDirect/writers:{}".format(k)
        cases.append((name, save_case("rawdirect", lambda p, k=k: raw_write_direct(p, k),
                                      direct_after(name))))
    for cold in (0, 1):
        name = "BM_RawRead/cold:{}".format(cold)
        cases.append((name, load_case(name, raw_file, raw_read, cold)))
    for qd in (1, 2, 4, 8):
        name = "BM_RawReadDirect/qd:{}".format(qd)
        cases.append((name, load_case(name, raw_file,
                                      lambda p, qd=qd: raw_read_direct(p, qd), True)))
    for threads in sorted({1, torch.get_num_threads()}):
        cases.append(("BM_Memcpy/threads:{}".format(threads), memcpy_case(threads)))
    # torch DCP into FileSystemWriter
    for n in (1, 2, 4):
        name = "BM_DcpFsSave/threads:{}".format(n)
        cases.append((name, save_case("fs", lambda p, n=n: fs_save(p, n),
                                      keep("fs") if n == 1 else None)))
    for cold in (0, 1):
        name = "BM_DcpFsLoad/cold:{}".format(cold)
        cases.append((name, load_case(name, fs_checkpoint, fs_load, cold)))
    # torch.save
    cases.append(("BM_TorchSave", save_case("torch", torch_save, keep("torch"))))
    for cold in (0, 1):
        name = "BM_TorchLoad/cold:{}".format(cold)
        cases.append((name, load_case(name, torch_file, torch_load, cold, drop_loaded)))
    # safetensors
    cases.append(("BM_SafetensorsSave", save_case("st", st_save, keep("safetensors"))))
    for cold in (0, 1):
        name = "BM_SafetensorsLoad/cold:{}".format(cold)
        cases.append((name, load_case(name, st_file, st_load, cold, drop_loaded)))
    # rocksdcp
    cases.append(("BM_RocksdcpSave", rocksdcp_save_case()))
    for cold in (0, 1):
        name = "BM_RocksdcpLoad/cold:{}".format(cold)
        cases.append((name, load_case(name, rocksdcp_checkpoint, rocksdcp_load, cold)))
    # async
    cases.append(("BM_AsyncSaveFs", async_case("BM_AsyncSaveFs", False)))
    cases.append(("BM_AsyncSaveRocksdcp", async_case("BM_AsyncSaveRocksdcp", True)))

    for name, fn in cases:
        opts = benchmark.option.iterations(ARGS.iterations)(fn)
        opts = benchmark.option.use_manual_time()(opts)
        opts = benchmark.option.unit(benchmark.kMillisecond)(opts)
        benchmark.register(opts, name=name)


def main():
    global ARGS, ROOT, SRC, DEST, TOTAL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
    parser.add_argument("--bench_dir", default=None,
                        help="where the benchmark's fresh directory goes (default: $TMPDIR)")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=1280)
    parser.add_argument("--layers", type=int, default=28)
    parser.add_argument("--rss_sample_ms", type=float, default=5,
                        help="period of the anon/file RSS sampler; 0: VmHWM only")
    parser.add_argument("--torch_threads", type=int, default=0,
                        help="torch.set_num_threads (default 0: torch's own choice)")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark directory")
    parser.add_argument("--help_torch2", action="store_true")
    ARGS, rest = parser.parse_known_args()
    if ARGS.help_torch2:
        print(__doc__)
        parser.print_help()
        return 0

    if ARGS.torch_threads > 0:
        torch.set_num_threads(ARGS.torch_threads)
    start = time.perf_counter()
    SRC = llama_state_dict(ARGS.hidden, ARGS.layers)
    DEST = {k: torch.zeros_like(v) for k, v in SRC.items()}
    TOTAL = sum(t.numel() * t.element_size() for t in SRC.values())
    built_s = time.perf_counter() - start
    ROOT = tempfile.mkdtemp(prefix="torch2-bench-", dir=ARGS.bench_dir)
    dtypes = {}
    for t in SRC.values():
        dtypes[str(t.dtype)] = dtypes.get(str(t.dtype), 0) + t.numel() * t.element_size()
    print("# torch2_bench: {:.0f} MiB in {} tensors ({}), built in {:.1f} s; {} iterations "
          "per case; in {}; load average {:.2f} {:.2f} {:.2f}".format(
              TOTAL / MIB, len(SRC),
              ", ".join("{} {:.0f} MiB".format(k[6:], v / MIB) for k, v in dtypes.items()),
              built_s, ARGS.iterations, ROOT, *os.getloadavg()), file=sys.stderr)

    benchmark.initialize([sys.argv[0]] + rest)
    for k, v in (("bytes", TOTAL), ("tensors", len(SRC)), ("torch", torch.__version__),
                 ("safetensors", safetensors.__version__), ("hidden", ARGS.hidden),
                 ("layers", ARGS.layers), ("iterations", ARGS.iterations),
                 ("torch_threads", torch.get_num_threads()),
                 ("bench_dir", ROOT), ("loadavg_start", " ".join(
                     "{:.2f}".format(x) for x in os.getloadavg()))):
        benchmark.add_custom_context("torch2_bench." + k, str(v))
    register_all()
    try:
        benchmark.run_benchmarks()
    finally:
        print("# torch2_bench: load average at the end {:.2f} {:.2f} {:.2f}".format(
            *os.getloadavg()), file=sys.stderr)
        if not ARGS.keep:
            shutil.rmtree(ROOT, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
