-- sweep.lua — every collective x sizes x algorithms (and NCCL, or on host buffers the MPI library's
-- own collective), checked and timed: rows as measured, CSV, JSON, plot.
local dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local gpucoll = require "gpucoll"
local util = require "benchutil"

local usage = [[
usage: mpirun -np N gpucoll-lua run examples/sweep.lua [SIZES] [OUTDIR] [key=value ...]
  SIZES   bytes per collective (nccl-tests' size): 1K:256M (x2 steps), 1K:256M:4 (x4 steps)
          or a list 4K,1M,64M; default 1K:256M:4 on GPUs, 1K:4M:4 on host buffers
  OUTDIR  where sweep.csv, sweep.json and sweep.png go (default sweep-results)
  colls=allreduce,reducescatter,allgather,broadcast  algos=auto,oneshot,oneshot_ll,twoshot,twoshot_push,copyengine,mpi
  dtype=float32  iters=20  warmup=5  graph=1  nccl=1  check=1  host=0 (1: host buffers on GPUs too)
  plot=1 (0: CSV and JSON only)
On host buffers each collective is also timed through the MPI library's own call (MPI_Allreduce,
...), so the cost of gpucoll's MPI path shows beside it.
]]

local opts = util.parse_args(arg, {
  sizes = "", out = "sweep-results", colls = "allreduce,reducescatter,allgather,broadcast",
  algos = "", dtype = "float32", iters = "20", warmup = "5", graph = "1", nccl = "1", check = "1",
  host = "0", plot = "1",
}, { "sizes", "out" }, usage)
io.stdout:setvbuf("line") -- rows appear as they are measured, also through mpirun's pipes

local comm <close> = assert(gpucoll.comm { use_gpu = not util.truthy(opts.host) })
local n, rank = comm.size, comm.rank
-- Device buffers and graph timing only when every rank has a GPU; the same choice everywhere.
local on_gpu = util.all_gpu(comm)
local where = on_gpu and "device" or "host" -- "device": symmetric (gc_mem_alloc) buffers
local sizes = util.parse_sizes(opts.sizes ~= "" and opts.sizes or (on_gpu and "1K:256M:4" or "1K:4M:4"))
local algos = util.list(opts.algos ~= "" and opts.algos or (on_gpu and "auto,oneshot,oneshot_ll,twoshot,twoshot_push,copyengine,mpi" or "mpi"))
local colls, dtype = util.list(opts.colls), opts.dtype
-- On GPUs, gc_mem_alloc buffers (comm:symmetric): the kernels use them in place and the
-- copy-engine path writes into them; both are freed collectively as their block ends.
local function buffer(count)
  if where == "device" then return comm:symmetric(count, dtype) end
  return comm:buffer(count, dtype, where)
end
local iters, warmup = tonumber(opts.iters), tonumber(opts.warmup)
local graph = on_gpu and util.truthy(opts.graph)
local check = util.truthy(opts.check)

local nccl
if on_gpu and util.truthy(opts.nccl) then
  local msg
  nccl, msg = comm:nccl()
  if not nccl and rank == 0 then io.stderr:write("note: NCCL not measured: ", msg, "\n") end
end

if rank == 0 then
  print(string.format("# gpucoll %s sweep: %d ranks, %s buffers, %s, %d sizes, iters %d, graph %s%s",
    gpucoll.version, n, where == "device" and "symmetric device" or where, dtype, #sizes, iters, tostring(graph),
    nccl and (", NCCL " .. nccl:version()) or ""))
end

local mpi_version = "MPI"
local device_name = on_gpu and (gpucoll.device_name(comm.device) or "gpu") or "host"

-- Fresh random data per size and run: seeds from rank 0's clock, agreed by all ranks.
local base = util.agree(comm, (os.time() % 100000) * 100000)
local rows, skipped, total_wrong = {}, {}, 0
local step, steps = 0, #colls * #sizes

