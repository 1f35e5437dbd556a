-- fail.lua — a script that fails on rank 1 while rank 0 waits in a collective: gpucoll-lua must
-- print a traceback tagged [rank 1] with file:line and bring rank 0 down (MPI_Abort).
local gpucoll = require "gpucoll"
local comm = gpucoll.comm { use_gpu = false }

local function inner()
  error("deliberate failure on rank " .. comm.rank)
end

if comm.rank == 1 then
  inner()
end
-- Rank 0 blocks here for a partner that never comes; only the abort ends it.
local buf = comm:buffer(4, "float32", "host")
comm:allreduce(buf, buf)
comm:allreduce(buf, buf)
print("rank 0 was not brought down")
