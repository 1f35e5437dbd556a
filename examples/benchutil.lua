-- benchutil.lua — what the example sweeps share: arguments, sizes, layouts, references, plots.
local gpucoll = require "gpucoll"

local M = {}

local units = { [""] = 1, K = 1024, M = 1024 ^ 2, G = 1024 ^ 3 }

--- "64K" -> 65536; also plain integers and "1.5M".
function M.parse_bytes(s)
  local num, unit = tostring(s):upper():match("^%s*([%d%.]+)%s*([KMG]?)B?%s*$")
  assert(num, "bad size '" .. tostring(s) .. "' (examples: 1024, 64K, 256M, 1G)")
  return math.tointeger(math.floor(tonumber(num) * units[unit])) --[[@as integer]]
end

--- "1K:256M" (factor 2), "1K:256M:4" (factor 4) or "4K,64K,1M".
function M.parse_sizes(spec)
  local sizes = {}
  if spec:find(",") then
    for item in spec:gmatch("[^,]+") do sizes[#sizes + 1] = M.parse_bytes(item) end
    return sizes
  end
  local lo, hi, f = spec:match("^([^:]+):([^:]+):?(%d*)$")
  if not lo then return { M.parse_bytes(spec) } end
  lo, hi, f = M.parse_bytes(lo), M.parse_bytes(hi), tonumber(f) or 2
  assert(f >= 2 and lo >= 1 and lo <= hi, "bad size range '" .. spec .. "'")
  local s = lo
  while s <= hi do
    sizes[#sizes + 1] = s
    s = s * f
  end
  return sizes
end

function M.human(bytes)
  for _, u in ipairs { { "G", 1024 ^ 3 }, { "M", 1024 ^ 2 }, { "K", 1024 } } do
    if bytes >= u[2] and bytes % math.tointeger(u[2]) == 0 then return (bytes // u[2]) .. u[1] end
  end
  return tostring(bytes)
end

--- key=value arguments (positional ones fill `positional` names in order); unknown keys raise.
function M.parse_args(argv, defaults, positional, usage)
  local opts, npos = {}, 0
  for k, v in pairs(defaults) do opts[k] = v end
  for _, a in ipairs(argv) do
    local k, v = a:match("^%-*([%w_]+)=(.*)$")
    if a == "help" or a == "--help" or a == "-h" then
      if gpucoll.world() == 0 then io.write(usage) end
      os.exit(0, true)
    elseif k then
      if defaults[k] == nil then error("unknown argument '" .. k .. "'\n" .. usage, 0) end
      opts[k] = v
    else
      npos = npos + 1
      local name = positional[npos]
      if not name then error("unexpected argument '" .. a .. "'\n" .. usage, 0) end
      opts[name] = a
    end
  end
  return opts
end

function M.list(s)
  local t = {}
  for item in tostring(s):gmatch("[^,%s]+") do t[#t + 1] = item end
  return t
end

function M.truthy(v) return v == true or v == "1" or v == "true" or v == "yes" end

--- Sums an integer over all ranks (also a barrier).
function M.sum_all(comm, v)
  local b <close> = comm:buffer(1, "int64", "host")
  b:set(1, math.tointeger(v) or 0)
  assert(comm:allreduce(b, b))
  return b:get(1)
end

--- Rank 0's integer, on every rank.
function M.agree(comm, v)
  local b <close> = comm:buffer(1, "int64", "host")
  b:set(1, math.tointeger(v) or 0)
  assert(comm:broadcast(b, b, 0))
  return b:get(1)
end

--- True when every rank has a GPU (device buffers and kernels usable everywhere).
-- GC_LUA_REQUIRE_GPU=1 (the gpu-labelled tests set it) turns "no GPU here" into an error, so a
-- GPU test cannot pass quietly on host buffers.
function M.all_gpu(comm)
  local all = M.sum_all(comm, comm.device >= 0 and 1 or 0) == comm.size
  if not all and os.getenv("GC_LUA_REQUIRE_GPU") == "1" then
    error("GC_LUA_REQUIRE_GPU=1 but not every rank has a GPU", 2)
  end
  return all
end

-- nccl-tests' conventions: size is the bytes of the larger buffer, busbw scales algbw so that
-- it compares with the link bandwidth. The mixed operations on n ranks in nodes of L move
-- (L-1)/L of the larger buffer inside the node and 2(N-1)/N of its 1/L share across the N nodes:
-- the reduce-scatter's factor on one node, the all-reduce's with one rank a node.
local function mixed_factor(n, L)
  local nodes = n // L
  return (L - 1) / L + 2 * (nodes - 1) / (nodes * L)
end
M.busbw_factor = {
  allreduce = function(n) return 2 * (n - 1) / n end,
  reducescatter = function(n) return (n - 1) / n end,
  allgather = function(n) return (n - 1) / n end,
  broadcast = function() return 1 end,
  reducescatter_allreduce = mixed_factor,
  allreduce_allgather = mixed_factor,
  rmsnorm = function(n) return 2 * (n - 1) / n end, -- its all-reduce's
}

--- Element counts for a collective of `bytes` on n ranks (the mixed operations: in nodes of L):
--- send, recv, the C count argument, and the bytes actually moved (bytes rounded down to whole
--- elements per part). rmsnorm, as gpucoll-bench rmsnorm sizes it: whole rows of `cols`
--- elements, at least one; its row count comes fifth.
function M.layout(coll, bytes, n, dtype, L, cols)
  local es = gpucoll.dtype_size(dtype)
  if coll == "reducescatter_allreduce" or coll == "allreduce_allgather" then n = L end
  if coll == "rmsnorm" then
    local rows = math.max(1, bytes // (cols * es))
    local c = rows * cols
    return c, c, c, c * es, rows
  elseif coll == "allreduce" or coll == "broadcast" then
    local c = bytes // es
    return c, c, c, c * es
  elseif coll == "reducescatter" or coll == "reducescatter_allreduce" then
    local c = bytes // (es * n)
    return c * n, c, c, c * n * es
  elseif coll == "allgather" or coll == "allreduce_allgather" then
    local c = bytes // (es * n)
    return c, c * n, c, c * n * es
  end
  error("unknown collective " .. tostring(coll))
end

--- The float64 reference for this rank's output when rank r's input was filled with seeds[r+1]
--- (sum for the reductions; rmsnorm's is its all-reduce's sum, which its check normalizes). Built
--- on the host from the library's own generator.
function M.reference(comm, coll, dtype, nsend, seeds, root)
  local size, rank = comm.size, comm.rank
  local tmp <close> = assert(comm:buffer(math.max(nsend, 1), dtype, "host"))
  local ref
  if coll == "rmsnorm" then coll = "allreduce" end
  if coll == "allreduce" or coll == "reducescatter" then
    local rc = coll == "allreduce" and nsend or nsend // size
    local off = coll == "allreduce" and 0 or rank * rc
    ref = assert(comm:buffer(rc, "float64", "host"))
    for r = 0, size - 1 do
      tmp:fill(seeds[r + 1])
      if r == 0 then ref:copy_from(tmp:offset(off)) else ref:accumulate(tmp:offset(off)) end
    end
  elseif coll == "allgather" then
    ref = assert(comm:buffer(nsend * size, "float64", "host"))
    for r = 0, size - 1 do
      tmp:fill(seeds[r + 1])
      ref:offset(r * nsend):copy_from(tmp, nsend)
    end
  elseif coll == "broadcast" then
    ref = assert(comm:buffer(nsend, "float64", "host"))
    tmp:fill(seeds[root + 1])
    ref:copy_from(tmp, nsend)
  else
    ref = M.mixed_reference(comm, coll, tmp, nsend, seeds)
  end
  return ref
end

--- The mixed operations' reference, nodes in blocks of L ranks (rank = node x L + local rank):
--- reduce-scatter + all-reduce gives this rank block local_rank of the sum over every rank;
--- all-reduce + all-gather gives block l the sum over the nodes of local rank l's input.
function M.mixed_reference(comm, coll, tmp, nsend, seeds)
  local size, L, me = comm.size, comm.local_size, comm.local_rank
  local ref
  if coll == "reducescatter_allreduce" then
    local rc = nsend // L
    ref = assert(comm:buffer(rc, "float64", "host"))
    for r = 0, size - 1 do
      tmp:fill(seeds[r + 1])
      if r == 0 then ref:copy_from(tmp:offset(me * rc)) else ref:accumulate(tmp:offset(me * rc)) end
    end
  elseif coll == "allreduce_allgather" then
    ref = assert(comm:buffer(nsend * L, "float64", "host"))
    for l = 0, L - 1 do
      local block <close> = assert(comm:buffer(nsend, "float64", "host"))
      for r = l, size - 1, L do
        tmp:fill(seeds[r + 1])
        if r == l then block:copy_from(tmp, nsend) else block:accumulate(tmp) end
      end
      ref:offset(l * nsend):copy_from(block, nsend)
    end
  else
    error("unknown collective " .. tostring(coll))
  end
  return ref
end

-- The fp8 e4m3 output's largest value, its relative rounding (half an ulp) and subnormal spacing.
local FP8_MAX, FP8_REL, FP8_TINY = 448, 2 ^ -4, 2 ^ -9

--- The rows the check reads: every row up to `most`, else `most` rows spread evenly over them,
--- the first and the last among them.
function M.rows_to_check(rows, most)
  local picked = {}
  if rows <= most then
    for r = 1, rows do picked[r] = r end
  else
    for k = 0, most - 1 do picked[k + 1] = 1 + (k * (rows - 1)) // (most - 1) end
  end
  return picked
end

--- This rank's wrong values of gc_allreduce_rmsnorm_fp8 with its defaults (numerics max, epsilon
--- 1e-6, no scale_ub, no residual, e4m3), against float64 per row: with f the sum over the ranks
--- (`sum`, float64), y = f / sqrt(mean(f^2) + epsilon) x gamma and scale = amax(y) / FP8_MAX.
--- A scale is wrong when it misses by more than 1e-3 of itself, an fp8 element when out x scale
--- misses y by more than the fp8 rounding plus twice the subnormal spacing (gpucoll-bench's
--- rules). `rows` lists the rows to read (1-based); out and scales are copied to the host here.
function M.rmsnorm_wrong(comm, sum, gamma, out, scales, cols, rows)
  assert(comm:sync())
  local ho <close> = assert(comm:buffer(#out, out.dtype, "host")):copy_from(out)
  local hs <close> = assert(comm:buffer(#scales, "float32", "host")):copy_from(scales)
  local hg <close> = assert(comm:buffer(cols, gamma.dtype, "host")):copy_from(gamma)
  local g = {}
  for j = 1, cols do g[j] = hg:get(j) end
  local wrong = 0
  for _, row in ipairs(rows) do
    local base, ss, f = (row - 1) * cols, 0, {}
    for j = 1, cols do
      f[j] = sum:get(base + j)
      ss = ss + f[j] * f[j]
    end
    local rinv, amax, y = 1 / math.sqrt(ss / cols + 1e-6), 0, {}
    for j = 1, cols do
      y[j] = f[j] * rinv * g[j]
      amax = math.max(amax, math.abs(y[j]))
    end
    local ref, scale = amax / FP8_MAX, hs:get(row)
    if not (math.abs(scale - ref) <= 1e-3 * ref) then wrong = wrong + 1 end
    for j = 1, cols do
      if not (math.abs(ho:get(base + j) * scale - y[j]) <= FP8_REL * math.abs(y[j]) + 2 * ref * FP8_TINY) then
        wrong = wrong + 1
      end
    end
  end
  return wrong
end

--- Runs one collective through gpucoll (`lib` = comm) or NCCL (`lib` = comm:nccl()).
function M.call(lib, coll, send, recv, opts)
  if coll == "broadcast" then return lib:broadcast(send, recv, 0, opts) end
  return lib[coll](lib, send, recv, opts)
end

--- NCCL's buffer modes, nccl-tests' -R numbers (gpucoll-bench --vs nccl -R): 0 plain cudaMalloc,
--- 1 ncclMemAlloc + ncclCommRegister, 2 ncclMemAlloc + a symmetric window.
M.nccl_modes = { "plain", "registered", "symmetric" }

--- The modes a spec asks for, in -R order: "all", or a comma list of 0/1/2 or mode names.
--- Raises (a usage mistake) on anything else.
function M.parse_nccl_modes(spec)
  local want = {}
  for _, item in ipairs(M.list(spec)) do
    if item == "all" then
      for i = 1, #M.nccl_modes do want[i] = true end
    else
      local i = tonumber(item) and math.tointeger(tonumber(item)) and tonumber(item) + 1 or nil
      for j, name in ipairs(M.nccl_modes) do if name == item then i = j end end
      if not (i and M.nccl_modes[i]) then
        error("R=" .. spec .. ": want 0, 1, 2, plain, registered, symmetric or all", 0)
      end
      want[i] = true
    end
  end
  local modes = {}
  for i, name in ipairs(M.nccl_modes) do if want[i] then modes[#modes + 1] = name end end
  if #modes == 0 then error("R=" .. spec .. ": no NCCL mode named", 0) end
  return modes
end

--- NCCL_VERSION_CODE of a "2.28.9" string (22809), 0 when it does not parse.
function M.nccl_version_code(v)
  local a, b, c = tostring(v):match("^(%d+)%.(%d+)%.(%d+)")
  return a and tonumber(a) * 10000 + tonumber(b) * 100 + tonumber(c) or 0
end

--- Opens NCCL over comm (collective) and keeps the asked modes it has. A missing NCCL or mode is
--- one line on stderr (rank 0) and the run goes on without it. Returns nccl (or nil) and the
--- list of modes to measure.
function M.open_nccl(comm, modes)
  local nccl, msg = comm:nccl()
  if not nccl then
    if comm.rank == 0 then io.stderr:write("note: NCCL not measured: ", msg, "\n") end
    return nil, {}
  end
  local have = {}
  for _, m in ipairs(modes) do
    local ok, why = nccl:mode(m)
    if ok then have[#have + 1] = m
    elseif comm.rank == 0 then io.stderr:write("note: NCCL ", m, " not measured: ", why, "\n") end
  end
  for _, m in ipairs(have) do
    if m == "symmetric" and M.nccl_version_code(nccl:version()) < 22807 and comm.rank == 0 then
      io.stderr:write("warning: NCCL ", nccl:version(), " is older than 2.28.7, whose symmetric kernels ",
        "fix a small-message defect: its symmetric figures may be NCCL's worst, not its best\n")
    end
  end
  return nccl, have
end

--- Makes dir (and its parents) on rank 0; every rank returns once it exists, or raises alike.
M.mpi_names = { allreduce = "MPI_Allreduce", reducescatter = "MPI_Reduce_scatter_block",
  allgather = "MPI_Allgather", broadcast = "MPI_Bcast" }

--- The MPI library's own collectives (host buffers), called the way M.call calls a library.
function M.mpi_lib(comm)
  local lib = {}
  for coll in pairs(M.mpi_names) do
    lib[coll] = function(_, send, recv) return gpucoll.mpi(comm, coll, send, recv) end
  end
  lib.broadcast = function(_, send, recv, root) return gpucoll.mpi(comm, "broadcast", send, recv, { root = root }) end
  return lib
end

--- Makes dir (and its parents) on rank 0; every rank returns once it exists, or raises alike.
function M.mkdir(comm, dir)
  local ok, msg = true, nil
  if comm.rank == 0 then ok, msg = gpucoll.mkdir(dir) end
  if M.agree(comm, ok and 1 or 0) ~= 1 then error(msg or ("rank 0 could not make " .. dir), 2) end
end

local function script_dir()
  local src = debug.getinfo(1, "S").source
  return src:sub(1, 1) == "@" and (src:sub(2):match("^(.*)/[^/]*$") or ".") or "."
end

local function readable(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

--- scripts/plot_bench.py: GC_PLOT_SCRIPT, else next to the examples (installed), else in the
--- source tree's scripts/.
function M.plot_script()
  local env = os.getenv("GC_PLOT_SCRIPT")
  if env then return readable(env) and env or nil, env end
  for _, p in ipairs { script_dir() .. "/plot_bench.py", script_dir() .. "/../scripts/plot_bench.py" } do
    if readable(p) then return p end
  end
  return nil, script_dir() .. "/plot_bench.py"
end

--- Runs plot_bench.py CSV PNG on rank 0 when a python3 with matplotlib exists (no shell: the
--- paths are arguments as they are); prints a note otherwise. Returns the PNG path or nil.
function M.plot(comm, csv, png)
  if comm.rank ~= 0 then return nil end
  local script, tried = M.plot_script()
  if not script then
    io.stderr:write("note: no plot: ", tried, " not found (set GC_PLOT_SCRIPT)\n")
    return nil
  end
  local candidates = { os.getenv("GC_PLOT_PYTHON"), "python3", "/usr/bin/python3" }
  for _, py in pairs(candidates) do
    if py and gpucoll.run({ py, "-c", "import matplotlib" }, { quiet = true }) then
      local ok, msg = gpucoll.run { py, script, csv, png }
      if ok then return png end
      io.stderr:write("note: the plot failed: ", msg, "\n")
      return nil
    end
  end
  io.stderr:write("note: no plot: no python3 with matplotlib (apt-get install python3-matplotlib",
                  " or set GC_PLOT_PYTHON); the CSV is ", csv, "\n")
  return nil
end

-- The one CSV schema of gpucoll-bench, these sweeps and scripts/torch_compare.py
-- (scripts/plot_bench.py checks it).
M.columns = { "coll", "lib", "mode", "placement", "bytes", "count", "dtype", "op", "root", "nranks",
  "device", "buffers", "graph", "iters", "warmup", "time_us", "algbw_GBps", "busbw_GBps", "wrong",
  "speedup", "version" }

--- Prints one measured row on rank 0 as it comes (the CSV is written at the end).
function M.print_row(comm, r)
  if comm.rank ~= 0 then return end
  if not M.printed_header then
    M.printed_header = true
    print(string.format("#%13s  %12s  %-22s  %-9s  %9s  %8s  %6s", "coll", "size (B)", "lib mode", "placement",
      "time (us)", "busbw", "#wrong"))
  end
  print(string.format("%14s  %12d  %-22s  %-9s  %9s  %8s  %6s", r.coll, r.bytes, r.lib .. " " .. r.mode,
    r.placement, r.time_us and string.format("%.2f", r.time_us) or "N/A",
    r.busbw_GBps and string.format("%.2f", r.busbw_GBps) or "N/A", r.wrong and tostring(r.wrong) or "N/A"))
end

return M
