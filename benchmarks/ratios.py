#!/usr/bin/env python3
"""Prints rocksdcp's benchmark throughput as ratios to the raw-file baseline.

Usage:
  build/benchmarks/rocksdcp_bench --benchmark_format=json > out.json
  python3 benchmarks/ratios.py out.json

Each BM_Save* case is paired with the BM_RawFileWriteFsync case of the same
bytes per iteration, and each BM_Load* case with the BM_RawFileRead case of
the same bytes and the same cold/warm setting (the `bytes` and `cold`
counters the benchmark sets). A ratio of 1.0 means rocksdcp moves bytes as
fast as plain write()+fsync() or read() of one file. BM_SaveRanks and
BM_LoadRanks report the bytes of the whole state dict (all ranks), so they
pair with the baseline of those bytes like BM_SaveLarge and BM_LoadLarge.

With --benchmark_repetitions, the median aggregate is used. Standard library
only.
"""

import argparse
import json
import statistics
import sys


def load_runs(path):
    """Returns {run_name: entry}, one entry per benchmark case."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    iterations = {}
    medians = {}
    for b in data.get("benchmarks", []):
        name = b.get("run_name", b["name"])
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[name] = b
        else:
            iterations.setdefault(name, []).append(b)
    runs = {}
    for name, entries in iterations.items():
        if name in medians:
            runs[name] = medians[name]
            continue
        entry = dict(entries[0])
        ok = [e for e in entries if not e.get("error_occurred")]
        if ok:
            for key in ("bytes_per_second", "items_per_second"):
                if all(key in e for e in ok):
                    entry[key] = statistics.mean(e[key] for e in ok)
        runs[name] = entry
    return data.get("context", {}), runs


def kind(name):
    """'write', 'read' or None, and whether it is the raw baseline."""
    op = name.split("/", 1)[0]
    if op == "BM_RawFileWriteFsync":
        return "write", True
    if op == "BM_RawFileRead":
        return "read", True
    if op.startswith("BM_Save"):
        return "write", False
    if op.startswith("BM_Load"):
        return "read", False
    return None, False


def key(entry, op):
    return (op, entry.get("bytes"), entry.get("cold") if op == "read" else None)


def mbps(entry):
    v = entry.get("bytes_per_second")
    return None if v is None else v / 1e6


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def fmt_rate(v):
    # Raw baselines count one item (the file) per iteration: keep decimals
    # where the rate is small.
    if v is None:
        return "-"
    return format(v, ".0f") if v >= 100 else format(v, ".2f")


def short(name):
    # Google Benchmark appends these to every name; they add nothing here.
    for suffix in ("/real_time",):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    parts = [p for p in name.split("/") if not p.startswith("iterations:")]
    return "/".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="rocksdcp_bench --benchmark_format=json output")
    args = parser.parse_args()

    try:
        context, runs = load_runs(args.json)
    except (OSError, ValueError, KeyError) as e:
        print("ratios.py: cannot read {}: {}".format(args.json, e), file=sys.stderr)
        return 1
    baselines = {}
    for name, entry in runs.items():
        op, raw = kind(name)
        if raw and not entry.get("error_occurred"):
            baselines[key(entry, op)] = entry

    rows = []
    for name, entry in runs.items():
        op, raw = kind(name)
        if op is None:
            continue
        if entry.get("error_occurred"):
            rows.append((short(name), None, None, "ERROR: " + entry.get("error_message", ""), None))
            continue
        if raw:
            rows.append((short(name), mbps(entry), entry.get("items_per_second"), "(baseline)", None))
            continue
        base = baselines.get(key(entry, op))
        ratio = None
        if base is not None and base.get("bytes_per_second"):
            ratio = entry["bytes_per_second"] / base["bytes_per_second"]
        rows.append((short(name), mbps(entry), entry.get("items_per_second"),
                     short(base["run_name"]) if base else "(no baseline)", ratio))

    if not rows:
        print("no rocksdcp_bench results in " + args.json, file=sys.stderr)
        return 1

    headers = ("benchmark", "MB/s", "items/s", "vs", "ratio")
    table = [(n, fmt(m, ".0f"), fmt_rate(i), v, fmt(r, ".2f")) for n, m, i, v, r in rows]
    widths = [max(len(h), *(len(row[c]) for row in table)) for c, h in enumerate(headers)]
    align = ("<", ">", ">", "<", ">")

    def line(cells):
        return "| " + " | ".join(format(c, a + str(w)) for c, a, w in zip(cells, align, widths)) + " |"

    if context:
        print("# {} on {} CPUs, {}".format(context.get("date", "?"), context.get("num_cpus", "?"),
                                        context.get("library_build_type", "?") + " libbenchmark"))
    print(line(headers))
    print("|" + "|".join(("-" * (w + 1) + ":") if a == ">" else ("-" * (w + 2)) for a, w in zip(align, widths)) + "|")
    for row in table:
        print(line(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
