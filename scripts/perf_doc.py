#!/usr/bin/env python3
"""perf_doc.py — docs/performance.md's tables and figures from docs/data, docs/data from bench CSVs.

usage: perf_doc.py tables [--data DIR]
       perf_doc.py check [--data DIR] DOC
       perf_doc.py figures [--data DIR] OUT_DIR
       perf_doc.py import [--data DIR] [--variant TEXT] [--gpus N] BENCH_CSV [BENCH_CSV ...]

tables   prints the markdown tables of each section of docs/performance.md that the CSVs feed
         (all-reduce, reduce-scatter, all-gather, broadcast, the fused all-reduce + RMSNorm + FP8).
check    exits 0 when the tables of those sections of DOC are exactly the ones `tables` prints and
         every CSV row is sound (header, wrong = 0, bandwidths that follow from size and time);
         else prints the first difference and exits 1.
figures  draws the five PNGs of docs/performance.md into OUT_DIR.
import   merges the rows of gpucoll-bench --csv files into DIR/<collective>.csv: a row replaces the
         one with the same key (collective .. algo), and the file stays in its order.
DIR (the CSVs) is docs/data unless --data names another.
"""
import argparse
import collections
import csv
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_bench import SCHEMA as BENCH_SCHEMA  # noqa: E402  (one bench schema for every reader)

DATA_SCHEMA = ["collective", "variant", "dtype", "ranks", "gpus", "gpu_model", "bytes", "placement",
               "impl", "algo", "time_us", "algbw_gbs", "busbw_gbs", "wrong"]
KEY = DATA_SCHEMA[:10]
OOP, INPLACE = "out_of_place", "in_place"
FUSED = "allreduce_rmsnorm_fp8"
# (section heading in docs/performance.md, collective, CSV file)
SECTIONS = [("all-reduce", "allreduce", "allreduce.csv"),
            ("reduce-scatter", "reducescatter", "reducescatter.csv"),
            ("all-gather", "allgather", "allgather.csv"),
            ("broadcast", "broadcast", "broadcast.csv"),
            ("Fused all-reduce + RMSNorm + FP8", FUSED, "rmsnorm.csv")]
SUMMARY_SIZES = (1 << 10, 1 << 16, 1 << 26, 1 << 30)  # latency at the first two, busbw at the rest
FIGURE_GPUS = (2, 4, 8)
FIGURE_COLOURS = {2: "tab:blue", 4: "tab:green", 8: "tab:red"}
LATENCY_MAX_BYTES = 1 << 20
UNITS = (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10))
# The tables and figures set gpucoll's own choice ('auto') against NCCL's plain calls; rows of other
# algorithms and buffer modes stay in the CSVs without entering them.
SHOWN_ALGO = {"gpucoll": "auto", "nccl": "nccl", "nccl_unfused": "nccl_unfused"}
Run = collections.namedtuple("Run", "variant dtype ranks gpus model")


def fail(msg):
    sys.exit("perf_doc.py: " + msg)


# ---- reading docs/data -------------------------------------------------------------------------

def read_data(data_dir, name):
    """The rows of one docs/data CSV; exits when its header is not DATA_SCHEMA."""
    path = os.path.join(data_dir, name)
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != DATA_SCHEMA:
            fail("%s: header is not %s" % (path, ",".join(DATA_SCHEMA)))
        return list(reader)


def short_model(model):
    """'NVIDIA H100 80GB HBM3' -> 'H100': the name the tables' GPU column uses."""
    words = model.split()
    return words[1] if words[0] == "NVIDIA" and len(words) > 1 else words[0]


def groups(rows):
    """[(Run, {(placement, impl): {bytes: row}})] of the rows SHOWN_ALGO names, in the tables'
    order: the multi-GPU runs by model (as the CSV first names it) and GPU count, then the one-GPU
    runs."""
    models = list(dict.fromkeys(r["gpu_model"] for r in rows))
    out = {}
    for r in rows:
        if SHOWN_ALGO.get(r["impl"]) != r["algo"]:
            continue
        g = out.setdefault(Run(r["variant"], r["dtype"], int(r["ranks"]), int(r["gpus"]), r["gpu_model"]), {})
        g.setdefault((r["placement"], r["impl"]), {})[int(r["bytes"])] = r
    order = sorted(out, key=lambda k: (k.gpus == 1, models.index(k.model), k.gpus, k.ranks))
    return [(k, out[k]) for k in order]