for ci, coll in ipairs(colls) do
  assert(util.busbw_factor[coll], "unknown collective '" .. coll .. "'")
  for si, size in ipairs(sizes) do
    step = step + 1
    gpucoll.progress(step, steps, coll .. " " .. util.human(size))
    local nsend, nrecv, count, bytes = util.layout(coll, size, n, dtype)
    if count > 0 then
      local send <close> = assert(buffer(nsend))
      local recv <close> = assert(buffer(nrecv))
      local seeds = {}
      for r = 0, n - 1 do seeds[r + 1] = base + si * 1000 + ci * 100 + r end
      send:fill(seeds[rank + 1])
      local ref <close> = check and util.reference(comm, coll, dtype, nsend, seeds, 0) or nil

      -- The series: gpucoll's algorithms, then NCCL, or on host buffers MPI's own call.
      local series = {}
      for _, a in ipairs(algos) do
        series[#series + 1] = { lib_name = "gpucoll", mode = a, name = a, lib = comm, algo = a,
          version = gpucoll.version }
      end
      if nccl then
        series[#series + 1] = { lib_name = "nccl", mode = "plain", name = "nccl", lib = nccl, version = nccl:version() }
      end
      if where == "host" then
        series[#series + 1] = { lib_name = "mpi", mode = util.mpi_names[coll], name = util.mpi_names[coll],
          mpi = true, lib = util.mpi_lib(comm) }
      end

      for _, s in ipairs(series) do
        local key = coll .. "/" .. s.name
        do
          local copts = s.algo and { algo = s.algo } or {}
          recv:poison()
          local ok, msg, code = util.call(s.lib, coll, send, recv, copts)
          -- An algorithm that does not apply (to this collective or size) is left out of the
          -- table, with a note the first time.
          if not ok and (code == "GC_ERR_UNSUPPORTED" or code == "GC_ERR_INVALID_ARGUMENT") then
            if not skipped[key] and rank == 0 then
              io.stderr:write("note: ", key, " skipped at ", util.human(size), ": ", msg, "\n")
            end
            skipped[key] = true
          else
            assert(ok, key .. ": " .. tostring(msg))
            assert(comm:sync())
            local wrong = 0
            if ref then wrong = util.sum_all(comm, (recv:compare(ref))) end
            total_wrong = total_wrong + wrong
            -- MPI-path calls synchronize inside, which a graph capture forbids.
            local use_graph = graph and s.algo ~= "mpi" and not s.mpi
            local us, terr = comm:time(function(stream)
              local o = { stream = stream }
              if s.algo then o.algo = s.algo end
              return util.call(s.lib, coll, send, recv, o)
            end, { warmup = warmup, iters = iters, graph = use_graph })
            if not us and rank == 0 then io.stderr:write("note: ", key, " not timed: ", terr, "\n") end
            local algbw = us and bytes / (us * 1e3) or nil
            local row = {
              coll = coll, lib = s.lib_name, mode = s.mode, placement = "oop", bytes = bytes, count = count,
              dtype = dtype, op = (coll == "allreduce" or coll == "reducescatter") and "sum" or "none",
              root = coll == "broadcast" and 0 or -1, nranks = n, device = device_name,
              buffers = s.mpi and "host" or where == "device" and "gc_mem_alloc" or where,
              graph = use_graph and 1 or 0, iters = iters, warmup = warmup, time_us = us, algbw_GBps = algbw,
              busbw_GBps = algbw and algbw * util.busbw_factor[coll](n) or nil,
              wrong = ref and wrong or nil, version = s.version or mpi_version,
            }
            rows[#rows + 1] = row
            util.print_row(comm, row)
          end
        end
      end
    end
  end
end

local columns = util.columns

util.mkdir(comm, opts.out)
local csv, png = opts.out .. "/sweep.csv", opts.out .. "/sweep.png"
assert(gpucoll.csv(csv, rows, columns))
assert(gpucoll.json(opts.out .. "/sweep.json", {
  version = gpucoll.version, ranks = n, buffers = where, dtype = dtype, iters = iters,
  graph = graph, nccl = nccl and nccl:version() or false, wrong = total_wrong, rows = rows,
}))
if rank == 0 then print("# wrote " .. csv .. " and " .. opts.out .. "/sweep.json") end
local plotted = util.truthy(opts.plot) and util.plot(comm, csv, png)
if plotted then print("# plot: " .. plotted) end

if total_wrong > 0 then
  if rank == 0 then io.stderr:write("FAILED: ", total_wrong, " wrong elements in total\n") end
  os.exit(1, true)
end
if rank == 0 then print("# all results correct") end
