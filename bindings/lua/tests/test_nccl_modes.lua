-- test_nccl_modes.lua — NCCL's buffer modes from Lua (nc:mode, nc:buffer): each mode this NCCL has
-- registers its buffers, runs an all-reduce checked against a float64 reference, and deregisters
-- them cleanly, by free() and by nc:close(); a mode it lacks says why in one line.
-- GPU: mpirun -np N gpucoll-lua run test_nccl_modes.lua gpu=1 (one rank per GPU, 1 is enough).
-- Without NCCL (or on host-only ranks) it checks that comm:nccl() fails with a message, not a crash.
local H = dofile((arg[0]:match("^(.*[/\\])") or "") .. "harness.lua")
local test, raises, eq = H.test, H.raises, H.eq

local comm <close> = H.open(arg)
local rank, size = comm.rank, comm.size

local function sum_reference(n, seed)
  local tmp <close> = comm:buffer(n, "float32", "host")
  local ref = comm:buffer(n, "float64", "host")
  for r = 0, size - 1 do
    tmp:fill(seed + r)
    if r == 0 then ref:copy_from(tmp) else ref:accumulate(tmp) end
  end
  return ref
end

local nc, why, code = comm:nccl()
if not nc then
  test("no NCCL: a message and a code", function()
    eq(type(why), "string")
    assert(#why > 0 and not why:find("\n"), "one line: " .. tostring(why))
    eq(code, "GC_ERR_UNSUPPORTED")
  end)
  if rank == 0 then io.stderr:write("note: NCCL unavailable (", why, "); the mode tests need it\n") end
  H.finish(comm)
  return
end

test("mode names", function()
  raises("invalid option 'bogus'", nc.mode, nc, "bogus")
  raises("invalid option 'bogus'", nc.buffer, nc, 4, "float32", "bogus")
  assert(nc:mode("plain"))
end)

for _, mode in ipairs { "plain", "registered", "symmetric" } do
  local ok, reason = nc:mode(mode)
  if not ok then
    test(mode .. " unavailable: one line", function()
      eq(type(reason), "string")
      assert(#reason > 0 and not reason:find("\n"), reason)
      local b, msg, c = nc:buffer(4, "float32", mode)
      eq(b, nil)
      eq(c, "GC_ERR_UNSUPPORTED", msg)
    end)
    if rank == 0 then io.stderr:write("note: NCCL ", nc:version(), " has no ", mode, " mode: ", reason, "\n") end
  else
    test(mode .. ": register, all-reduce, deregister", function()
      for _, n in ipairs { 1, 1000, 262147 } do -- odd sizes; 1 MiB and more spans several pages
        local s <close> = assert(nc:buffer(n, "float32", mode)):fill(700 + rank)
        local r <close> = assert(nc:buffer(n, "float32", mode)):poison()
        eq(s.kind, "nccl")
        eq(#r, n)
        local ref <close> = sum_reference(n, 700)
        assert(nc:allreduce(s, r))
        assert(comm:sync())
        eq((r:compare(ref)), 0, mode .. " allreduce of " .. n)
        -- gpucoll's own collectives take NCCL's memory as any device buffer.
        r:poison()
        assert(comm:allreduce(s, r))
        assert(comm:sync())
        eq((r:compare(ref)), 0, "gpucoll allreduce on " .. mode .. " buffers")
        assert(s:free())
        eq(s.freed, true)
      end
    end)
  end
end

test("close frees the buffers still made from it", function()
  local nc2 = assert(comm:nccl())
  local kept = assert(nc2:buffer(4096, "float32", "plain"))
  local kept_sym = nc2:mode("symmetric") and assert(nc2:buffer(4096, "float32", "symmetric")) or nil
  assert(nc2:allreduce(kept, kept))
  assert(nc2:close())
  eq(kept.freed, true)
  if kept_sym then eq(kept_sym.freed, true) end
  raises("freed", kept.fill, kept, 1)
end)

assert(nc:close())
H.finish(comm)