def times(series):
    """{bytes: time per call} of one series."""
    return {b: float(r["time_us"]) for b, r in series.items()}


def cell(series, b, field, fmt):
    """One number of a table; '-' where the run lacks that size."""
    return fmt(float(series[b][field])) if b in series else "-"


# ---- number formats ----------------------------------------------------------------------------

def size_label(nbytes):
    """1K .. 1G; a size a few bytes short of a power of two (whole parts on 3 GPUs) takes that
    power's name, but one under 1K keeps its bytes, as the detail tables print 1020."""
    if nbytes < 1024:
        return "%d" % nbytes
    for unit, div in UNITS:
        v = nbytes / div
        if round(v) >= 1 and abs(v - round(v)) <= 0.01 * v:
            return "%d%s" % (round(v), unit)
    unit, div = next((u, d) for u, d in UNITS if nbytes >= d)
    return "%.3g%s" % (nbytes / div, unit)


def fmt_fixed(v, digits):
    """`digits` decimals below 1000, none from there on (2780, 735.29; 2020, 326.9)."""
    s = "%.*f" % (digits, v)
    return "%.0f" % v if float(s) >= 1000 else s


def fmt_us(v):
    return fmt_fixed(v, 2)


def fmt_bw(v):
    return fmt_fixed(v, 1)


def fmt_x(v):
    return "%.2fx" % v


def speedups(gc, other):
    """NCCL's (or the unfused pipeline's) time over gpucoll's at each size both measured."""
    return {b: other[b] / gc[b] for b in sorted(gc) if b in other}


def near(sizes, want):
    """The measured size whose power of two is want (1020 stands for 1K on 3 GPUs)."""
    for b in sizes:
        if b > 0 and round(math.log2(b)) == round(math.log2(want)):
            return b
    return None


