#!/usr/bin/env python3
"""plot_bench.py — plots the CSVs of gpucoll-bench --csv, the gpucoll-lua sweep and
scripts/torch_compare.py, which share one schema (SCHEMA below).

usage: plot_bench.py [--placement oop|inplace] [--title T] CSV [CSV ...] OUT.png
       plot_bench.py --check-schema CSV [CSV ...]

Writes OUT.png (bus bandwidth against size, one panel per collective) and OUT-latency.png (time per
call against size, sizes up to 1 MiB when there are any). Every panel has the same axes: size on a
log2 axis with a tick at each measured size, bus bandwidth on a linear axis, time on a log axis.
A series is one (lib, mode) pair: gpucoll's algorithm, NCCL's buffer mode, the MPI function, a
torch path. The title names the collectives, dtypes, ranks, devices, buffers and library versions.

--check-schema exits 0 when every CSV's header is SCHEMA, else 1 naming the file.
"""
import argparse
import csv
import os
import sys
from collections import defaultdict

SCHEMA = ["coll", "lib", "mode", "placement", "bytes", "count", "dtype", "op", "root", "nranks",
          "device", "buffers", "graph", "iters", "warmup", "time_us", "algbw_GBps", "busbw_GBps",
          "wrong", "speedup", "version"]
LATENCY_MAX_BYTES = 1 << 20
COLL_ORDER = ["allreduce", "reducescatter", "allgather", "broadcast", "rmsnorm"]
MAX_TICK_LABELS = 12


def read_csv(path):
    """The rows of one CSV as dicts; exits with a message when its header is not SCHEMA."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != SCHEMA:
            sys.exit("plot_bench.py: %s: header is not the bench schema (%s)" % (path, ",".join(SCHEMA)))
        return list(reader)


def human_bytes(b):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div:
            v = b / div
            return ("%d" % v if v == int(v) else "%.3g" % v) + unit
    return "%d" % b


def measured(rows, placement):
    """(coll, series) -> sorted [(bytes, time_us, busbw)], and the rows kept."""
    series, kept = defaultdict(list), []
    for r in rows:
        if r["placement"] != placement:
            continue
        try:
            nbytes, t, bw = int(r["bytes"]), float(r["time_us"]), float(r["busbw_GBps"])
        except ValueError:
            continue
        if nbytes <= 0 or t <= 0:
            continue
        series[(r["coll"], "%s %s" % (r["lib"], r["mode"]))].append((nbytes, t, bw))
        kept.append(r)
    for points in series.values():
        points.sort()
    return series, kept


def describe(rows, title):
    """The plot's title: what was measured, where, with which libraries."""
    def values(key):
        return ",".join(sorted({r[key] for r in rows if r[key]}))
    versions = sorted({"%s %s" % (r["lib"], r["version"]) for r in rows if r["version"]})
    head = title or "%s, %s" % (values("coll"), values("dtype"))
    return "%s\n%s ranks on %s, buffers %s\n%s" % (head, values("nranks"), values("device"),
                                                    values("buffers"), "; ".join(versions))


def size_ticks(ax, sizes):
    """A tick at every measured size, labels thinned so that at most MAX_TICK_LABELS show."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    step = max(1, (len(sizes) + MAX_TICK_LABELS - 1) // MAX_TICK_LABELS)
    ax.set_xticklabels([human_bytes(s) if i % step == 0 else "" for i, s in enumerate(sizes)],
                       rotation=45, ha="right")
    ax.minorticks_off()


def plot(series, colls, title, out, latency):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(colls), 1, figsize=(9, 4 * len(colls)), squeeze=False)
    for ax, coll in zip(axes[:, 0], colls):
        sizes = set()
        for (c, name), points in sorted(series.items()):
            if c != coll:
                continue
            if latency:
                small = [p for p in points if p[0] <= LATENCY_MAX_BYTES]
                points = small or points
            sizes.update(p[0] for p in points)
            ax.plot([p[0] for p in points], [p[1] if latency else p[2] for p in points], marker="o",
                    label=name)
        size_ticks(ax, sorted(sizes))
        if latency:
            ax.set_yscale("log")
        ax.set_ylabel("time per call (us)" if latency else "bus bandwidth (GB/s)")
        ax.set_xlabel("size (bytes, nccl-tests' meaning)")
        ax.set_title(coll)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout(rect=(0, 0, 1, 0.94 if len(colls) == 1 else 0.97))
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--placement", choices=("oop", "inplace"), default="oop")
    ap.add_argument("--title", default="")
    ap.add_argument("--check-schema", action="store_true")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    if a.check_schema:
        for path in a.files:
            read_csv(path)
        return 0
    if len(a.files) < 2:
        ap.error("want CSV [CSV ...] OUT.png")
    out = a.files[-1]
    rows = [r for path in a.files[:-1] for r in read_csv(path)]
    series, kept = measured(rows, a.placement)
    if not series:
        sys.exit("plot_bench.py: no %s rows with a time in %s" % (a.placement, ", ".join(a.files[:-1])))
    colls = sorted({c for c, _ in series}, key=lambda c: (COLL_ORDER + [c]).index(c))
    title = describe(kept, a.title)
    plot(series, colls, title, out, latency=False)
    root, ext = os.path.splitext(out)
    plot(series, colls, title, root + "-latency" + (ext or ".png"), latency=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
