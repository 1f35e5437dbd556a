-- test_mixed.lua — comm:reducescatter_allreduce and comm:allreduce_allgather on communicators split
-- into nodes of L ranks (gpucoll.comm{local_size = L}), element by element against references
-- computed here; in place, the epilogue, and the errors (2+ ranks).
-- CI: mpirun -np 2 --oversubscribe gpucoll-lua run test_mixed.lua        (host buffers)
-- GPU: mpirun -np 4 gpucoll-lua run test_mixed.lua gpu=1                 (device buffers)
local gpucoll = require "gpucoll"
local H = dofile((arg[0]:match("^(.*[/\\])") or "") .. "harness.lua")
local test, raises = H.test, H.raises

local comm <close>, use_gpu = H.open(arg)
local rank, size = comm.rank, comm.size

-- Known data, exact in every float dtype, and so are their sums, the epilogue below and averages
-- over 2^k ranks (multiples of 1/64 under 4: 8 significant bits): rank r's element i (0-based),
-- multiples of 1/8 in [-5/8, 5/8], and the add vector's, multiples of 1/4.
local function input(r, i) return ((i * 5 + r * 3) % 11 - 5) / 8 end
local function add_value(j) return (j % 7 - 3) / 4 end

local RS_COUNT, AG_COUNT = 13, 11 -- recvcount and sendcount: odd on purpose