def table(head, rows):
    """A markdown table, every column right-aligned."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


# ---- the tables --------------------------------------------------------------------------------

SUMMARY_HEAD = ["GPUs", "1K us (gpucoll / NCCL)", "64K us (gpucoll / NCCL)",
                "64M busbw GB/s (gpucoll / NCCL)", "1G busbw GB/s (gpucoll / NCCL)",
                "speed-up, geometric mean (min - max)"]


def bandwidth_column(gpus):
    """One GPU moves nothing between GPUs (busbw 0, but for broadcast), so its tables show algbw."""
    return "algbw_gbs" if gpus == 1 else "busbw_gbs"


def summary_row(run, g):
    """One line of a collective's summary table: out of place, the SUMMARY_SIZES, and the speed-up
    over every size both sides measured."""
    gc, nccl = g.get((OOP, "gpucoll"), {}), g.get((OOP, "nccl"), {})
    col = bandwidth_column(run.gpus)
    cells = ["%d x %s" % (run.gpus, short_model(run.model))]
    for i, want in enumerate(SUMMARY_SIZES):
        b = near(sorted(gc), want)
        fmt, field = (fmt_us, "time_us") if i < 2 else (fmt_bw, col)
        cells.append("%s / %s" % (cell(gc, b, field, fmt), cell(nccl, b, field, fmt)))
    x = list(speedups(times(gc), times(nccl)).values())
    if not x:
        return cells + ["-"]
    mean = math.exp(sum(math.log(v) for v in x) / len(x))
    return cells + ["%s (%.2f - %.2f)" % (fmt_x(mean), min(x), max(x))]


def detail_table(run, g, other="nccl", name="NCCL"):
    """Every size of one run that both sides measured: times, speed-up and bandwidths out of
    place, and the in-place speed-up where in place was timed and moves data (more than one GPU)."""
    col = bandwidth_column(run.gpus)
    bw = col.split("_")[0]
    head = ["size", "gpucoll us", "%s us" % name, "speed-up", "gpucoll %s GB/s" % bw,
            "%s %s GB/s" % (name, bw)]
    gc, them = g.get((OOP, "gpucoll"), {}), g.get((OOP, other), {})
    x = speedups(times(gc), times(them))
    x_in = speedups(times(g.get((INPLACE, "gpucoll"), {})), times(g.get((INPLACE, other), {})))
    in_place = run.gpus > 1 and bool(x_in)
    if in_place:
        head.append("in place speed-up")
    rows = []
    for b in x:
        row = [size_label(b), cell(gc, b, "time_us", fmt_us), cell(them, b, "time_us", fmt_us), fmt_x(x[b]),
               cell(gc, b, col, fmt_bw), cell(them, b, col, fmt_bw)]
        rows.append(row + ([fmt_x(x_in[b]) if b in x_in else "-"] if in_place else []))
    return table(head, rows)


def section_tables(data_dir, collective, name):
    """[(caption, table lines)] of one section, in the order docs/performance.md shows them: the
    collectives' summary and a table per run; the fused op's table per shape, against the unfused
    pipeline."""
    gs = groups(read_data(data_dir, name))
    if collective == FUSED:
        return [("%d x %s, %s" % (k.gpus, k.model, k.variant), detail_table(k, g, "nccl_unfused", "unfused"))
                for k, g in gs]
    out = [("summary", table(SUMMARY_HEAD, [summary_row(k, g) for k, g in gs]))]
    return out + [("%d x %s" % (k.gpus, k.model), detail_table(k, g)) for k, g in gs]


def cmd_tables(a):
    for heading, collective, name in SECTIONS:
        print("## %s\n" % heading)
        for caption, lines in section_tables(a.data, collective, name):
            print("### %s\n\n%s\n" % (caption, "\n".join(lines)))
    return 0


# ---- check -------------------------------------------------------------------------------------

def bus_factor(collective, n):
    """nccl-tests' busbw / algbw, as gpucoll-bench computes it (the fused op's is all-reduce's)."""
    if collective in ("allreduce", FUSED):
        return 2.0 * (n - 1) / n
    return (n - 1) / n if collective in ("reducescatter", "allgather") else 1.0


def row_problem(r):
    """Why a docs/data row is unsound, or None: it is unchecked or wrong, or its bandwidths do not
    follow from its size and time (so that an edit of any one figure of a row shows)."""
    if r["wrong"] != "0":
        return "wrong = %r: the data holds checked, right results only" % r["wrong"]
    nbytes, t = int(r["bytes"]), float(r["time_us"])
    algbw, busbw = float(r["algbw_gbs"]), float(r["busbw_gbs"])
    # The CSV rounds every figure to 3 decimals: each bound widens by half a unit of the last one.
    lo, hi = nbytes / ((t + 5e-4) * 1e3) - 5e-4, nbytes / (max(t - 5e-4, 1e-9) * 1e3) + 5e-4
    if not (t > 0 and lo <= algbw <= hi):
        return "algbw %s is not bytes / time (%d / %s us)" % (r["algbw_gbs"], nbytes, r["time_us"])
    f = bus_factor(r["collective"], int(r["ranks"]))
    if abs(busbw - algbw * f) > 5e-4 * (1 + f) + 1e-9:
        return "busbw %s is not algbw x %.4g" % (r["busbw_gbs"], f)
    return None


def data_problems(data_dir):
    out = []
    for _, _, name in SECTIONS:
        for i, r in enumerate(read_data(data_dir, name)):
            why = row_problem(r)
            if why:
                out.append("%s:%d: %s" % (os.path.join(data_dir, name), i + 2, why))
    return out


def doc_tables(lines, heading):
    """[(line number, table lines)] of the section `## heading` of the document, or None."""
    try:
        start = lines.index("## " + heading)
    except ValueError:
        return None
    out, fenced = [], False
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.startswith("## "):
            break
        fenced ^= line.startswith("```")
        if fenced or not line.startswith("|"):
            continue
        if out and out[-1][0] + len(out[-1][1]) == i + 1:
            out[-1][1].append(line)
        else:
            out.append((i + 1, [line]))
    return out


