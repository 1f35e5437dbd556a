#!/usr/bin/env python3
"""torch_compare.py — all-reduce as torch users run it, beside gpucoll's Python binding, on the same
sizes: torch.distributed.all_reduce (NCCL backend), torch symmetric memory's one-shot and two-shot
all-reduce (torch.ops.symm_mem.one_shot_all_reduce / two_shot_all_reduce_, NVLink multicast off),
and gpucoll.Comm.allreduce. CUDA-event timing after warm-up, graph replay where the path can be
captured; rows in the CSV schema of gpucoll-bench (scripts/plot_bench.py reads both).

usage: mpirun -np N python3 scripts/torch_compare.py [-b 1K] [-e 64M] [-f 4] [-n 20] [-w 5]
           [-d float32|float16|bfloat16] [-G 0|1] [--csv FILE]
       (torchrun works too: RANK, WORLD_SIZE and LOCAL_RANK are read first, then Open MPI's)

The script sets TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NCCL_NVLS_ENABLE=0 before torch starts, and
refuses to run when either is set to another value.

Exit status: 0 measured and correct; 1 a wrong result, or a multicast switch set on; 2 a usage
error; 3 nothing measured here (torch or a GPU missing: one line on stderr, and a CSV with the
header and no rows).
"""
import argparse
import csv
import os
import sys

NOTHING_MEASURED = 3
SCHEMA = ["coll", "lib", "mode", "placement", "bytes", "count", "dtype", "op", "root", "nranks",
          "device", "buffers", "graph", "iters", "warmup", "time_us", "algbw_GBps", "busbw_GBps",
          "wrong", "speedup", "version"]
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    t = text.strip().upper().rstrip("B")
    unit = t[-1] if t and t[-1] in UNITS else ""
    try:
        value = float(t[:-1] if unit else t) * UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError("not a size: %r (examples: 8, 1K, 64M)" % text)
    if value < 1:
        raise argparse.ArgumentTypeError("a size is at least 1 byte: %r" % text)
    return int(value)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("1K"))
    ap.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("64M"))
    ap.add_argument("-f", "--stepfactor", type=int, default=4)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup_iters", type=int, default=5)
    ap.add_argument("-d", "--datatype", choices=("float32", "float16", "bfloat16"), default="float32")
    ap.add_argument("-G", "--cudagraph", type=int, choices=(0, 1), default=1)
    ap.add_argument("--csv", default="")
    a = ap.parse_args(argv)
    if a.minbytes > a.maxbytes or a.stepfactor < 2 or a.iters < 1 or a.warmup_iters < 0:
        ap.error("want -b <= -e, -f >= 2, -n >= 1, -w >= 0")
    return a


def env_rank():
    """(rank, world size, local rank) from torchrun's variables, else Open MPI's, else one rank."""
    for r, w, l in (("RANK", "WORLD_SIZE", "LOCAL_RANK"),
                    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")):
        if r in os.environ and w in os.environ:
            return int(os.environ[r]), int(os.environ[w]), int(os.environ.get(l, os.environ[r]))
    return 0, 1, 0


def multicast_off():
    """NVLink multicast stays off: both switches set to off, other values refused."""
    for name, off in (("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NCCL_NVLS_ENABLE", "0")):
        value = os.environ.setdefault(name, off)
        if value != off:
            sys.exit("torch_compare.py: %s=%s: NVLink multicast must stay off (unset it or set %s)"
                     % (name, value, off))


def open_csv(path):
    if not path:
        return None, None
    f = open(path, "w", newline="")
    w = csv.DictWriter(f, fieldnames=SCHEMA)
    w.writeheader()
    f.flush()
    return f, w


def nothing_measured(rank, why, path):
    if rank == 0:
        print("torch_compare.py: nothing measured: %s" % why, file=sys.stderr)
        f, _ = open_csv(path)
        if f:
            f.close()
    return NOTHING_MEASURED


def sizes(a, elt):
    s = a.minbytes
    while s <= a.maxbytes:
        if s // elt:
            yield s
        s *= a.stepfactor


def main(argv):
    a = parse_args(argv)
    rank, world, local = env_rank()
    multicast_off()
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        return nothing_measured(rank, "torch is not installed (%s)" % e, a.csv)
    if not torch.cuda.is_available():
        return nothing_measured(rank, "torch %s sees no CUDA GPU" % torch.__version__, a.csv)
    torch.cuda.set_device(local % torch.cuda.device_count())
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            device_id=torch.device("cuda", torch.cuda.current_device()))
    try:
        return run(a, torch, dist, rank, world)
    finally:
        dist.destroy_process_group()


def run(a, torch, dist, rank, world):
    from torch_paths import paths  # noqa: the series, next to this script
    dtype = getattr(torch, a.datatype)
    elt = torch.tensor([], dtype=dtype).element_size()
    f, w = open_csv(a.csv) if rank == 0 else (None, None)
    device = torch.cuda.get_device_name()
    factor = 2.0 * (world - 1) / world
    total_wrong = 0
    if rank == 0:
        print("# torch %s, %d ranks on %s, %s, NVLink multicast off" % (torch.__version__, world, device, a.datatype))
        print("#%11s  %-18s  %9s  %7s  %6s" % ("size", "series", "time (us)", "busbw", "#wrong"))
    for nbytes in sizes(a, elt):
        count = nbytes // elt
        rows = []
        for p in paths(torch, dist, count, dtype, a.cudagraph):
            if p.error:
                if rank == 0:
                    print("torch_compare.py: %s %s left out: %s" % (p.lib, p.mode, p.error), file=sys.stderr)
                continue
            wrong = p.check()
            us = p.time(a.warmup_iters, a.iters)
            mean = torch.tensor([us], dtype=torch.float64, device="cuda")
            dist.all_reduce(mean)
            us = mean.item() / world
            total_wrong += wrong
            algbw = count * elt / us / 1e3
            rows.append(dict(coll="allreduce", lib=p.lib, mode=p.mode, placement=p.placement,
                             bytes=count * elt, count=count, dtype=a.datatype, op="sum", root=-1,
                             nranks=world, device=device, buffers=p.buffers, graph=int(p.graph),
                             iters=a.iters, warmup=a.warmup_iters, time_us="%.3f" % us,
                             algbw_GBps="%.3f" % algbw, busbw_GBps="%.3f" % (algbw * factor),
                             wrong=wrong, speedup="", version=p.version))
            p.close()
        best = min((float(r["time_us"]) for r in rows if r["lib"] == "torch"), default=0)
        for r in rows:
            if r["lib"] == "gpucoll" and best > 0:
                r["speedup"] = "%.4f" % (best / float(r["time_us"]))
            if rank == 0:
                print("%12d  %-18s  %9s  %7s  %6d" % (r["bytes"], r["lib"] + " " + r["mode"], r["time_us"],
                                                     r["busbw_GBps"], r["wrong"]), flush=True)
                if w:
                    w.writerow(r)
        if f:
            f.flush()
    if f:
        f.close()
    if rank == 0:
        print("# Out of bounds values : %d %s" % (total_wrong, "FAILED" if total_wrong else "OK"))
    return 1 if total_wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