-- Nodes of 1 rank, of 2 (when that splits the world into several nodes) and of every rank.
local node_sizes = { 1 }
if size % 2 == 0 and size > 2 then node_sizes[#node_sizes + 1] = 2 end
if size > 1 then node_sizes[#node_sizes + 1] = size end

local eq = H.eq

-- A buffer of nc's (device on GPU ranks) holding fn(0) .. fn(n-1).
local function buffer_of(nc, n, dtype, fn)
  local where = nc.device < 0 and "host" or "device"
  local b = nc:buffer(n, dtype, where)
  local h <close> = nc:buffer(n, dtype, "host")
  for i = 1, n do h:set(i, fn(i - 1)) end
  return b:copy_from(h)
end

-- The reduction of input(r, i) over the ranks r that `takes`, GC_AVG dividing by `divisor`, then
-- the epilogue of o (scale, add_value(j)).
local function reduced(i, j, op, takes, divisor, o)
  local s = 0
  for r = 0, size - 1 do
    if takes(r) then s = s + input(r, i) end
  end
  if op == "avg" then s = s / divisor end
  if o.scale then s = s * o.scale end
  if o.add then s = s + add_value(j) end
  return s
end

local function every(_) return true end

-- reducescatter_allreduce: element j (1-based) of the block of local rank lr, over every rank.
local function rs_ar_reference(lr, count, op, o)
  return function(j)
    return reduced(lr * count + j - 1, j - 1, op, every, size, o)
  end
end

-- allreduce_allgather: element k (1-based) of recv lies in block l, the reduction over the ranks of
-- local rank l (nodes of consecutive ranks: l, l + L, ...), GC_AVG dividing by the node count.
local function ar_ag_reference(L, count, op, o)
  return function(k)
    local l, j = (k - 1) // count, (k - 1) % count
    return reduced(j, j, op, function(r) return r % L == l end, size // L, o)
  end
end

-- Wrong elements of b (all of them, or its first n) against ref: exactly, or within one rounding
-- of b's dtype (compare's defaults) where tol is "rounded".
local function wrong(nc, b, ref, n, tol)
  local t = tol ~= "rounded" and { rtol = 0, atol = 0 } or nil
  if n then
    local h <close> = nc:buffer(n, b.dtype, "host"):copy_from(b, n)
    return (h:compare(ref, t))
  end
  return (b:compare(ref, t))
end

-- One call of method ("reducescatter_allreduce" or "allreduce_allgather") on nc with dtype and op;
-- o: in_place, out_dtype (recv's dtype), scale, add (the add vector as an option).
local function run_case(nc, method, dtype, op, o)
  local L, lr = nc.local_size, nc.local_rank
  local rs = method == "reducescatter_allreduce"
  local count = rs and RS_COUNT or AG_COUNT
  local opts = { op = op, scale = o.scale }
  local add <close> = o.add and buffer_of(nc, count, dtype, add_value) or nil
  opts.add = add
  local ref = rs and rs_ar_reference(lr, count, op, o) or ar_ag_reference(L, count, op, o)
  local where = nc.device < 0 and "host" or "device"
  -- averages over a number of ranks that is no power of 2 are rounded
  local divisor = rs and size or size // L
  local tol = op == "avg" and divisor & (divisor - 1) ~= 0 and "rounded" or "exact"
  if rs then
    local send <close> = buffer_of(nc, L * count, dtype, function(i) return input(rank, i) end)
    if o.in_place then
      assert(nc:reducescatter_allreduce(send, send, opts))
      return wrong(nc, send:offset(lr * count), ref, count, tol)
    end
    local recv <close> = nc:buffer(count, o.out_dtype or dtype, where):poison()
    assert(nc:reducescatter_allreduce(send, recv, opts))
    return wrong(nc, recv, ref, nil, tol)
  end
  local send <close> = buffer_of(nc, count, dtype, function(i) return input(rank, i) end)
  local recv <close> = nc:buffer(L * count, o.out_dtype or dtype, where):poison()
  if o.in_place then
    recv:offset(lr * count):copy_from(send, count)
    assert(nc:allreduce_allgather(recv, recv, opts))
  else
    assert(nc:allreduce_allgather(send, recv, opts))
  end
  return wrong(nc, recv, ref, nil, tol)
end

local function check_case(nc, name, method, dtype, op, o)
  test(string.format("nodes of %d: %s %s %s %s", nc.local_size, method, dtype, op, name), function()
    local bad = run_case(nc, method, dtype, op, o)
    if bad > 0 then error(bad .. " elements differ from the reference") end
  end)
end

for _, L in ipairs(node_sizes) do
  local nc <close> = assert(gpucoll.comm { local_size = L, use_gpu = use_gpu })

  test(string.format("nodes of %d: consecutive ranks", L), function()
    eq(nc.local_size, L, "local_size")
    eq(nc.local_rank, rank % L, "local_rank")
    eq(nc.node_count, size // L, "node_count")
  end)

  for _, method in ipairs { "reducescatter_allreduce", "allreduce_allgather" } do
    for _, dtype in ipairs { "float32", "bfloat16", "float16" } do
      for _, op in ipairs { "sum", "avg" } do
        check_case(nc, "", method, dtype, op, {})
      end
    end
    check_case(nc, "in place", method, "float32", "sum", { in_place = true })
    check_case(nc, "in place", method, "bfloat16", "avg", { in_place = true })
    check_case(nc, "scale + add", method, "bfloat16", "sum", { scale = 0.5, add = true })
    check_case(nc, "scale + add in place", method, "float32", "avg",
               { scale = 0.5, add = true, in_place = true })
    check_case(nc, "scale + add into float32", method, "bfloat16", "avg",
               { scale = 2, add = true, out_dtype = "float32" })
  end
end

test("the reference check can fail", function()
  -- One node of every rank: allreduce_allgather gathers the ranks' own inputs, which the
  -- all-reduce's reference (every rank in every block) does not match (on 2+ ranks).
  if size == 1 then return end
  local nc <close> = assert(gpucoll.comm { local_size = size, use_gpu = use_gpu })
  local send <close> = buffer_of(nc, AG_COUNT, "float32", function(i) return input(rank, i) end)
  local recv <close> = nc:buffer(size * AG_COUNT, "float32", nc.device < 0 and "host" or "device")
  assert(nc:allreduce_allgather(send, recv))
  assert(wrong(nc, recv, ar_ag_reference(size, AG_COUNT, "sum", {})) == 0, "the right reference failed")
  assert(wrong(nc, recv, ar_ag_reference(1, AG_COUNT, "sum", {})) > 0, "a wrong reference passed")
end)

test("argument errors raise, naming the argument", function()
  local L = size % 2 == 0 and 2 or 1
  local nc <close> = assert(gpucoll.comm { local_size = L, use_gpu = use_gpu })
  local where = nc.device < 0 and "host" or "device"
  local n = 8
  local big <close> = nc:buffer(L * n, "float32", where):fill(1)
  local small <close> = nc:buffer(n, "float32", where):fill(2)
  local short <close> = nc:buffer(n - 1, "float32", where)
  local i32 <close> = nc:buffer(L * n, "int32", where)
  local rs, ag = nc.reducescatter_allreduce, nc.allreduce_allgather
  -- the counts come from the buffers: recvcount = #send // L, sendcount = #send
  raises("recv buffer holds 7 elements, the call needs 8", rs, nc, big, short)
  raises(string.format("recv buffer holds %d elements, the call needs %d", n - 1, L * n), ag, nc,
         small, short)
  if L > 1 then -- recv of sendcount elements (send itself would be in place)
    local other <close> = nc:buffer(n, "float32", where)
    raises(string.format("recv buffer holds %d elements, the call needs %d", n, L * n), ag, nc,
           small, other)
  end
  -- the add vector holds recvcount resp. sendcount elements of the input dtype
  raises("add buffer holds 7 elements, the call needs 8", rs, nc, big, small, { add = short })
  raises("add buffer holds 7 elements, the call needs 8", ag, nc, small, big, { add = short })
  raises("the add buffer must have the input dtype", ag, nc, small, big, { add = i32 })
  raises("option 'add' must be a gpucoll.buffer", rs, nc, big, small, { add = 1 })
  raises("out_dtype float16 does not match recv's dtype float32", rs, nc, big, small,
         { out_dtype = "float16" })
  raises("option 'op': unknown op 'mean'", ag, nc, small, big, { op = "mean" })
  raises("unknown option 'ops'", rs, nc, big, small, { ops = "sum" })
  raises("gpucoll.buffer expected", ag, nc, small, 5)
  raises("gpucoll.comm expected", rs, big, big, small)
  local closed = assert(gpucoll.comm { local_size = L, use_gpu = use_gpu })
  assert(closed:close())
  raises("the communicator is closed", ag, closed, small, big)
end)

test("library failures return nil, the library's message, code", function()
  local L = size % 2 == 0 and 2 or 1
  local nc <close> = assert(gpucoll.comm { local_size = L, use_gpu = use_gpu })
  local where = nc.device < 0 and "host" or "device"
  local e4 <close> = nc:buffer(L * 4, "fp8_e4m3", where)
  local ok, msg, code = nc:reducescatter_allreduce(e4, e4)
  assert(ok == nil and code == "GC_ERR_UNSUPPORTED" and msg:find("cannot be reduced"), tostring(msg))
  local e4_send <close> = nc:buffer(4, "fp8_e4m3", where)
  ok, msg, code = nc:allreduce_allgather(e4_send, e4)
  assert(ok == nil and code == "GC_ERR_UNSUPPORTED" and msg:find("cannot be reduced"), tostring(msg))
  if L > 1 and nc.node_count > 1 then -- int32 averages across nodes would wrap
    local ints <close> = nc:buffer(L * 4, "int32", where):fill(1)
    local out <close> = nc:buffer(4, "int32", where)
    ok, msg, code = nc:reducescatter_allreduce(ints, out, { op = "avg" })
    assert(ok == nil and code == "GC_ERR_UNSUPPORTED" and msg:find("would wrap"), tostring(msg))
  end
  if size > 2 then -- nodes of different sizes: size - 1 ranks, then one
    local uneven <close> = assert(gpucoll.comm { local_size = size - 1, use_gpu = use_gpu })
    local s <close> = uneven:buffer(size, "float32", where):fill(3)
    local r <close> = uneven:buffer(size, "float32", where)
    ok, msg, code = uneven:allreduce_allgather(s, r, { count = 1 })
    assert(ok == nil and code == "GC_ERR_UNSUPPORTED" and msg:find("same number of ranks"), tostring(msg))
  end
end)

H.finish(comm)
