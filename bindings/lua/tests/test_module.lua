-- test_module.lua — tests of every function and error path of the gpucoll Lua module (2+ ranks).
-- CI: mpirun -np 2 --oversubscribe gpucoll-lua run test_module.lua        (host buffers)
-- GPU: mpirun -np 4 gpucoll-lua run test_module.lua gpu=1                 (device buffers)
local gpucoll = require "gpucoll"
local H = dofile((arg[0]:match("^(.*[/\\])") or "") .. "harness.lua")
local test, raises = H.test, H.raises

local comm <close>, use_gpu = H.open(arg)
local rank, size = comm.rank, comm.size
local host_only = comm.device < 0
local where = host_only and "host" or "device"

local eq = H.eq


-- Expected failures: nil, message, code.
local function fails(code, ok, msg, got)
  if ok ~= nil then error("expected nil, message, code; got " .. tostring(ok), 2) end
  if type(msg) ~= "string" or #msg == 0 then error("no message", 2) end
  if code and got ~= code then error("expected code " .. code .. ", got " .. tostring(got) .. " (" .. msg .. ")", 2) end
  if not tostring(got):match("^GC_") then error("code is not a result name: " .. tostring(got), 2) end
end

-- The float64 reference of a sum over ranks of the pattern filled with seed + r.
local function sum_reference(n, dtype, seed, offset)
  local tmp <close> = comm:buffer(n + (offset or 0), dtype, "host")
  local ref = comm:buffer(n, "float64", "host")
  for r = 0, size - 1 do
    tmp:fill(seed + r)
    if r == 0 then ref:copy_from(tmp:offset(offset or 0)) else ref:accumulate(tmp:offset(offset or 0)) end
  end
  return ref
end