def table_difference(doc, heading, found, made):
    """The first line where the section's tables and the data's differ, as a message, or None."""
    for i in range(max(len(found), len(made))):
        if i >= len(found):
            caption, want = made[i]
            return "%s: section '## %s' lacks the data's table %s:\n  %s" % (doc, heading, caption, want[0])
        lineno, have = found[i]
        if i >= len(made):
            return "%s:%d: section '## %s' has a table the data does not give:\n  %s" % (
                doc, lineno, heading, have[0])
        caption, want = made[i]
        for j in range(max(len(have), len(want))):
            h = have[j] if j < len(have) else "(end of table)"
            w = want[j] if j < len(want) else "(end of table)"
            if h != w:
                return "%s:%d: table %s of '## %s' differs from the data:\n  document: %s\n  data:     %s" % (
                    doc, lineno + min(j, len(have)), caption, heading, h, w)
    return None


def cmd_check(a):
    problems = data_problems(a.data)
    with open(a.doc, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for heading, collective, name in SECTIONS:
        found = doc_tables(lines, heading)
        if found is None:
            problems.append("%s: no section '## %s'" % (a.doc, heading))
            continue
        diff = table_difference(a.doc, heading, found, section_tables(a.data, collective, name))
        if diff:
            problems.append(diff)
    if problems:
        print(problems[0])
        if len(problems) > 1:
            print("perf_doc.py: %d problem(s) in all; `perf_doc.py tables` prints the tables the data gives"
                  % len(problems))
        return 1
    print("perf_doc.py: %s: every table of %d sections is the data's" % (a.doc, len(SECTIONS)))
    return 0


# ---- figures -----------------------------------------------------------------------------------

def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    # The same files on every rerun: no version string in the PNG, no random ids in an SVG.
    matplotlib.rcParams["svg.hashsalt"] = "perf_doc"
    return plt


def size_axis(ax, sizes, xlabel):
    """A log2 size axis with a labelled tick at every measured size."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([size_label(b) for b in sizes], rotation=45, fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.grid(True, alpha=0.3)


def save(fig, plt, title, path, title_size):
    fig.suptitle(title, fontsize=title_size)
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)


def collective_figure(data_dir, heading, collective, name, out_dir):
    """Out of place on 2, 4 and 8 GPUs of the first model: latency up to 1M, busbw from 1M on."""
    plt = pyplot()
    gs = [(k, g) for k, g in groups(read_data(data_dir, name)) if k.gpus in FIGURE_GPUS]
    if not gs:
        fail("%s: no run on %s GPUs to draw" % (name, " / ".join(str(n) for n in FIGURE_GPUS)))
    model = gs[0][0].model
    fig, (lat, bw) = plt.subplots(1, 2, figsize=(10, 4.2))
    for run, g in gs:
        if run.model != model:
            continue
        for impl, label, style in (("gpucoll", "gpucoll", dict(marker="o")),
                                   ("nccl", "NCCL", dict(marker="s", linestyle="--", alpha=0.7))):
            series = sorted(g.get((OOP, impl), {}).items())
            small = [(b, float(r["time_us"])) for b, r in series if b <= LATENCY_MAX_BYTES]
            large = [(b, float(r["busbw_gbs"])) for b, r in series if b >= LATENCY_MAX_BYTES]
            for ax, pts in ((lat, small), (bw, large)):
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=FIGURE_COLOURS[run.gpus],
                        label="%s, %d GPUs" % (label, run.gpus), **style)
    for ax, title, ylabel in ((lat, "latency, small sizes", "time per call (us), lower is better"),
                              (bw, "bus bandwidth, large sizes", "bus bandwidth (GB/s), higher is better")):
        size_axis(ax, sorted({int(x) for line in ax.get_lines() for x in line.get_xdata()}), "size (bytes)")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
    lat.legend(fontsize=7, loc="upper left")
    title = "%s, %s, %s x %s, out of place, gpucoll (solid) and NCCL (dashed)" % (
        heading, gs[0][0].dtype, " / ".join(str(n) for n in FIGURE_GPUS), model)
    out = os.path.join(out_dir, "%s-%s.png" % (collective, short_model(model).lower()))
    save(fig, plt, title, out, 11)


def shape_name(variant):
    """'cols=8192 residual' -> 'with residual': the fused op's two shapes as the figure names them."""
    return "with residual" if "residual" in variant.split() else "no residual"


def fused_figure(data_dir, name, out_dir):
    """The fused op's shapes: time per call of both sides (log), and the speed-up at every size."""
    plt = pyplot()
    gs = groups(read_data(data_dir, name))
    fig, (lat, up) = plt.subplots(1, 2, figsize=(10, 4.2))
    for (run, g), colour in zip(gs, ("tab:blue", "tab:green")):
        shape = shape_name(run.variant)
        gc, un = times(g.get((OOP, "gpucoll"), {})), times(g.get((OOP, "nccl_unfused"), {}))
        lat.plot(sorted(gc), [gc[b] for b in sorted(gc)], color=colour, marker="o",
                 label="gpucoll fused, %s" % shape)
        lat.plot(sorted(un), [un[b] for b in sorted(un)], color=colour, marker="s", linestyle="--",
                 alpha=0.7, label="NCCL + 2 kernels, %s" % shape)
        x = speedups(gc, un)
        up.plot(list(x), list(x.values()), color=colour, marker="o", label=shape)
    sizes = sorted({int(x) for line in lat.get_lines() for x in line.get_xdata()})
    for ax, ylabel in ((lat, "time per call (us), lower is better"),
                       (up, "speed-up (unfused time / fused time)")):
        size_axis(ax, sizes, "input size (bytes)")
        ax.set_ylabel(ylabel)
    lat.set_yscale("log")
    up.set_ylim(bottom=0)
    lat.legend(fontsize=7, loc="upper left")
    up.legend(fontsize=7, loc="upper right")
    run = gs[0][0]
    cols = run.variant.split()[0].split("=")[1]
    title = "all-reduce + RMSNorm + FP8, %s, %s cols, %d x %s: fused (solid) and unfused NCCL (dashed)" % (
        run.dtype, cols, run.gpus, run.model)
    out = os.path.join(out_dir, "rmsnorm-%sx%d.png" % (short_model(run.model).lower(), run.gpus))
    save(fig, plt, title, out, 10)


def cmd_figures(a):
    data_dir, out_dir = a.data, a.out_dir
    os.makedirs(out_dir, exist_ok=True)
    for heading, collective, name in SECTIONS:
        if collective == FUSED:
            fused_figure(data_dir, name, out_dir)
        else:
            collective_figure(data_dir, heading, collective, name, out_dir)
    return 0


# ---- import ------------------------------------------------------------------------------------

PLACEMENTS = {"oop": OOP, "inplace": INPLACE}
SORT_FIELDS = ["collective", "variant", "dtype", "gpu_model", "ranks", "gpus", "bytes", "impl", "algo",
               "placement"]
NUMERIC = ("ranks", "gpus", "bytes")


def data_file(collective):
    return next((name for _, c, name in SECTIONS if c == collective), collective + ".csv")


def algo_of(r, impl):
    """gpucoll's (and MPI's) mode is the algorithm as asked ('auto' by default); NCCL's is its
    buffer mode, and the plain calls the data names after the implementation alone."""
    if not r["lib"].startswith("nccl"):
        return r["mode"]
    return impl if r["mode"] == "plain" else "%s_%s" % (impl, r["mode"])


def data_row(r, where, variant, gpus):
    """One gpucoll-bench --csv row as a docs/data row; exits on a row that must not enter the data."""
    if r["wrong"] == "":
        fail("%s: %s %s %s bytes is unchecked: run the bench with -c 1"
             % (where, r["coll"], r["lib"], r["bytes"]))
    if int(r["wrong"]) != 0:
        fail("%s: %s %s %s bytes has wrong = %s: a wrong result does not enter the data"
             % (where, r["coll"], r["lib"], r["bytes"], r["wrong"]))
    if r["placement"] not in PLACEMENTS:
        fail("%s: placement %r is neither oop nor inplace" % (where, r["placement"]))
    impl = r["lib"].replace("+", "_")
    return {"collective": FUSED if r["coll"] == "rmsnorm" else r["coll"], "variant": variant,
            "dtype": r["dtype"], "ranks": r["nranks"], "gpus": str(gpus or int(r["nranks"])),
            "gpu_model": r["device"], "bytes": r["bytes"], "placement": PLACEMENTS[r["placement"]],
            "impl": impl, "algo": algo_of(r, impl), "time_us": r["time_us"], "algbw_gbs": r["algbw_GBps"],
            "busbw_gbs": r["busbw_GBps"], "wrong": r["wrong"]}


def bench_rows(paths, variant, gpus):
    """The data rows of every bench CSV, by target file; exits on a header that is not the bench's."""
    out = {}
    for path in paths:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames != BENCH_SCHEMA:
                fail("%s: header is not the gpucoll-bench --csv schema (%s)"
                     % (path, ",".join(BENCH_SCHEMA)))
            for i, r in enumerate(reader):
                row = data_row(r, "%s:%d" % (path, i + 2), variant, gpus)
                out.setdefault(data_file(row["collective"]), []).append(row)
    return out


def sorted_rows(rows):
    """The rows in the data's order: text fields in the order the file first names them (new
    values after), numbers ascending, so that an import moves no row it does not touch."""
    rank = {f: {} for f in SORT_FIELDS if f not in NUMERIC}
    for r in rows:
        for f, seen in rank.items():
            seen.setdefault(r[f], len(seen))
    return sorted(rows, key=lambda r: [int(r[f]) if f in NUMERIC else rank[f][r[f]] for f in SORT_FIELDS])


def merge(path, new):
    """Writes path with new's rows in place of those with the same key; returns (replaced, added)."""
    old = []
    if os.path.exists(path):
        old = read_data(os.path.dirname(path), os.path.basename(path))
    rows = {tuple(r[k] for k in KEY): r for r in old}
    replaced = sum(1 for k in dict.fromkeys(tuple(r[k] for k in KEY) for r in new) if k in rows)
    for r in new:
        rows[tuple(r[k] for k in KEY)] = r
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(DATA_SCHEMA)
        w.writerows([r[k] for k in DATA_SCHEMA] for r in sorted_rows(list(rows.values())))
    return replaced, len(rows) - len(old)


def cmd_import(a):
    for name, new in sorted(bench_rows(a.bench_csv, a.variant, a.gpus).items()):
        path = os.path.join(a.data, name)
        replaced, added = merge(path, new)
        print("perf_doc.py: %s: %d row(s) replaced, %d added" % (path, replaced, added))
    return 0


# ---- command line ------------------------------------------------------------------------------

def main():
    data = argparse.ArgumentParser(add_help=False)
    here = os.path.dirname(os.path.abspath(__file__))
    data.add_argument("--data", default=os.path.join(here, "..", "docs", "data"),
                      help="the docs/data CSVs (default: this checkout's docs/data)")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("tables", parents=[data]).set_defaults(run=cmd_tables)
    p = sub.add_parser("check", parents=[data])
    p.add_argument("doc")
    p.set_defaults(run=cmd_check)
    p = sub.add_parser("figures", parents=[data])
    p.add_argument("out_dir")
    p.set_defaults(run=cmd_figures)
    p = sub.add_parser("import", parents=[data])
    p.add_argument("--variant", default="", help="the fused op's shape, e.g. 'cols=8192 residual'")
    p.add_argument("--gpus", type=int, default=0, help="GPUs of the run (default: its ranks)")
    p.add_argument("bench_csv", nargs="+")
    p.set_defaults(run=cmd_import)
    a = ap.parse_args()
    return a.run(a)


if __name__ == "__main__":
    sys.exit(main())
