-- usage_error.lua — a usage mistake every rank makes (an unknown key of gpucoll.comm): gpucoll-lua
-- must print one line on rank 0 and exit 1 on every rank, with no traceback and no MPI_Abort.
local gpucoll = require "gpucoll"
local comm <close> = gpucoll.comm { use_gpu = false, no_such_key = 1 }
print("not reached", comm)
