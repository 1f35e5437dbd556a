-- installed_smoke.lua — what the install test runs with the installed gpucoll-lua: one all-reduce
-- of host buffers, checked element by element.
local gpucoll = require "gpucoll"
local comm <close> = gpucoll.comm { use_gpu = false }
local n = 1000
local buf = comm:buffer(n, "float32", "host")
for i = 1, n do buf:set(i, comm.rank + i) end
comm:allreduce(buf, buf)
local wrong = 0
for i = 1, n do
  local want = comm.size * i + comm.size * (comm.size - 1) / 2
  if buf:get(i) ~= want then wrong = wrong + 1 end
end
if comm.rank == 0 then
  print(string.format("installed gpucoll-lua %s: all-reduce of %d floats over %d ranks: %d wrong",
                      gpucoll.version, n, comm.size, wrong))
end
assert(wrong == 0, "the all-reduce gave wrong values")
