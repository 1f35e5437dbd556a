-- test_require.lua — `require "gpucoll"` from a stock lua5.4 under mpirun: the module starts MPI,
-- runs a collective and finalizes MPI at exit through its registry sentinel.
local gpucoll = require "gpucoll"
local rank, size = gpucoll.world()
local comm = assert(gpucoll.comm { use_gpu = false })
assert(comm.size == size and comm.rank == rank)
local b = comm:buffer(5, "int32", "host")
for i = 1, 5 do b:set(i, rank + i) end
assert(comm:allreduce(b, b))
for i = 1, 5 do
  assert(b:get(i) == size * i + size * (size - 1) // 2, "allreduce result")
end
-- Left open on purpose: lua_close runs the finalizers (comm, then MPI) in reverse creation order.
if rank == 0 then print("require gpucoll from " .. _VERSION .. ": ok, " .. size .. " ranks") end
