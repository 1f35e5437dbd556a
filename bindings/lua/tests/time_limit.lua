-- time_limit.lua — runs forever, catching every error it can: --time-limit must still stop it on
-- every rank with exit status 124.
local gpucoll = require "gpucoll"
local comm = gpucoll.comm { use_gpu = false }
local buf = comm:buffer(4, "float32", "host")
comm:allreduce(buf, buf)
local spins = 0
while true do
  pcall(function()
    for _ = 1, 1000 do spins = spins + 1 end
  end)
end
