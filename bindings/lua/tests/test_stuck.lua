-- test_stuck.lua — work that does not end gives GC_ERR_STREAM_TIMEOUT, not a hang. free() and
-- close() on a device kept busy free nothing and work once it is idle; a wait on NCCL work that
-- cannot finish aborts the NCCL communicator, the stream drains, gpucoll goes on (GPU, one rank
-- per GPU; the stuck NCCL collective itself needs 2+ GPUs). gpucoll_hold is a test-only module.
-- GPU: mpirun -np 2 gpucoll-lua run test_stuck.lua gpu=1   (LUA_CPATH finds gpucoll_hold.so)
local gpucoll = require "gpucoll"
local H = dofile((arg[0]:match("^(.*[/\\])") or "") .. "harness.lua")
local test, eq = H.test, H.eq
local hold = require "gpucoll_hold"

local comm <close> = H.open(arg) -- the default timeout: the meeting points below outlast 1 s
local rank, size = comm.rank, comm.size
-- Waits on tc are bounded by 2 x 1000 ms.
local tc <close> = assert(gpucoll.comm { timeout_ms = 1000 })

local function meet()
  local f <close> = comm:buffer(1, "int32", "host"):set(1, 1)
  assert(comm:allreduce(f, f))
  eq(f:get(1), size, "meeting")
end

-- A gpucoll all-reduce on tc: right after whatever went before.
local function gpucoll_still_works()
  local a <close> = tc:buffer(4096, "float32"):fill(7)
  local r <close> = tc:buffer(4096, "float32"):poison()
  assert(tc:allreduce(a, r, { op = "max" }))
  local ref <close> = tc:buffer(4096, "float32", "host"):fill(7)
  eq((r:compare(ref)), 0, "all-reduce after the abort")
end

-- tc:sync() on a stream NCCL holds up: nil, GC_ERR_STREAM_TIMEOUT, the abort told, within [lo, hi] s.
local function sync_gives_up(what, lo, hi)
  local t0 = hold.now()
  local ok, msg, code = tc:sync()
  local took = hold.now() - t0
  eq(ok, nil, what)
  eq(code, "GC_ERR_STREAM_TIMEOUT", "code (" .. tostring(msg) .. ")")
  assert(msg:find("gc_synchronize: the stream's work did not finish", 1, true), msg)
  assert(msg:find("aborted the NCCL communicator", 1, true), msg)
  assert(msg:find("the stream has finished since", 1, true), msg)
  assert(took > lo and took < hi, what .. " took " .. took .. " s")
end

-- nil, GC_ERR_STREAM_TIMEOUT and a message with `text` from a call that gave up.
local function gave_up(what, text, ok, msg, code)
  eq(ok, nil, what)
  eq(code, "GC_ERR_STREAM_TIMEOUT", what .. ": code (" .. tostring(msg) .. ")")
  assert(msg:find(text, 1, true), msg)
end

test("free and close on a busy device: nothing freed, then they work", function()
  local hc = assert(gpucoll.comm { timeout_ms = 1000 })
  local s = hc:symmetric(256, "float32"):fill(1)
  meet()
  local t0 = hold.now()
  if rank == 0 then hold.hold(hc.stream, 6.0) end -- free and close give up after 2 s each
  local whose = rank == 0 and "this rank's GPU" or "another rank's GPU"
  gave_up("free", whose, s:free())
  assert(not s.freed, "the buffer was kept")
  gave_up("close", whose, hc:close())
  assert(not tostring(hc):find("closed"), tostring(hc))
  local took = hold.now() - t0
  assert(took > 3.5 and took < 5.9, "free and close took " .. took .. " s")
  if rank == 0 then -- until the hold ends (each wait gives up after 2 s)
    local tries = 1
    while not hc:sync() do
      tries = tries + 1
      assert(tries <= 3, "the held stream never finished")
    end
  end
  meet()
  assert(hc:close())
  assert(tostring(hc):find("closed"), tostring(hc))
end)

local nc, why = tc:nccl()
if not nc then
  io.stderr:write("note: NCCL unavailable (", tostring(why), "); nothing to test\n")
  H.finish(comm)
  return
end

test("held stream after NCCL calls: the wait ends, NCCL is aborted", function()
  local a <close> = tc:buffer(1024, "float32"):fill(1)
  local b <close> = tc:buffer(1024, "float32")
  assert(nc:allreduce(a, b))
  assert(tc:sync())
  hold.hold(tc.stream, 3.0) -- outlasts the 2 s bound, ends before a second one would
  sync_gives_up("sync on a held stream", 2.5, 6)
  assert(tostring(nc):find("aborted"), tostring(nc))
  local ok2, msg2, code2 = nc:allreduce(a, b)
  eq(ok2, nil, "a call on the aborted communicator")
  eq(code2, "GC_ERR_INVALID_USAGE", "its code")
  assert(msg2:find("was aborted", 1, true), msg2)
  assert(tc:sync(), "the next wait has nothing to report")
  assert(nc:close())
  gpucoll_still_works()
end)

if size >= 2 then
  test("a collective only rank 0 calls: its wait ends, its NCCL is aborted", function()
    meet()
    local nc2 = assert(tc:nccl())
    local a <close> = tc:buffer(1 << 20, "float32"):fill(2)
    local b <close> = tc:buffer(1 << 20, "float32")
    -- Once together first: NCCL connects its peers in the first call of a kind (on the host).
    assert(nc2:allreduce(a, b))
    assert(tc:sync())
    meet()
    if rank == 0 then
      assert(nc2:allreduce(a, b)) -- the others never call: NCCL's kernel waits for them
      sync_gives_up("sync on the stuck collective", 1.5, 10)
    end
    meet()
    if rank ~= 0 then assert(nc2:abort()) end -- its peer is gone: no call on it can complete
    assert(nc2:close())
    gpucoll_still_works()
  end)
end

H.finish(comm)
