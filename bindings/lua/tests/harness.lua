-- harness.lua — what the Lua test scripts share (dofile'd from their own directory):
--   H.open(arg)             the world communicator; with gpu=1 among the arguments on device
--                           buffers, which this rank must then have
--   H.test(name, fn)        runs fn, counting it passed or failed (the failure and its traceback
--                           go to stderr)
--   H.raises(pattern, fn, ...)  fails unless fn(...) raises an error matching pattern
--   H.eq(a, b, what)        raises "what: expected b, got a" unless a == b
--   H.finish(comm)          sums the failures over the ranks, prints "P passed, F failed" on
--                           rank 0 and exits 1 on any failure
local gpucoll = require "gpucoll"

local H = { passed = 0, failed = 0, rank = 0 }

function H.open(args)
  local use_gpu = false
  for _, a in ipairs(args or {}) do
    if a == "gpu=1" then use_gpu = true end
  end
  local comm = assert(gpucoll.comm { use_gpu = use_gpu })
  H.rank = comm.rank
  -- The GPU run must not pass quietly on host buffers.
  if use_gpu and comm.device < 0 then error("gpu=1 but this rank has no GPU: run it on a GPU host") end
  return comm, use_gpu
end

function H.test(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if ok then
    H.passed = H.passed + 1
  else
    H.failed = H.failed + 1
    io.stderr:write(string.format("[rank %d] FAIL %s: %s\n", H.rank, name, tostring(err)))
  end
end

function H.raises(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then error("expected an error matching '" .. pattern .. "'", 2) end
  if not tostring(err):find(pattern) then
    error("error '" .. tostring(err) .. "' does not match '" .. pattern .. "'", 2)
  end
end

function H.eq(a, b, what)
  if a ~= b then
    error(string.format("%s: expected %s, got %s", what or "value", tostring(b), tostring(a)), 2)
  end
end

function H.finish(comm)
  local total_failed
  do
    local f <close> = comm:buffer(1, "int64", "host"):set(1, H.failed)
    assert(comm:allreduce(f, f))
    total_failed = f:get(1)
  end
  if comm.rank == 0 then print(string.format("%d passed, %d failed", H.passed, total_failed)) end
  if total_failed > 0 then os.exit(1, true) end
end

return H
