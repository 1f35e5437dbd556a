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
  colls=allreduce,reducescatter,allgather,broadcast  algos=auto,oneshot,oneshot_ll,twoshot,writes,copyengine,mpi
          (also reducescatter_allreduce, allreduce_allgather: the mixed operations over the
          communicator's nodes, GC_LOCAL_SIZE simulating them; timed without graphs, since across
          nodes they refuse capture, and without NCCL or MPI beside them, which have no such call)
          (also rmsnorm: the fused all-reduce + RMSNorm + FP8, gc_allreduce_rmsnorm_fp8 with its
          defaults, on rows of cols elements (a size is whole rows, at least one); checked on up
          to 64 rows spread over the output; its NCCL comparison, the unfused pipeline, is
          gpucoll-bench rmsnorm --vs nccl)
  cols=8192  dtype=float32  iters=20  warmup=5  graph=1  check=1  host=0 (1: host buffers on GPUs too)
  nccl=auto (1: measure NCCL, also beside host buffers; 0: not)  plot=1 (0: CSV and JSON only)
  R=all   NCCL's buffer modes, as gpucoll-bench --vs nccl -R: 0 plain (cudaMalloc), 1 registered
          (ncclMemAlloc + ncclCommRegister), 2 symmetric (ncclMemAlloc + symmetric windows),
          a comma list, or all; a mode this NCCL lacks is one line, the others still run
With NCCL, each collective ends with a table of gpucoll's fastest algorithm beside each NCCL mode,
and the speed-up against the fastest NCCL mode at each size (its time / gpucoll's).
On host buffers each collective is also timed through the MPI library's own call (MPI_Allreduce,
...), so the cost of gpucoll's MPI path shows beside it.
]]

local opts = util.parse_args(arg, {
  sizes = "", out = "sweep-results", colls = "allreduce,reducescatter,allgather,broadcast",
  algos = "", dtype = "float32", iters = "20", warmup = "5", graph = "1", nccl = "auto", R = "all",
  check = "1", host = "0", plot = "1", cols = "8192",
}, { "sizes", "out" }, usage)
local nccl_modes = util.parse_nccl_modes(opts.R)
io.stdout:setvbuf("line") -- rows appear as they are measured, also through mpirun's pipes

local comm <close> = assert(gpucoll.comm { use_gpu = not util.truthy(opts.host) })
local n, rank = comm.size, comm.rank
-- Device buffers and graph timing only when every rank has a GPU; the same choice everywhere.
local on_gpu = util.all_gpu(comm)
local where = on_gpu and "device" or "host" -- "device": symmetric (gc_mem_alloc) buffers
local sizes = util.parse_sizes(opts.sizes ~= "" and opts.sizes or (on_gpu and "1K:256M:4" or "1K:4M:4"))
local algos = util.list(opts.algos ~= "" and opts.algos or (on_gpu and "auto,oneshot,oneshot_ll,twoshot,writes,copyengine,mpi" or "mpi"))
local colls, dtype = util.list(opts.colls), opts.dtype
local cols = math.tointeger(tonumber(opts.cols))
if not cols or cols < 1 then error("cols=" .. opts.cols .. ": want a count > 0", 0) end
-- On GPUs, gc_mem_alloc buffers (comm:symmetric): the kernels use them in place and the
-- copy-engine path writes into them; both are freed collectively as their block ends.
local function buffer(count)
  if where == "device" then return comm:symmetric(count, dtype) end
  return comm:buffer(count, dtype, where)
end
-- rmsnorm's fp8 output, row scales and weights: plain buffers where its input lies.
local function plain(count, of_dtype) return comm:buffer(count, of_dtype, where) end
local iters, warmup = tonumber(opts.iters), tonumber(opts.warmup)
local graph = on_gpu and util.truthy(opts.graph)
local check = util.truthy(opts.check)