test("module fields", function()
  assert(gpucoll.version:match("^%d+%.%d+%.%d+"), gpucoll.version)
  eq(#gpucoll.dtypes, 9, "#dtypes")
  eq(gpucoll.dtypes[1], "float32")
  eq(gpucoll.dtypes[9], "fp8_e5m2")
  eq(table.concat(gpucoll.ops, ","), "sum,prod,min,max,avg")
  eq(table.concat(gpucoll.algos, ","), "auto,oneshot,twoshot,writes,mpi,multimem,copyengine,oneshot_ll")
  eq(type(gpucoll.have_nccl), "boolean")
  local wr, ws = gpucoll.world()
  eq(wr, rank, "world rank")
  eq(ws, size, "world size")
  eq(gpucoll.dtype_size("bfloat16"), 2)
  eq(gpucoll.dtype_size("float64"), 8)
  raises("unknown dtype 'float128'", gpucoll.dtype_size, "float128")
  local off, len = gpucoll.partition(10, 4, 1)
  eq(off, 3, "partition offset")
  eq(len, 3, "partition length")
  off, len = gpucoll.partition(10, 4, 3)
  eq(off, 8)
  eq(len, 2)
  raises("index out of range", gpucoll.partition, 10, 4, 4)
  -- 2^32 + 1 parts must not wrap to 1 part (where index 5 is then out of range)
  raises("parts must be between 1 and 2147483647", gpucoll.partition, 10, (1 << 32) + 1, 5)
  assert(gpucoll.params():find("GC_TIMEOUT_MS"), "params table")
  assert(gpucoll.strerror("GC_ERR_TIMEOUT"):find("GC_TIMEOUT_MS"))
end)

test("comm fields and methods", function()
  eq(math.type(comm.rank), "integer")
  assert(comm.rank >= 0 and comm.rank < comm.size)
  eq(comm.size, size)
  assert(comm.local_rank >= 0 and comm.local_rank < comm.local_size)
  assert(comm.node_count >= 1)
  eq(type(comm.cuda_aware), "boolean")
  eq(type(comm.p2p_ready), "boolean")
  local peers = comm.peers
  eq(#peers, comm.local_size, "#peers")
  eq(type(peers[1]), "boolean")
  eq(type(comm.algo_table), "string")
  eq(comm.closed, false)
  eq(comm.nonexistent, nil)
  assert(tostring(comm):match("^gpucoll%.comm %(rank " .. rank .. "/" .. size), tostring(comm))
  if host_only then
    eq(comm.device, -1)
    eq(comm.p2p_ready, false)
    assert(tostring(comm):find("host%-only"))
  end
  assert(comm:sync())
  raises("unknown option 'devices'", gpucoll.comm, { devices = 0 })
  raises("option 'timeout_ms' must be between", gpucoll.comm, { timeout_ms = (1 << 32) + 1000 })
end)

test("buffer basics", function()
  local b <close> = assert(comm:buffer(10, "float32", where))
  eq(#b, 10, "#b")
  eq(b.count, 10)
  eq(b.dtype, "float32")
  eq(b.kind, where)
  eq(b.bytes, 40)
  eq(b.itemsize, 4)
  eq(b.freed, false)
  assert(tostring(b):match("^gpucoll%.buffer %(10 x float32, " .. where), tostring(b))
  eq(math.type(b:ptr()), "integer")
  assert(b:ptr() ~= 0)
  local h <close> = assert(comm:buffer(3, "int32", "host"))
  eq(h.kind, "host")
  local z <close> = assert(comm:buffer(0, "float32", "host"))
  eq(#z, 0, "empty buffer")
  raises("unknown dtype", comm.buffer, comm, 4, "float8")
  raises("count must be >= 0", comm.buffer, comm, -1, "float32")
  raises("count too large", comm.buffer, comm, 1 << 62, "float32")
  raises("invalid option 'gpu'", comm.buffer, comm, 4, "float32", "gpu")
end)

test("get and set for every dtype", function()
  local cases = {
    float32 = 0.1, float64 = 1 / 3, float16 = 0.5, bfloat16 = 1.5, int32 = -7, int64 = 1 << 40,
    uint8 = 200, fp8_e4m3 = 0.25, fp8_e5m2 = -2.0,
  }
  for _, dt in ipairs(gpucoll.dtypes) do
    local b <close> = assert(comm:buffer(4, dt, where))
    b:set(2, cases[dt])
    local v = b:get(2)
    if dt == "float32" then
      assert(math.abs(v - 0.1) < 1e-8, dt)
    else
      eq(v, cases[dt], dt)
    end
    if dt:match("int") then eq(math.type(v), "integer", dt .. " type") end
    raises("out of range", b.get, b, 5)
    raises("out of range", b.get, b, 0)
  end
  local i <close> = comm:buffer(2, "int32", "host")
  raises("number has no integer representation", i.set, i, 1, 1.5)
end)

test("element conversions round to nearest even", function()
  local h <close> = comm:buffer(4, "float16", "host")
  eq(h:set(1, 1 / 3):get(1), 0.333251953125, "1/3 in float16")
  eq(h:set(1, 1 + 2 ^ -11):get(1), 1.0, "tie to even")
  eq(h:set(1, 1 + 3 * 2 ^ -11):get(1), 1 + 2 ^ -9, "tie to even (up)")
  eq(h:set(1, 1e6):get(1), math.huge, "float16 overflow")
  eq(h:set(1, 2 ^ -24):get(1), 2 ^ -24, "smallest subnormal")
  local b <close> = comm:buffer(1, "bfloat16", "host")
  eq(b:set(1, 1 + 2 ^ -9):get(1), 1.0, "bf16 rounding")
  local e4 <close> = comm:buffer(1, "fp8_e4m3", "host")
  eq(e4:set(1, 1000):get(1), 448.0, "e4m3 saturates")
  eq(e4:set(1, -2 ^ -9):get(1), -2 ^ -9, "e4m3 subnormal")
  local e5 <close> = comm:buffer(1, "fp8_e5m2", "host")
  eq(e5:set(1, 1e9):get(1), 57344.0, "e5m2 saturates")
  local u <close> = comm:buffer(1, "uint8", "host")
  eq(u:set(1, 300):get(1), 44, "uint8 wraps")
  local nan <close> = comm:buffer(1, "float32", "host")
  local x = nan:set(1, 0 / 0):get(1)
  assert(x ~= x, "NaN survives")
end)

test("fill, poison, copy_from, accumulate", function()
  local a <close> = comm:buffer(1000, "float32", where)
  local b <close> = comm:buffer(1000, "float32", "host")
  a:fill(42)
  b:fill(42)
  eq((a:compare(b, { rtol = 0, atol = 0 })), 0, "same seed, same data on host and device")
  b:fill(43)
  assert(a:compare(b) > 900, "another seed, other data")
  for i = 1, 1000, 37 do
    local v = b:get(i)
    assert(v >= -1 and v < 1, "float fill in [-1, 1)")
  end
  local ints <close> = comm:buffer(100, "int32", "host"):fill(7)
  for i = 1, 100 do
    local v = ints:get(i)
    assert(v >= -8 and v < 8 and math.type(v) == "integer", "int fill in [-8, 8)")
  end
  a:poison()
  local p = a:get(1)
  assert(p ~= p, "poisoned float is NaN")
  ints:poison()
  eq(ints:get(3), -1515870811, "poisoned int32 is 0xA5A5A5A5")
  a:copy_from(b)
  eq((a:compare(b, { rtol = 0, atol = 0 })), 0, "copy")
  -- Conversion on copy, and a partial copy.
  local d <close> = comm:buffer(1000, "float64", "host"):copy_from(b)
  eq(d:get(500), b:get(500), "float32 -> float64 exact")
  local part <close> = comm:buffer(10, "float32", "host"):fill(1)
  part:copy_from(b, 3)
  eq(part:get(3), b:get(3))
  local before = comm:buffer(10, "float32", "host"):fill(1)
  eq(part:get(4), before:get(4), "partial copy stops at n")
  raises("source holds 10 elements", a.copy_from, a, part)
  raises("count exceeds", part.copy_from, part, b, 11)
  -- accumulate: ops on the host in float64.
  local x <close> = comm:buffer(3, "float64", "host")
  local y <close> = comm:buffer(3, "int32", "host")
  for i = 1, 3 do
    x:set(i, i * 1.5)
    y:set(i, 2)
  end
  x:accumulate(y)
  eq(x:get(2), 5.0, "sum")
  x:accumulate(y, "prod")
  eq(x:get(2), 10.0, "prod")
  x:accumulate(y, "min")
  eq(x:get(2), 2.0, "min")
  raises("accumulate takes", x.accumulate, x, y, "avg")
end)

test("copy_from between a host-only and a GPU communicator", function()
  -- Only a GPU run has both kinds (gpu=1 makes sure every rank has a GPU); elsewhere every
  -- communicator is host-only and there is nothing to mix.
  if host_only then return end
  local hc <close> = assert(gpucoll.comm { use_gpu = false })
  eq(hc.device, -1, "use_gpu = false is host-only")
  local dev <close> = comm:buffer(100, "float32", "device"):fill(7)
  local h <close> = hc:buffer(100, "float32", "host"):poison()
  h:copy_from(dev) -- the destination's communicator cannot reach device memory
  eq((h:compare(dev, { rtol = 0, atol = 0 })), 0, "device -> host-only")
  h:fill(8)
  dev:poison():copy_from(h)
  eq((dev:compare(h, { rtol = 0, atol = 0 })), 0, "host-only -> device")
end)

test("compare", function()
  local a <close> = comm:buffer(100, "float32", where):fill(5)
  local b <close> = comm:buffer(100, "float64", "host"):copy_from(a)
  local wrong, first, maxerr = a:compare(b)
  eq(wrong, 0)
  eq(first, nil)
  eq(maxerr, 0.0)
  b:set(17, b:get(17) + 0.5)
  b:set(60, b:get(60) - 0.25)
  wrong, first, maxerr = a:compare(b)
  eq(wrong, 2, "wrong")
  eq(first, 17, "first bad (1-based)")
  assert(math.abs(maxerr - 0.5) < 1e-6, "max error")
  eq((a:compare(b, { atol = 0.6 })), 0, "atol")
  eq((a:compare(b, { rtol = 1e9 })), 0, "rtol")
  -- A function reference: i -> value.
  local c <close> = comm:buffer(5, "int64", "host")
  for i = 1, 5 do c:set(i, i * i) end
  eq((c:compare(function(i) return i * i end)), 0, "function reference")
  eq((c:compare(function(i) return i end)), 4, "function reference, 4 wrong")
  raises("boom", c.compare, c, function() error("boom") end)
  raises("non%-number", c.compare, c, function() return "x" end)
  raises("fewer elements", a.compare, a, c)
  raises("gpucoll.buffer or function expected", a.compare, a, 3)
  -- a misspelt tolerance must not pass a check with the default one
  raises("unknown option 'rtoll'", a.compare, a, b, { rtoll = 1e9 })
  raises("option 'rtol' must be a number", a.compare, a, b, { rtol = "x" })
  raises("option 'atol' must be a number", a.compare, a, b, { atol = {} })
end)

test("offset views", function()
  local a <close> = comm:buffer(10, "float16", "host"):fill(3)
  local v = a:offset(3)
  eq(#v, 7, "view count")
  eq(v:ptr() - a:ptr(), 6, "view starts 3 float16 in")
  eq(v:get(1), a:get(4), "view element")
  v:set(2, 0.75)
  eq(a:get(5), 0.75, "writes through the view")
  assert(tostring(v):find("host view"), tostring(v))
  eq(#v:offset(7), 0, "empty view at the end")
  raises("offset out of range", a.offset, a, 11)
  raises("a view cannot be freed", v.free, v)
  assert(a:offset(2) == a:offset(2), "views of the same range are equal")
  -- == with another kind of userdata is false, as for any two values, not an error
  eq(a == comm, false, "buffer == comm")
  eq(comm == a, false, "comm == buffer")
  eq(a == io.stdout, false, "buffer == file")
end)

test("__close, free and __gc", function()
  local saved
  do
    local b <close> = comm:buffer(8, "float32", where)
    saved = b
  end
  eq(saved.freed, true, "freed by __close")
  eq(tostring(saved), "gpucoll.buffer (freed)")
  raises("freed", saved.get, saved, 1)
  raises("freed", saved.offset, saved, 1)
  local f = comm:buffer(8, "float32", where)
  local view = f:offset(1)
  assert(f:free())
  assert(f:free(), "free twice is harmless")
  raises("freed", view.get, view, 1)
  for _ = 1, 100 do comm:buffer(1000, "float32", where) end
  collectgarbage()
  collectgarbage()
end)

test("allreduce", function()
  local n = 1001
  local send <close> = comm:buffer(n, "float32", where):fill(100 + rank)
  local recv <close> = comm:buffer(n, "float32", where):poison()
  local ref <close> = sum_reference(n, "float32", 100)
  assert(comm:allreduce(send, recv))
  assert(comm:sync())
  eq((recv:compare(ref)), 0, "sum")
  -- in place, explicit op and algo
  local inplace <close> = comm:buffer(n, "float32", where):fill(100 + rank)
  assert(comm:allreduce(inplace, inplace, { op = "sum", algo = "auto" }))
  eq((inplace:compare(ref)), 0, "in place")
  -- ops on integers: exact
  local is <close> = comm:buffer(50, "int32", where)
  local ir <close> = comm:buffer(50, "int32", where)
  for i = 1, 50 do is:set(i, (rank + 1) * i) end
  assert(comm:allreduce(is, ir, { op = "max" }))
  eq((ir:compare(function(i) return size * i end)), 0, "max")
  assert(comm:allreduce(is, ir, { op = "min" }))
  eq((ir:compare(function(i) return i end)), 0, "min")
  assert(comm:allreduce(is, ir, { op = "prod" }))
  local fact = 1
  for r = 1, size do fact = fact * r end
  eq((ir:compare(function(i) return fact * i ^ size end)), 0, "prod")
  local fs <close> = comm:buffer(10, "float64", where)
  local fr <close> = comm:buffer(10, "float64", where)
  for i = 1, 10 do fs:set(i, rank + i) end
  assert(comm:allreduce(fs, fr, { op = "avg" }))
  eq((fr:compare(function(i) return (size - 1) / 2 + i end)), 0, "avg")
  -- epilogue: scale and add, and the mpi algorithm
  local add <close> = comm:buffer(10, "float64", where)
  for i = 1, 10 do add:set(i, 1000 * i) end
  assert(comm:allreduce(fs, fr, { scale = 0.5, add = add, algo = "mpi" }))
  eq((fr:compare(function(i) return 0.5 * (size * i + size * (size - 1) / 2) + 1000 * i end)), 0,
     "scale + add")
  -- cast on output: recv's dtype is the output dtype
  local half <close> = comm:buffer(n, "float16", where):poison()
  assert(comm:allreduce(send, half))
  eq((half:compare(ref)), 0, "float32 -> float16")
  assert(comm:allreduce(send, half, { out_dtype = "float16" }))
  -- max_blocks and pdl are accepted (they matter on GPUs)
  assert(comm:allreduce(send, recv, { max_blocks = 2, pdl = true }))
  assert(comm:allreduce(send, recv, { pdl = false }))
  eq((recv:compare(ref)), 0, "max_blocks")
  -- an explicit count: only the first 10 elements are written
  recv:poison()
  assert(comm:allreduce(send, recv, { count = 10 }))
  local head <close> = comm:buffer(10, "float32", "host"):copy_from(recv, 10)
  eq((head:compare(ref)), 0, "count = 10")
  local tail = recv:get(11)
  assert(tail ~= tail, "element 11 still poisoned")
end)

test("allreduce over a compressed wire", function()
  -- powers of two, the same on every rank: every wire carries them and their sums exactly
  local n = 300
  local s <close> = comm:buffer(n, "float32", where)
  local r <close> = comm:buffer(n, "float32", where)
  for i = 1, n do s:set(i, 2.0 ^ (i % 4)) end
  local function want(i) return size * 2.0 ^ (i % 4) end
  for _, o in ipairs({ { wire = "fp8" }, { wire = "fp8", wire_group = 128 }, { wire = "bf16" }, { wire = "native" } }) do
    r:poison()
    assert(comm:allreduce(s, r, o))
    eq((r:compare(want)), 0, "wire " .. o.wire)
  end
  local i32 <close> = comm:buffer(n, "int32", where)
  local ok, msg, code = comm:allreduce(i32, i32, { wire = "fp8" })
  fails("GC_ERR_INVALID_ARGUMENT", ok, msg, code)
  assert(msg:find("the fp8 wire takes float32, float16 or bfloat16 data"), msg)
  ok, msg, code = comm:allgather(s, comm:buffer(n * size, "float32", where), { wire = "fp8" })
  fails("GC_ERR_INVALID_ARGUMENT", ok, msg, code)
  assert(msg:find("only gc_allreduce_ex takes a compressed wire"), msg)
  raises("option 'wire' must be \"native\", \"fp8\" or \"bf16\"", comm.allreduce, comm, s, r, { wire = "fp4" })
  raises("option 'wire' must be", comm.allreduce, comm, s, r, { wire = 1 })
  raises("wire_group must be 32, 64 or 128", comm.allreduce, comm, s, r, { wire = "fp8", wire_group = -1 })
end)

test("collective argument errors raise", function()
  local a <close> = comm:buffer(16, "float32", where)
  local small <close> = comm:buffer(8, "float32", where)
  local i32 <close> = comm:buffer(16, "int32", where)
  raises("recv buffer holds 8 elements, the call needs 16", comm.allreduce, comm, a, small)
  raises("bad argument #%d+ to .-option 'op': unknown op 'mean'", comm.allreduce, comm, a, a, { op = "mean" })
  raises("unknown algo 'threeshot'", comm.allreduce, comm, a, a, { algo = "threeshot" })
  raises("unknown option 'algos'", comm.allreduce, comm, a, a, { algos = "auto" })
  raises("max_blocks must be between 0 and 2147483647", comm.allreduce, comm, a, a, { max_blocks = -1 })
  raises("max_blocks must be between 0 and 2147483647", comm.allreduce, comm, a, a, { max_blocks = (1 << 32) + 1 })
  raises("option 'max_blocks' must be an integer", comm.allreduce, comm, a, a, { max_blocks = 1.5 })
  raises("option 'scale' must be a number", comm.allreduce, comm, a, a, { scale = "x" })
  raises("option 'out_dtype': unknown dtype 'float7'", comm.allreduce, comm, a, a, { out_dtype = "float7" })
  raises("out_dtype float16 does not match", comm.allreduce, comm, a, a, { out_dtype = "float16" })
  raises("the add buffer must have the input dtype", comm.allreduce, comm, a, a, { add = i32 })
  raises("option 'add' must be a gpucoll.buffer", comm.allreduce, comm, a, a, { add = 1 })
  raises("add buffer holds 8", comm.allreduce, comm, a, a, { add = small })
  raises("option 'op' applies to reductions only", comm.allgather, comm, small, a, { op = "sum" })
  raises("same dtype", comm.allgather, comm, small, i32)
  raises("root out of range", comm.broadcast, comm, a, a, size)
  -- pdl is a boolean: 0 or -1 (gc_options_t's "default" and "off") must not turn it on
  raises("option 'pdl' must be a boolean", comm.allreduce, comm, a, a, { pdl = 0 })
  raises("option 'pdl' must be a boolean", comm.allreduce, comm, a, a, { pdl = -1 })
  raises("axis must be 0", comm.reducescatter_2d, comm, a, a, 4, 4, 2)
  raises("gpucoll.buffer expected", comm.allreduce, comm, a, 5)
  raises("gpucoll.comm expected", comm.allreduce, a, a, a)
  -- The root must give a send buffer: refused there before the call (its peers, which need
  -- none, would wait in the broadcast for ever), so only the root tries.
  if rank == 0 then raises("the root needs a send buffer", comm.broadcast, comm, nil, a, 0) end
end)

test("expected failures return nil, message, code", function()
  local e4 <close> = comm:buffer(16, "fp8_e4m3", where)
  fails("GC_ERR_UNSUPPORTED", comm:allreduce(e4, e4)) -- fp8 is an output type, not reducible
  fails(nil, comm:buffer(1 << 50, "float32", "host"))  -- 4 PiB
  if host_only then
    fails("GC_ERR_UNSUPPORTED", comm:nccl())
    local h <close> = comm:buffer(4, "float32", "host")
    fails(nil, comm:time(function(s) return comm:allreduce(h, h, { stream = s }) end, { graph = true }))
  end
  if rank == 0 then
    fails("GC_ERR_SYSTEM", gpucoll.csv("/nonexistent-dir/x.csv", { { a = 1 } }))
    fails("GC_ERR_SYSTEM", gpucoll.json("/nonexistent-dir/x.json", {}))
  else
    eq(gpucoll.csv("/nonexistent-dir/x.csv", { { a = 1 } }), true, "other ranks write nothing")
  end
end)

test("reducescatter", function()
  local rc = 37
  local send <close> = comm:buffer(rc * size, "float32", where):fill(200 + rank)
  local recv <close> = comm:buffer(rc, "float32", where):poison()
  local ref <close> = sum_reference(rc, "float32", 200, rank * rc)
  assert(comm:reducescatter(send, recv))
  eq((recv:compare(ref)), 0, "reducescatter")
  -- in place: the rank's slice of the same buffer
  local buf <close> = comm:buffer(rc * size, "float32", where):fill(200 + rank)
  assert(comm:reducescatter(buf, buf))
  local mine <close> = comm:buffer(rc, "float32", "host"):copy_from(buf:offset(rank * rc), rc)
  eq((mine:compare(ref)), 0, "reducescatter in place")
end)

test("reducescatter_2d", function()
  local rows, cols = 2 * size + 1, 3 * size + 2 -- uneven splits on purpose
  local send <close> = comm:buffer(rows * cols, "float64", where)
  for i = 1, rows * cols do send:set(i, (rank + 1) * i) end
  local factor = size * (size + 1) / 2
  for axis = 0, 1 do
    local off, len = gpucoll.partition(axis == 0 and rows or cols, size, rank)
    local outn = axis == 0 and len * cols or rows * len
    local recv <close> = comm:buffer(outn, "float64", where):poison()
    assert(comm:reducescatter_2d(send, recv, rows, cols, axis))
    eq((recv:compare(function(i)
      local r, c
      if axis == 0 then
        r, c = off + (i - 1) // cols, (i - 1) % cols
        return factor * (r * cols + c + 1)
      end
      r, c = (i - 1) // len, off + (i - 1) % len
      return factor * (r * cols + c + 1)
    end)), 0, "axis " .. axis)
  end
end)

test("reducescatter_2d in place", function()
  -- Uneven rows: every rank but 0 has its part away from the start of the buffer.
  local rows, cols = 2 * size + 1, 3
  local factor = size * (size + 1) / 2
  local buf <close> = comm:buffer(rows * cols, "float64", where)
  for i = 1, rows * cols do buf:set(i, (rank + 1) * i) end
  local off, len = gpucoll.partition(rows, size, rank)
  assert(comm:reducescatter_2d(buf, buf, rows, cols, 0))
  local mine <close> = comm:buffer(len * cols, "float64", "host"):copy_from(buf:offset(off * cols), len * cols)
  eq((mine:compare(function(i) return factor * (off * cols + i) end)), 0, "axis 0 in place")
  -- The library has no in-place layout for columns: refused on every rank alike.
  raises("in place needs axis 0", comm.reducescatter_2d, comm, buf, buf, rows, cols, 1)
end)

test("allgather", function()
  local sc = 29
  local send <close> = comm:buffer(sc, "bfloat16", where):fill(300 + rank)
  local recv <close> = comm:buffer(sc * size, "bfloat16", where):poison()
  local ref <close> = comm:buffer(sc * size, "bfloat16", "host")
  local tmp <close> = comm:buffer(sc, "bfloat16", "host")
  for r = 0, size - 1 do ref:offset(r * sc):copy_from(tmp:fill(300 + r), sc) end
  assert(comm:allgather(send, recv))
  eq((recv:compare(ref, { rtol = 0, atol = 0 })), 0, "allgather")
  local buf <close> = comm:buffer(sc * size, "bfloat16", where):poison()
  buf:offset(rank * sc):copy_from(send, sc)
  assert(comm:allgather(buf, buf))
  eq((buf:compare(ref, { rtol = 0, atol = 0 })), 0, "allgather in place")
end)

test("broadcast", function()
  local n = 77
  local root = size - 1
  local send <close> = comm:buffer(n, "int64", where):fill(400 + rank)
  local recv <close> = comm:buffer(n, "int64", where):poison()
  local ref <close> = comm:buffer(n, "int64", "host"):fill(400 + root)
  assert(comm:broadcast(rank == root and send or nil, recv, root))
  eq((recv:compare(ref)), 0, "broadcast, nil send off the root")
  assert(comm:broadcast(send, send, 0))
  local ref0 <close> = comm:buffer(n, "int64", "host"):fill(400)
  eq((send:compare(ref0)), 0, "broadcast in place from 0")
end)

test("symmetric buffers", function()
  local s = assert(comm:symmetric(256, "float32"))
  eq(s.kind, "symmetric")
  s:fill(500 + rank)
  local ref <close> = sum_reference(256, "float32", 500)
  assert(comm:allreduce(s, s))
  eq((s:compare(ref)), 0, "allreduce in a symmetric buffer")
  assert(s:free()) -- collective
  eq(s.freed, true)
end)

test("time", function()
  local b <close> = comm:buffer(256, "float32", where):fill(1)
  local calls, stream_seen = 0, nil
  local us = assert(comm:time(function(stream)
    calls = calls + 1
    stream_seen = stream
    return comm:allreduce(b, b, { stream = stream })
  end, { warmup = 2, iters = 5, graph = false }))
  eq(type(us), "number")
  assert(us > 0, "positive time")
  eq(calls, 7, "warmup + iters calls")
  eq(math.type(stream_seen), "integer")
  -- The maximum over ranks: the same value everywhere.
  local t <close> = comm:buffer(1, "float64", "host"):set(1, us)
  local tmax <close> = comm:buffer(1, "float64", "host")
  assert(comm:allreduce(t, tmax, { op = "max" }))
  eq(tmax:get(1), us, "max over ranks")
  -- fn's expected failure comes back as nil, msg, code; a raise propagates.
  local e4 <close> = comm:buffer(4, "fp8_e4m3", where)
  fails("GC_ERR_UNSUPPORTED", comm:time(function(s) return comm:allreduce(e4, e4, { stream = s }) end,
                                             { warmup = 0, iters = 1, graph = false }))
  raises("inside timed", comm.time, comm, function() error("inside timed") end, { graph = false })
  raises("option 'iters' must be between 1 and 2147483647", comm.time, comm, function() end, { iters = 0 })
  -- 2^32 + 1 must not wrap to 1 iteration
  raises("option 'iters' must be between 1 and 2147483647", comm.time, comm, function() end,
         { iters = (1 << 32) + 1, graph = false })
  raises("option 'warmup' must be between 0 and 2147483647", comm.time, comm, function() end,
         { warmup = -1 })
  raises("unknown option 'iter'", comm.time, comm, function() end, { iter = 3 })
end)

test("callbacks cannot free what C is using", function()
  local b <close> = comm:buffer(8, "float64", "host"):fill(1)
  raises("cannot free the buffer inside its own compare%(%) callback", b.compare, b,
         function() b:free() return 0 end)
  eq(b.freed, false, "still allocated")
  raises("cannot free the buffer inside its own compare%(%) callback", b.compare, b,
         function() local _ <close> = b return 0 end)
  eq(b.freed, false, "still allocated after __close")
  local v = b:offset(2)
  raises("cannot free the buffer inside its own compare%(%) callback", v.compare, v,
         function() b:free() return 0 end)
  eq((b:compare(function(i) return b:get(i) end)), 0, "compare reads its own buffer")
  -- A second communicator: close() is collective, and every rank tries alike.
  local c2 = assert(gpucoll.comm { use_gpu = use_gpu })
  local opts = { warmup = 0, iters = 1, graph = false }
  raises("cannot close the communicator inside", c2.time, c2, function() c2:close() end, opts)
  raises("cannot close the communicator inside", c2.time, c2,
         function() local _ <close> = c2 end, opts)
  eq(c2.closed, false, "still open")
  local cb <close> = c2:buffer(4, "float32", "host"):fill(2)
  raises("cannot close the communicator inside", cb.compare, cb, function() c2:close() return 0 end)
  eq(cb.freed, false, "still allocated")
  assert(c2:time(function() end, opts), "usable afterwards")
  assert(c2:close())
end)

test("options are the table's own fields: no metamethod runs while a call parses them", function()
  local n = 64
  local send <close> = comm:buffer(n, "float32", where):fill(7 + rank)
  local recv <close> = comm:buffer(n, "float32", where):poison()
  local ref <close> = sum_reference(n, "float32", 7)
  local asked = {}
  -- An __index that frees the send buffer the call already holds: it must never run.
  local opts = setmetatable({ op = "sum" }, { __index = function(_, k) asked[#asked + 1] = k; send:free() end })
  assert(comm:allreduce(send, recv, opts))
  assert(comm:sync())
  eq(#asked, 0, "__index consulted")
  eq(send.freed, false, "send still allocated")
  eq((recv:compare(ref)), 0, "sum")
  -- Inherited fields are not options: {count = 1} through __index is ignored, as check_keys would.
  recv:poison()
  assert(comm:allreduce(send, recv, setmetatable({}, { __index = { count = 1 } })))
  assert(comm:sync())
  eq((recv:compare(ref)), 0, "whole buffer reduced")
  local tol = setmetatable({}, { __index = function() send:free() return 1e9 end })
  eq((recv:compare(ref, tol)), 0, "compare's tolerances read raw")
  eq(send.freed, false, "send still allocated after compare")
end)

test("table output", function()
  local rows = { { name = "a", n = 1, t = 12.345 }, { name = "longer", n = 1000, t = 0.00123 }, { name = "c" } }
  local text = gpucoll.table(rows, { "name", "n", "t" })
  -- the t column is as wide as its widest cell
  local expect = "name       n        t\n" ..
           "------  ----  -------\n" ..
           "a          1    12.35\n" ..
           "longer  1000  0.00123\n" ..
           "c          -        -\n"
  eq(text, expect, "table text")
  local fmt = gpucoll.table({ { x = 3.14159 } }, { { "x", "%.1f" } })
  eq(fmt, "  x\n---\n3.1\n", "column format")
  local auto = gpucoll.table({ { b = 1, a = "z" } })
  eq(auto, "a  b\n-  -\nz  1\n", "columns from sorted keys")
  raises("row 1 is not a table", gpucoll.table, { 5 }, { "a" })
end)

test("table column formats", function()
  local function cell(v, f) return gpucoll.table({ { x = v } }, { { "x", f } }):match("\n[^\n]*\n(.-)\n$") end
  eq(cell(3.14159, "%.1f us"), "3.1 us", "a 'u' after the conversion is text")
  eq(cell(42.4, "%.0f%%"), "42%", "%% is a literal %")
  eq(cell(1 << 40, "%d"), "1099511627776", "integers are not cut to 32 bits")
  eq(cell(255, "%#06x"), "0x00ff", "flags and width")
  eq(cell(65, "%c"), "A")
  eq(cell(7, "%5.2e"), "7.00e+00", "an integer in a float format")
  eq(cell(2.0, "%d"), "2", "a float with an integer value")
  eq(cell(nil, "%d"), "-", "nil")
  eq(cell("txt", "%d"), "txt", "text is not formatted")
  raises("column 'x': format '%%d' needs an integer, got 2.5", gpucoll.table, { { x = 2.5 } }, { { "x", "%d" } })
  for _, bad in ipairs { "%s", "%n", "%p", "%ld", "%lf", "%*d", "%.*f", "%100d", "%d and %d", "%", "x%", "us", "%%" } do
    raises("column 'x': bad format '" .. bad:gsub("%p", "%%%0") .. "'", gpucoll.table, { { x = 1 } }, { { "x", bad } })
  end
  raises("column 'y': bad format '%%s'", gpucoll.csv, nil, { { x = 1, y = 2 } }, { "x", { "y", "%s" } })
end)

test("csv output", function()
  local rows = { { coll = "allreduce", bytes = 1024, t = 1.5 }, { coll = 'a,"b"', bytes = 2 } }
  local text = gpucoll.csv(nil, rows, { "coll", "bytes", "t" })
  eq(text, 'coll,bytes,t\nallreduce,1024,1.5\n"a,""b""",2,\n', "csv text")
  local path = os.tmpname()
  assert(gpucoll.csv(path, rows, { "coll", "bytes", "t" }))
  if rank == 0 then
    local f = assert(io.open(path))
    eq(f:read("a"), text, "csv file")
    f:close()
    os.remove(path)
  end
end)

test("json output", function()
  local v = { b = { 1, 2, 3 }, a = "x\"y\n", c = true, d = 1.5, e = {}, [1] = nil, f = { k = false } }
  local text = gpucoll.json(nil, v)
  eq(text, '{"a":"x\\"y\\n","b":[1,2,3],"c":true,"d":1.5,"e":{},"f":{"k":false}}\n', "json text")
  eq(gpucoll.json(nil, { [2] = "two", [1] = "one" }), '["one","two"]\n', "array")
  eq(gpucoll.json(nil, { [3] = 1 }), '{"3":1}\n', "sparse keys become an object")
  eq(gpucoll.json(nil, 0 / 0), "null\n", "NaN is null")
  raises("cannot encode a function", gpucoll.json, nil, { f = print })
  local cyc = {}
  cyc.self = cyc
  raises("nesting deeper than 64", gpucoll.json, nil, cyc)
  local path = os.tmpname()
  assert(gpucoll.json(path, v))
  if rank == 0 then
    local f = assert(io.open(path))
    eq(f:read("a"), text, "json file")
    f:close()
    os.remove(path)
  end
end)

test("json nesting", function()
  -- Cycles through arrays and objects, from a coroutine (a small stack of its own): each level
  -- holds stack slots, far more than the 20 a C function is given.
  local arr, obj, mixed = {}, {}, {}
  arr[1] = arr
  obj.k = obj
  mixed[1] = { k = mixed }
  for round = 1, 20 do
    for _, v in ipairs { arr, obj, mixed } do
      local ok, err = coroutine.wrap(function() return pcall(gpucoll.json, nil, v) end)()
      eq(ok, false, "a cycle fails")
      assert(tostring(err):find("nesting deeper than 64"), err)
    end
    collectgarbage()
  end
  -- 64 levels below the top are fine.
  local deep = {}
  local t = deep
  for _ = 1, 63 do
    t[1] = {}
    t = t[1]
  end
  t[1] = 1
  local text = coroutine.wrap(function() return gpucoll.json(nil, deep) end)()
  eq(text, string.rep("[", 64) .. "1" .. string.rep("]", 64) .. "\n", "64 levels")
end)

test("progress", function()
  -- Under ctest stderr is a pipe: the bar stays off. On a terminal it draws on rank 0 only.
  local drew = gpucoll.progress(1, 10, "step")
  eq(type(drew), "boolean")
  if rank ~= 0 then eq(drew, false, "only rank 0 draws") end
  raises("n must be > 0", gpucoll.progress, 1, 0)
end)

test("nccl", function()
  local nc, msg, code = comm:nccl()
  if nc then
    assert(tostring(nc):find("NCCL"))
    local b <close> = comm:buffer(1024, "float32", where):fill(600 + rank)
    local r <close> = comm:buffer(1024, "float32", where)
    local ref <close> = sum_reference(1024, "float32", 600)
    assert(nc:allreduce(b, r))
    assert(comm:sync())
    eq((r:compare(ref)), 0, "NCCL allreduce")
    raises("unknown option 'algo'", nc.allreduce, nc, b, r, { algo = "oneshot" })
    assert(nc:close())
    raises("closed", nc.allreduce, nc, b, r)
  else
    eq(type(msg), "string")
    eq(code, "GC_ERR_UNSUPPORTED")
  end
end)

test("plan", function()
  local b = comm:buffer(1000, "float32", "host")
  local r = comm:buffer(1000, "float32", "host")
  local p = assert(comm:plan("allreduce", b, r))
  eq(p.path, "mpi") -- host buffers take the MPI path
  eq(p.algorithm, "mpi")
  eq(p.blocks, 0)
  eq(p.fell_from, nil)
  eq(type(p.staged), "boolean")
  local q = assert(comm:plan("broadcast", b, r, 0))
  eq(q.path, "mpi")
  local p0 = assert(comm:plan("allreduce", b, r, { count = 0 }))
  eq(p0.path, "none")
  fails("GC_ERR_UNSUPPORTED", comm:plan("allreduce", b, r, { algo = "oneshot" }))
  raises("invalid option", comm.plan, comm, "alltoall", b, r)
end)

test("autotune, tune_save, tune_load", function()
  local table_text = assert(comm:autotune(16 * 1024, "float32"))
  assert(table_text:find("tuned"), table_text)
  local path = string.format("/tmp/gpucoll-lua-test-%d.tune", size)
  assert(comm:tune_save(path))
  assert(comm:tune_reset())
  assert(not comm.algo_table:find("tuned"))
  assert(comm:tune_load(path))
  eq(comm.algo_table, table_text, "table after load")
  fails("GC_ERR_SYSTEM", comm:tune_load("/nonexistent-dir/none.tune"))
  fails("GC_ERR_INVALID_ARGUMENT", comm:autotune(10))
  assert(comm:tune_reset())
end)

test("close", function()
  local c2 = assert(gpucoll.comm { use_gpu = use_gpu })
  local b = c2:buffer(4, "float32", "host")
  local sym = c2:symmetric(4, "float32")
  assert(c2:close())
  eq(c2.closed, true)
  eq(tostring(c2), "gpucoll.comm (closed)")
  assert(c2:close(), "close twice is harmless")
  raises("the communicator is closed", c2.buffer, c2, 4, "float32")
  raises("the communicator is closed", c2.sync, c2)
  raises("closed", function() return c2.rank end)
  eq(b.freed, true, "buffers go with their communicator")
  eq(sym.freed, true, "symmetric buffers too")
  do
    local c3 <close> = assert(gpucoll.comm { use_gpu = use_gpu })
    c2 = c3
  end
  eq(c2.closed, true, "closed by __close")
end)

H.finish(comm)
