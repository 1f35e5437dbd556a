-- quickstart.lua — an all-reduce in gpucoll-lua: mpirun -np 2 gpucoll-lua run quickstart.lua
local c <close> = gpucoll.comm{}                  -- over MPI_COMM_WORLD; one rank per GPU
local n = 1024
local x = c:buffer(n, "float32")                  -- device memory on a GPU rank, host memory else
for i = 1, n do x:set(i, c.rank + i) end
assert(c:allreduce(x, x))                         -- in place: the sum over ranks
c:sync()
local wrong = x:compare(function(i) return c.size * i + c.size * (c.size - 1) / 2 end)
gpucoll.table({{ranks = c.size, on = c.device >= 0 and "GPUs" or "host", wrong = wrong}},
              {"ranks", "on", "wrong"})
assert(wrong == 0, "wrong results")
x:free()
