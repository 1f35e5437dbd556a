#!/usr/bin/env python3
"""plot_bench.py — turns gpucoll-bench (or gpucoll-lua sweep) CSVs into a bus-bandwidth plot with the
speed-up over NCCL, and a small-size latency plot.

usage: plot_bench.py [--placement oop|inplace] [--title T] CSV [CSV ...] OUT.png
Writes OUT.png (busbw vs size, log2 x, one panel per collective, NCCL/gpucoll time ratio on the
right axis) and OUT-latency.png (time in us for sizes up to 1 MiB).

Two layouts are read, told apart by the header:
  gpucoll-bench --csv: coll,lib,placement,bytes,count,dtype,...,time_us,algbw_GBps,busbw_GBps,wrong,...
  gpucoll-lua sweep:   coll,algo,bytes,count,dtype,time_us,algbw_GBps,busbw_GBps,wrong
In the sweep layout each algo is its own series; algo "nccl" is NCCL.
"""
import argparse
import csv
import os
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

LATENCY_MAX_BYTES = 1 << 20
COLL_ORDER = ["allreduce", "reducescatter", "allgather", "broadcast"]


def human_bytes(b):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div:
            v = b / div
            return ("%d" % v if v == int(v) else "%.3g" % v) + unit
    return "%d" % b


def read_rows(path, placement):
    """Returns a list of dicts: coll, series, bytes, time_us, busbw, wrong, nranks, dtype."""
    rows = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        fields = set(reader.fieldnames or [])
        bench = {"lib", "placement"} <= fields
        sweep = not bench and {"coll", "algo", "bytes", "time_us", "busbw_GBps"} <= fields
        if not bench and not sweep:
            sys.exit("plot_bench.py: %s: unknown CSV layout (header: %s)" % (path, ",".join(reader.fieldnames or [])))
        for r in reader:
            try:
                t = float(r["time_us"])
                nbytes = int(r["bytes"])
            except (KeyError, ValueError):
                continue
            if t <= 0 or nbytes <= 0:
                continue
            if bench:
                if r["placement"] != placement:
                    continue
                series = "NCCL" if r["lib"] == "nccl" else "gpucoll"
                if r["lib"] != "nccl" and r.get("algo") and r["algo"] != "auto":
                    series = "gpucoll (%s)" % r["algo"]
            else:
                series = "NCCL" if r["algo"] == "nccl" else "gpucoll %s" % r["algo"]
            rows.append({
                "coll": r["coll"],
                "series": series,
                "bytes": nbytes,
                "time_us": t,
                "busbw": float(r["busbw_GBps"]),
                "algbw": float(r.get("algbw_GBps") or 0),
                "wrong": r.get("wrong", ""),
                "nranks": r.get("nranks", ""),
                "dtype": r.get("dtype", ""),
            })
    return rows


def by_series(rows):
    """coll -> series -> sorted [(bytes, row)]; a repeated (series, bytes) keeps the best time."""
    out = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        cur = out[r["coll"]][r["series"]].get(r["bytes"])
        if cur is None or r["time_us"] < cur["time_us"]:
            out[r["coll"]][r["series"]][r["bytes"]] = r
    return {c: {s: sorted(d.items()) for s, d in ss.items()} for c, ss in out.items()}


def partner(name):
    """The NCCL series a gpucoll series is compared with: same job size suffix (" x4")."""
    m = re.search(r" x\d+$", name)
    return "NCCL" + (m.group(0) if m else "")


def series_style(name, i):
    if name.startswith("NCCL"):
        grays = ["tab:gray", "black", "silver"]
        return {"color": grays[i % len(grays)], "marker": "s", "linestyle": "--"}
    colors = ["tab:blue", "tab:green", "tab:purple", "tab:orange", "tab:brown", "tab:olive"]
    return {"color": colors[i % len(colors)], "marker": "o", "linestyle": "-"}


def panels(n):
    cols = 1 if n == 1 else 2
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(7.5 * cols, 4.8 * rows), squeeze=False)
    flat = [a for row in axes for a in row]
    for a in flat[n:]:
        a.set_visible(False)
    return fig, flat[:n]


def log2_axis(ax):
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human_bytes(v)))
    ax.set_xlabel("size (bytes)")
    ax.grid(True, which="major", alpha=0.3)


def ordered(colls):
    return sorted(colls, key=lambda c: (COLL_ORDER.index(c) if c in COLL_ORDER else 99, c))


def describe(rows):
    ranks = sorted({r["nranks"] for r in rows if r["nranks"]})
    dtypes = sorted({r["dtype"] for r in rows if r["dtype"]})
    parts = []
    if ranks:
        parts.append("%s ranks" % "/".join(ranks))
    if dtypes:
        parts.append("/".join(dtypes))
    return ", ".join(parts)


