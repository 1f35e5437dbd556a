-- tune_blocks.lua — time a collective over block counts (max_blocks) per size and algorithm.
local dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local gpucoll = require "gpucoll"
local util = require "benchutil"

local usage = [[
usage: mpirun -np N gpucoll-lua run examples/tune_blocks.lua [SIZES] [OUTDIR] [key=value ...]
  SIZES   default 64K,1M,16M,128M on GPUs, 4K,64K on host buffers
  OUTDIR  where tune_blocks.csv goes (default tune-results)
  coll=allreduce  algos=oneshot,twoshot,writes  blocks=1,2,4,8,16,24,32,48,64
On host buffers the only path is MPI's, which launches no kernels: there are no blocks to tune, so
each size is timed once through it (max_blocks 0) and beside the MPI library's own call.
  dtype=float32  iters=20  warmup=5  graph=1  host=0
Prints one row per (size, algo, max_blocks) and the best block count of each (size, algo).
]]

local opts = util.parse_args(arg, {
  sizes = "", out = "tune-results", coll = "allreduce", algos = "", blocks = "1,2,4,8,16,24,32,48,64",
  dtype = "float32", iters = "20", warmup = "5", graph = "1", host = "0",
}, { "sizes", "out" }, usage)

local comm <close> = assert(gpucoll.comm { use_gpu = not util.truthy(opts.host) })
local n, rank = comm.size, comm.rank
local on_gpu = util.all_gpu(comm)
local where = on_gpu and "device" or "host"
local sizes = util.parse_sizes(opts.sizes ~= "" and opts.sizes or (on_gpu and "64K,1M,16M,128M" or "4K,64K"))
local coll, dtype = opts.coll, opts.dtype
assert(util.busbw_factor[coll], "unknown collective '" .. coll .. "'")
local algos = util.list(opts.algos ~= "" and opts.algos or (on_gpu and "oneshot,twoshot,writes"
  or ("mpi," .. util.mpi_names[coll])))
local blocks = {}
for _, b in ipairs(util.list(opts.blocks)) do blocks[#blocks + 1] = math.tointeger(tonumber(b)) end
if not on_gpu then
  if rank == 0 then
    io.stderr:write("note: host buffers: the MPI path launches no kernels, so max_blocks has nothing to ",
      "tune; each size is timed once (max_blocks 0), beside ", util.mpi_names[coll], "\n")
  end
  blocks = { 0 }
end
local mpi_lib = util.mpi_lib(comm)
local graph = on_gpu and util.truthy(opts.graph)
local topts = { warmup = tonumber(opts.warmup), iters = tonumber(opts.iters), graph = graph }

local base = util.agree(comm, (os.time() % 100000) * 100000)
local rows, best, wrong_total = {}, {}, 0
local step, steps = 0, #sizes * #algos * #blocks
for si, size in ipairs(sizes) do
  local nsend, nrecv, count, bytes = util.layout(coll, size, n, dtype)
  local send <close> = assert(comm:buffer(nsend, dtype, where))
  local recv <close> = assert(comm:buffer(nrecv, dtype, where))
  local seeds = {}
  for r = 0, n - 1 do seeds[r + 1] = base + si * 100 + r end
  send:fill(seeds[rank + 1])
  local ref <close> = util.reference(comm, coll, dtype, nsend, seeds, 0)
  for _, algo in ipairs(algos) do
    for _, mb in ipairs(blocks) do
      step = step + 1
      gpucoll.progress(step, steps, string.format("%s %s blocks %d", util.human(size), algo, mb))
      -- MPI_... is the MPI library's own call; any other name is a gpucoll algorithm.
      local own = algo == util.mpi_names[coll]
      local lib, o = own and mpi_lib or comm, not own and { algo = algo, max_blocks = mb } or nil
      recv:poison()
      local ok, msg, code = util.call(lib, coll, send, recv, o)
      if not ok and (code == "GC_ERR_UNSUPPORTED" or code == "GC_ERR_INVALID_ARGUMENT") then
        if rank == 0 then io.stderr:write(string.format("note: %s %s max_blocks=%d skipped: %s\n",
                                                        util.human(size), algo, mb, msg)) end
        goto continue
      end
      assert(ok, string.format("%s %s max_blocks=%d: %s", coll, algo, mb, tostring(msg)))
      assert(comm:sync())
      local wrong = util.sum_all(comm, (recv:compare(ref)))
      wrong_total = wrong_total + wrong
      local us = assert(comm:time(function(stream)
        return util.call(lib, coll, send, recv, not own and { algo = algo, max_blocks = mb, stream = stream } or nil)
      end, own and { warmup = topts.warmup, iters = topts.iters } or topts))
      local algbw = bytes / (us * 1e3)
      local row = {
        coll = coll, algo = algo, bytes = bytes, max_blocks = mb, time_us = us,
        busbw_GBps = algbw * util.busbw_factor[coll](n), wrong = wrong,
      }
      rows[#rows + 1] = row
      local key = bytes .. "/" .. algo
      if not best[key] or us < best[key].time_us then best[key] = row end
      ::continue::
    end
  end
end

local columns = { "coll", "algo", "bytes", "max_blocks", "time_us", "busbw_GBps", "wrong" }
gpucoll.table(rows, columns)
local summary = {}
for _, size in ipairs(sizes) do
  local _, _, _, bytes = util.layout(coll, size, n, dtype)
  for _, algo in ipairs(algos) do summary[#summary + 1] = best[bytes .. "/" .. algo] end
end
if rank == 0 then print("\n# best block count per size and algorithm") end
gpucoll.table(summary, { "bytes", "algo", "max_blocks", "time_us", "busbw_GBps" })

util.mkdir(comm, opts.out)
assert(gpucoll.csv(opts.out .. "/tune_blocks.csv", rows, columns))
if rank == 0 then print("# wrote " .. opts.out .. "/tune_blocks.csv") end
if wrong_total > 0 then
  if rank == 0 then io.stderr:write("FAILED: ", wrong_total, " wrong elements in total\n") end
  os.exit(1, true)
end
