-- crossover.lua — one-shot vs two-shot all-reduce over sizes: who wins where, and the crossover.
local dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local gpucoll = require "gpucoll"
local util = require "benchutil"

local usage = [[
usage: mpirun -np N gpucoll-lua run examples/crossover.lua [SIZES] [OUTDIR] [key=value ...]
  SIZES   default 1K:64M (x2 steps) on GPUs, 1K:1M on host buffers
  OUTDIR  where crossover.csv goes (default crossover-results)
  coll=allreduce  algos=oneshot,oneshot_ll,twoshot,writes,auto (coll=reducescatter adds copyengine)
          on host buffers: gpucoll's MPI path (mpi) against the MPI library's own call (MPI_...),
          the only two different paths there (auto picks mpi)
  dtype=float32  iters=20  warmup=5  graph=1  host=0
One row per size with each algorithm's time, the winner, and the sizes where the winner changes
(compare them with the dispatch table, printed at the end).
]]

local opts = util.parse_args(arg, {
  sizes = "", out = "crossover-results", coll = "allreduce", algos = "", dtype = "float32",
  iters = "20", warmup = "5", graph = "1", host = "0",
}, { "sizes", "out" }, usage)

local comm <close> = assert(gpucoll.comm { use_gpu = not util.truthy(opts.host) })
local n, rank = comm.size, comm.rank
local on_gpu = util.all_gpu(comm)
local where = on_gpu and "device" or "host"
local sizes = util.parse_sizes(opts.sizes ~= "" and opts.sizes or (on_gpu and "1K:64M" or "1K:1M"))
local coll, dtype = opts.coll, opts.dtype
-- copyengine needs symmetric buffers except in reduce-scatter, and these are not symmetric.
local gpu_algos = "oneshot,oneshot_ll,twoshot,writes" .. (coll == "reducescatter" and ",copyengine" or "") .. ",auto"
assert(util.busbw_factor[coll], "unknown collective '" .. coll .. "'")
local algos = util.list(opts.algos ~= "" and opts.algos or (on_gpu and gpu_algos or ("mpi," .. util.mpi_names[coll])))
local mpi_lib = util.mpi_lib(comm)
local graph = on_gpu and util.truthy(opts.graph)
local warmup, iters = tonumber(opts.warmup), tonumber(opts.iters)

local base = util.agree(comm, (os.time() % 100000) * 100000)
local rows, wrong_total, changes, last = {}, 0, {}, nil
for si, size in ipairs(sizes) do
  gpucoll.progress(si, #sizes, util.human(size))
  local nsend, nrecv, count, bytes = util.layout(coll, size, n, dtype)
  if count > 0 then
    local send <close> = assert(comm:buffer(nsend, dtype, where))
    local recv <close> = assert(comm:buffer(nrecv, dtype, where))
    local seeds = {}
    for r = 0, n - 1 do seeds[r + 1] = base + si * 100 + r end
    send:fill(seeds[rank + 1])
    local ref <close> = util.reference(comm, coll, dtype, nsend, seeds, 0)
    local row, winner, best, wrong = { bytes = bytes, count = count }, nil, math.huge, 0
    for _, algo in ipairs(algos) do
      recv:poison()
      -- MPI_... is the MPI library's own call; any other name is a gpucoll algorithm.
      local own = algo == util.mpi_names[coll]
      local lib, copts = own and mpi_lib or comm, not own and { algo = algo } or nil
      local ok, msg, code = util.call(lib, coll, send, recv, copts)
      if not ok and (code == "GC_ERR_UNSUPPORTED" or code == "GC_ERR_INVALID_ARGUMENT") then
        if rank == 0 then io.stderr:write("note: ", algo, " at ", util.human(size), ": ", msg, "\n") end
      else
        assert(ok, msg)
        assert(comm:sync())
        wrong = wrong + util.sum_all(comm, (recv:compare(ref)))
        local us = assert(comm:time(function(stream)
          return util.call(lib, coll, send, recv, not own and { algo = algo, stream = stream } or nil)
        end, { warmup = warmup, iters = iters, graph = graph and algo ~= "mpi" and not own }))
        row[algo .. "_us"] = us
        if algo ~= "auto" and us < best then best, winner = us, algo end
      end
    end
    row.winner, row.wrong = winner, wrong
    wrong_total = wrong_total + wrong
    if last and winner ~= last then changes[#changes + 1] = { bytes = bytes, from = last, to = winner } end
    last = winner
    rows[#rows + 1] = row
  end
end

local columns = { "bytes", "count" }
for _, a in ipairs(algos) do columns[#columns + 1] = a .. "_us" end
columns[#columns + 1] = "winner"
columns[#columns + 1] = "wrong"
gpucoll.table(rows, columns)
if rank == 0 then
  if #changes == 0 then
    print("# no crossover in this range: " .. tostring(last) .. " wins everywhere")
  end
  for _, c in ipairs(changes) do
    print(string.format("# crossover at %s bytes: %s -> %s", util.human(c.bytes), c.from, c.to))
  end
  print("# dispatch table in force:\n" .. comm.algo_table)
end
util.mkdir(comm, opts.out)
assert(gpucoll.csv(opts.out .. "/crossover.csv", rows, columns))
if wrong_total > 0 then
  if rank == 0 then io.stderr:write("FAILED: ", wrong_total, " wrong elements in total\n") end
  os.exit(1, true)
end