-- NCCL on its own buffers, one pair per mode (it never reads gpucoll's host buffers).
local nccl
if util.truthy(opts.nccl) or (opts.nccl == "auto" and on_gpu) then
  nccl, nccl_modes = util.open_nccl(comm, nccl_modes)
else
  nccl_modes = {}
end

if rank == 0 then
  print(string.format("# gpucoll %s sweep: %d ranks, %s buffers, %s, %d sizes, iters %d, graph %s%s",
    gpucoll.version, n, where == "device" and "symmetric device" or where, dtype, #sizes, iters, tostring(graph),
    nccl and string.format(", NCCL %s (%s; NCCL_NVLS_ENABLE=0)", nccl:version(), table.concat(nccl_modes, ", "))
      or ""))
end

local mpi_version = "MPI"
local device_name = on_gpu and (gpucoll.device_name(comm.device) or "gpu") or "host"

-- Fresh random data per size and run: seeds from rank 0's clock, agreed by all ranks.
local base = util.agree(comm, (os.time() % 100000) * 100000)
local rows, skipped, total_wrong = {}, {}, 0
local step, steps = 0, #colls * #sizes

for ci, coll in ipairs(colls) do
  assert(util.busbw_factor[coll], "unknown collective '" .. coll .. "'")
  local comparison = {} -- per size: gpucoll's fastest algorithm and each NCCL mode's time
  for si, size in ipairs(sizes) do
    step = step + 1
    gpucoll.progress(step, steps, coll .. " " .. util.human(size))
    local mixed = coll == "reducescatter_allreduce" or coll == "allreduce_allgather"
    local rmsnorm = coll == "rmsnorm"
    local no_nccl = mixed or rmsnorm -- NCCL has no such call
    local nsend, nrecv, count, bytes, nrows = util.layout(coll, size, n, dtype, comm.local_size, cols)
    if count > 0 then
      local send <close> = assert(buffer(nsend))
      local recv <close> = assert(rmsnorm and plain(nrecv, "fp8_e4m3") or buffer(nrecv))
      local seeds = {}
      for r = 0, n - 1 do seeds[r + 1] = base + si * 1000 + ci * 100 + r end
      send:fill(seeds[rank + 1])
      -- rmsnorm: the row scales, and the weights, alike on every rank (the op wants them so).
      local scales <close> = rmsnorm and assert(plain(nrows, "float32")) or nil
      local gamma <close> = rmsnorm and assert(plain(cols, dtype)):fill(seeds[1] + n) or nil
      local ref <close> = check and util.reference(comm, coll, dtype, nsend, seeds, 0) or nil
      local check_rows = rmsnorm and util.rows_to_check(nrows, 64)
      local function invoke(s, sbuf, rbuf, o)
        if rmsnorm then return comm:allreduce_rmsnorm_fp8(sbuf, rbuf, scales, gamma, nrows, cols, o) end
        return util.call(s.lib, coll, sbuf, rbuf, o)
      end

      -- The series: NCCL's modes first (gpucoll's rows carry the speed-up against the fastest
      -- of them), then gpucoll's algorithms, then on host buffers MPI's own call.
      local series = {}
      for _, m in ipairs(no_nccl and {} or nccl_modes) do
        series[#series + 1] = { lib_name = "nccl", mode = m, name = "nccl_" .. m, lib = nccl, nccl_mode = m,
          version = nccl:version() }
      end
      for _, a in ipairs(algos) do
        series[#series + 1] = { lib_name = "gpucoll", mode = a, name = a, lib = comm, algo = a,
          version = gpucoll.version }
      end
      if where == "host" and util.mpi_names[coll] then
        series[#series + 1] = { lib_name = "mpi", mode = util.mpi_names[coll], name = util.mpi_names[coll],
          mpi = true, lib = util.mpi_lib(comm) }
      end

      local best_nccl -- the fastest NCCL mode's time at this size
      local at_size = { bytes = bytes }
      for _, s in ipairs(series) do
        local key = coll .. "/" .. s.name
        -- NCCL's modes on their own buffers, filled alike (symmetric ones made collectively).
        local nsend_buf <close> = s.nccl_mode and assert(nccl:buffer(nsend, dtype, s.nccl_mode)) or nil
        local nrecv_buf <close> = s.nccl_mode and assert(nccl:buffer(nrecv, dtype, s.nccl_mode)) or nil
        if nsend_buf then nsend_buf:fill(seeds[rank + 1]) end
        local sbuf, rbuf = nsend_buf or send, nrecv_buf or recv
        do
          local copts = s.algo and { algo = s.algo } or {}
          rbuf:poison()
          if scales then scales:poison() end
          local ok, msg, code = invoke(s, sbuf, rbuf, copts)
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
            if ref and rmsnorm then
              wrong = util.sum_all(comm, util.rmsnorm_wrong(comm, ref, gamma, rbuf, scales, cols, check_rows))
            elseif ref then
              wrong = util.sum_all(comm, (rbuf:compare(ref)))
            end
            total_wrong = total_wrong + wrong
            -- MPI-path calls synchronize inside, which a graph capture forbids.
            local use_graph = graph and s.algo ~= "mpi" and not s.mpi and not mixed
            local us, terr = comm:time(function(stream)
              local o = { stream = stream }
              if s.algo then o.algo = s.algo end
              return invoke(s, sbuf, rbuf, o)
            end, { warmup = warmup, iters = iters, graph = use_graph })
            if not us and rank == 0 then io.stderr:write("note: ", key, " not timed: ", terr, "\n") end
            local algbw = us and bytes / (us * 1e3) or nil
            if us and s.nccl_mode then
              best_nccl = (best_nccl == nil or us < best_nccl) and us or best_nccl
              at_size[s.nccl_mode] = us
            elseif us and s.algo and (at_size.gpucoll == nil or us < at_size.gpucoll) then
              at_size.gpucoll, at_size.algo = us, s.algo
            end
            local row = {
              coll = coll, lib = s.lib_name, mode = s.mode, placement = "oop", bytes = bytes, count = count,
              dtype = dtype, op = (coll == "allgather" or coll == "broadcast") and "none" or "sum",
              root = coll == "broadcast" and 0 or -1, nranks = n, device = device_name,
              buffers = s.mpi and "host" or s.nccl_mode == "plain" and "cudaMalloc"
                or s.nccl_mode and "ncclMemAlloc" or where == "device" and "gc_mem_alloc" or where,
              graph = use_graph and 1 or 0, iters = iters, warmup = warmup, time_us = us, algbw_GBps = algbw,
              busbw_GBps = algbw and algbw * util.busbw_factor[coll](n, comm.local_size) or nil,
              wrong = ref and wrong or nil,
              speedup = s.algo and us and best_nccl and best_nccl / us or nil,
              version = s.version or mpi_version,
            }
            rows[#rows + 1] = row
            util.print_row(comm, row)
          end
        end
      end
      if #nccl_modes > 0 and not no_nccl then
        at_size.speedup = best_nccl and at_size.gpucoll and best_nccl / at_size.gpucoll or nil
        comparison[#comparison + 1] = at_size
      end
    end
  end
  -- A column per NCCL mode beside gpucoll's fastest algorithm at each size.
  if #nccl_modes > 0 and #comparison > 0 then
    if rank == 0 then print(string.format("# %s: time (us) per call, speed-up = fastest NCCL mode / gpucoll", coll)) end
    local cols = { "bytes", { "gpucoll", "%.2f" }, "algo" }
    for _, m in ipairs(nccl_modes) do cols[#cols + 1] = { m, "%.2f" } end
    cols[#cols + 1] = { "speedup", "%.2f" }
    gpucoll.table(comparison, cols)
  end
end

local columns = util.columns

util.mkdir(comm, opts.out)
local csv, png = opts.out .. "/sweep.csv", opts.out .. "/sweep.png"
assert(gpucoll.csv(csv, rows, columns))
assert(gpucoll.json(opts.out .. "/sweep.json", {
  version = gpucoll.version, ranks = n, buffers = where, dtype = dtype, iters = iters,
  graph = graph, nccl = nccl and nccl:version() or false, nccl_modes = nccl_modes, wrong = total_wrong,
  rows = rows,
}))
if rank == 0 then print("# wrote " .. csv .. " and " .. opts.out .. "/sweep.json") end
local plotted = util.truthy(opts.plot) and util.plot(comm, csv, png)
if plotted then print("# plot: " .. plotted) end

if total_wrong > 0 then
  if rank == 0 then io.stderr:write("FAILED: ", total_wrong, " wrong elements in total\n") end
  os.exit(1, true)
end
if rank == 0 then print("# all results correct") end
