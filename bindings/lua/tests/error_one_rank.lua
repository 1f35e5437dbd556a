-- error_one_rank.lua — rank 1 fails after the last collective while rank 0 finishes: every rank
-- exits 1, rank 1's line is tagged with its rank, and no rank is aborted.
local gpucoll = require "gpucoll"
local comm = gpucoll.comm { use_gpu = false }
local buf = comm:buffer(4, "float32", "host")
comm:allreduce(buf, buf)
if comm.rank == 1 then
  error("deliberate failure on rank 1")
end
print("rank 0 finished")
