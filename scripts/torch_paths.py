"""torch_paths.py — the all-reduce paths scripts/torch_compare.py times: torch.distributed
(NCCL), torch symmetric memory's one-shot and two-shot kernels, and gpucoll's Python binding.

Each path owns its buffers for one size, checks one call against the exact sum (inputs rank + 1,
so the sum of n ranks is n (n + 1) / 2 in every dtype used here), then times calls on zeros (a
sum of zeros stays zero, so in-place calls repeated thousands of times never overflow).
"""


class Path:
    """One series at one size: fn() enqueues one all-reduce on the current stream."""

    def __init__(self, torch, dist, lib, mode, placement, buffers, version, graph):
        self.torch, self.dist = torch, dist
        self.lib, self.mode, self.placement, self.buffers, self.version = lib, mode, placement, buffers, version
        self.graph = graph
        self.error = None
        self.src = self.out = None

    def fn(self):
        raise NotImplementedError

    def check(self):
        """Wrong elements of one call on inputs rank + 1, summed over the ranks; then zeros."""
        torch, dist = self.torch, self.dist
        n, rank = dist.get_world_size(), dist.get_rank()
        self.src.fill_(rank + 1)
        self.fn()
        torch.cuda.synchronize()
        wrong = torch.tensor([int((self.out.float() != n * (n + 1) / 2).sum().item())], device="cuda")
        dist.all_reduce(wrong)
        self.src.zero_()
        if self.out is not self.src:
            self.out.zero_()
        torch.cuda.synchronize()
        return int(wrong.item())

    def time(self, warmup, iters):
        """This rank's microseconds per call: CUDA events around iters calls, or around the
        replay of a graph that captured them (falls back to the calls where capture fails)."""
        torch, dist = self.torch, self.dist
        for _ in range(warmup):
            self.fn()
        torch.cuda.synchronize()
        g = None
        if self.graph:
            try:
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    for _ in range(iters):
                        self.fn()
                g.replay()  # the first launch uploads the graph
                torch.cuda.synchronize()
            except RuntimeError as e:
                g, self.graph = None, False
                if dist.get_rank() == 0:
                    print("torch_compare.py: %s %s: no graph (%s); timing the calls" % (self.lib, self.mode, e))
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        start.record()
        if g is not None:
            g.replay()
        else:
            for _ in range(iters):
                self.fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) * 1e3 / iters

    def close(self):
        self.src = self.out = None


class TorchNccl(Path):
    def __init__(self, torch, dist, count, dtype, graph):
        super().__init__(torch, dist, "torch", "nccl", "inplace", "torch", torch.__version__, graph)
        self.src = self.out = torch.empty(count, dtype=dtype, device="cuda")

    def fn(self):
        self.dist.all_reduce(self.src)


class SymmMem(Path):
    """torch.ops.symm_mem.one_shot_all_reduce_out (out of place) or two_shot_all_reduce_ (in
    place) on a buffer from symm_mem.empty, rendezvoused over the default group."""

    def __init__(self, torch, dist, count, dtype, graph, mode):
        placement = "oop" if mode == "one_shot" else "inplace"
        super().__init__(torch, dist, "torch", mode, placement, "symm_mem", torch.__version__, graph)
        try:
            import torch.distributed._symmetric_memory as symm_mem
            self.group = dist.group.WORLD.group_name
            self.src = symm_mem.empty(count, dtype=dtype, device="cuda")
            symm_mem.rendezvous(self.src, self.group)
            ops = torch.ops.symm_mem
            if mode == "one_shot":
                self.out = torch.empty_like(self.src)
                self.op = ops.one_shot_all_reduce_out
            else:
                self.out = self.src
                self.op = ops.two_shot_all_reduce_
        except (ImportError, AttributeError, RuntimeError) as e:
            self.error = "torch %s symmetric memory: %s" % (torch.__version__, e)

    def fn(self):
        if self.out is self.src:
            self.op(self.src, "sum", self.group)
        else:
            self.op(self.src, "sum", self.group, self.out)


class Gpucoll(Path):
    """gpucoll.Comm.allreduce out of place on torch tensors, on torch's current stream."""
    comm = None

    def __init__(self, torch, dist, count, dtype, graph):
        try:
            import gpucoll
            version = getattr(gpucoll, "__version__", None) or gpucoll.version()
            if Gpucoll.comm is None:
                Gpucoll.comm = gpucoll.Comm()
        except (ImportError, RuntimeError, OSError) as e:
            super().__init__(torch, dist, "gpucoll", "auto", "oop", "torch", "", graph)
            self.error = "gpucoll's Python binding: %s" % e
            return
        super().__init__(torch, dist, "gpucoll", "auto", "oop", "torch", version, graph)
        self.src = torch.empty(count, dtype=dtype, device="cuda")
        self.out = torch.empty_like(self.src)

    def fn(self):
        self.comm.allreduce(self.src, out=self.out, stream=self.torch.cuda.current_stream().cuda_stream)


def paths(torch, dist, count, dtype, graph):
    """The series at one size, in the order they are printed."""
    return [TorchNccl(torch, dist, count, dtype, graph),
            SymmMem(torch, dist, count, dtype, graph, "one_shot"),
            SymmMem(torch, dist, count, dtype, graph, "two_shot"),
            Gpucoll(torch, dist, count, dtype, graph)]
