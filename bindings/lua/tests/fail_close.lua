-- fail_close.lua — fail.lua with the communicator in a <close> variable: the error must bring every
-- rank down before unwinding closes it (gc_comm_destroy is collective; rank 0 is not there).
local gpucoll = require "gpucoll"
local comm <close> = gpucoll.comm { use_gpu = false }

if comm.rank == 1 then
  error("deliberate failure on rank " .. comm.rank)
end
-- Rank 0 blocks here for a partner that never comes; only the abort ends it.
local buf <close> = comm:buffer(4, "float32", "host")
comm:allreduce(buf, buf)
comm:allreduce(buf, buf)
print("rank 0 was not brought down")