def plot_bandwidth(data, out, title):
    colls = ordered(data)
    fig, axes = panels(len(colls))
    for ax, coll in zip(axes, colls):
        series = data[coll]
        names = sorted(series, key=lambda s: (s.startswith("NCCL"), s))
        # One rank: nccl-tests' bus factor is 0 for every collective but broadcast, so such a panel
        # shows the algorithm bandwidth instead, and says so.
        key = "busbw"
        if all(r["busbw"] == 0 for name in names for _, r in series[name]):
            key = "algbw"
        for i, name in enumerate(names):
            pts = series[name]
            ax.plot([b for b, _ in pts], [r[key] for _, r in pts], label="%s %s" % (name, key),
                    **series_style(name, i))
        log2_axis(ax)
        ax.set_ylabel("bus bandwidth (GB/s)" if key == "busbw" else
                      "algorithm bandwidth (GB/s; busbw is 0 on one rank)")
        ax.set_title(coll)
        handles, labels = ax.get_legend_handles_labels()
        # Speed-up of each gpucoll series over NCCL at the sizes both have.
        pairs = [(i, name, partner(name)) for i, name in enumerate(names)
                 if not name.startswith("NCCL") and partner(name) in series]
        if pairs:
            ax2 = ax.twinx()
            for i, name, nccl_name in pairs:
                nccl = dict(series[nccl_name])
                pts = [(b, nccl[b]["time_us"] / r["time_us"]) for b, r in series[name] if b in nccl]
                if pts:
                    st = series_style(name, i)
                    ax2.plot([b for b, _ in pts], [s for _, s in pts], color=st["color"], marker="^",
                             linestyle=":", alpha=0.8, label="speed-up %s vs NCCL" % name)
            ax2.axhline(1.0, color="tab:red", linewidth=0.8, alpha=0.5)
            ax2.set_ylabel("speed-up (NCCL time / gpucoll time)")
            lo, hi = ax2.get_ylim()
            ax2.set_ylim(0, max(hi, 1.2))
            h2, l2 = ax2.get_legend_handles_labels()
            handles += h2
            labels += l2
        ax.legend(handles, labels, fontsize=8, loc="upper left")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def plot_latency(data, out, title):
    colls = ordered(data)
    fig, axes = panels(len(colls))
    for ax, coll in zip(axes, colls):
        series = data[coll]
        names = sorted(series, key=lambda s: (s.startswith("NCCL"), s))
        for i, name in enumerate(names):
            pts = [(b, r) for b, r in series[name] if b <= LATENCY_MAX_BYTES]
            if not pts:
                continue
            ax.plot([b for b, _ in pts], [r["time_us"] for _, r in pts], label=name, **series_style(name, i))
        log2_axis(ax)
        ax.set_ylabel("time per call (us)")
        times = [r["time_us"] for name in names for b, r in series[name] if b <= LATENCY_MAX_BYTES]
        if times and max(times) > 20 * min(times):
            ax.set_yscale("log")  # a host-path sweep spans decades; a GPU one stays linear
        else:
            ax.set_ylim(bottom=0)
        ax.set_title("%s, sizes <= 1 MiB" % coll)
        if times:
            ax.legend(fontsize=8, loc="upper left")
        else:
            ax.text(0.5, 0.5, "no sizes <= 1 MiB", transform=ax.transAxes, ha="center")
    if title:
        fig.suptitle(title + " — latency")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def latency_name(out):
    root, ext = os.path.splitext(out)
    return root + "-latency" + (ext or ".png")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--placement", choices=["oop", "inplace"], default="oop",
                    help="which of gpucoll-bench's placements to plot (default oop)")
    ap.add_argument("--title", default=None, help="figure title (default: from the data)")
    ap.add_argument("csv", nargs="+", help="CSV files, then the output PNG")
    args = ap.parse_args(argv)
    if len(args.csv) < 2:
        ap.error("need at least one CSV and the output PNG")
    inputs, out = args.csv[:-1], args.csv[-1]
    if not out.lower().endswith(".png"):
        ap.error("the last argument is the output and must end in .png: %s" % out)
    rows = []
    for path in inputs:
        rows += read_rows(path, args.placement)
    if not rows:
        sys.exit("plot_bench.py: no timed rows in %s" % ", ".join(inputs))
    title = args.title
    if title is None:
        title = "gpucoll vs NCCL" if any(r["series"] == "NCCL" for r in rows) else "gpucoll"
        d = describe(rows)
        if d:
            title += " (%s)" % d
    if len({r["nranks"] for r in rows}) > 1:  # several job sizes in one figure: keep them apart
        for r in rows:
            r["series"] += " x%s" % r["nranks"]
    data = by_series(rows)
    plot_bandwidth(data, out, title)
    plot_latency(data, latency_name(out), title)
    wrong = sum(int(r["wrong"]) for r in rows if str(r["wrong"]).lstrip("-").isdigit() and int(r["wrong"]) > 0)
    print("plot_bench.py: %s, %s (%d rows%s)" % (out, latency_name(out), len(rows),
                                                 ", %d wrong elements in the data!" % wrong if wrong else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
