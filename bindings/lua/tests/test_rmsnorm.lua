-- test_rmsnorm.lua — comm:allreduce_rmsnorm_fp8 on known data against a float64 reference computed
-- here, its options, and its errors (2+ ranks).
-- CI: mpirun -np 2 --oversubscribe gpucoll-lua run test_rmsnorm.lua        (host buffers)
-- GPU: mpirun -np 4 gpucoll-lua run test_rmsnorm.lua gpu=1                 (device buffers)
local H = dofile((arg[0]:match("^(.*[/\\])") or "") .. "harness.lua")
local test, raises = H.test, H.raises

local comm <close> = H.open(arg)
local rank, size = comm.rank, comm.size
local where = comm.device < 0 and "host" or "device"

-- Known data, exact in every input dtype (multiples of 1/8 up to 2): rank r's element i, the
-- residual's, and gamma's.
local function input(r, i) return ((i * 7 + r * 3) % 17 - 8) / 8 end
local function residual_value(i) return (i % 5 - 2) / 4 end
local function gamma_value(j) return 0.5 + (j % 9) / 8 end

local function buffer_of(n, dtype, fn)
  local b = comm:buffer(n, dtype, where)
  local h <close> = comm:buffer(n, dtype, "host")
  for i = 1, n do h:set(i, fn(i - 1)) end
  return b:copy_from(h)
end

local function host_copy(b)
  assert(comm:sync())
  return comm:buffer(#b, b.dtype, "host"):copy_from(b)
end

-- Inputs exact in bfloat16 whose sums over 2+ ranks are not (steps of 1/128 from 1, sums from
-- 2 where bfloat16 steps by 1/64): the float sum and the sum rounded to the dtype differ.
local function input_fine(r, i) return 1 + ((i + r) % 4) / 128 + (i % 3) / 4 end

-- The float64 reference of gpucoll.h's formulas: x (the sum rounded to the dtype, residual_out's)
-- and per row the scale and y. o.numerics "max" (the default): the float sum f is normalized,
-- scale = min(amax, scale_ub) / FP8_MAX; "rounded": x is normalized, scale = max(amax / FP8_MAX,
-- 1 / (FP8_MAX * 512)), then at most scale_ub.
local function reference(rows, cols, dtype, o)
  local round = comm:buffer(1, dtype, "host") -- rounds a float64 to the input dtype
  local fp8_max, value = o.fp8_max or 448, o.input or input
  local rounded = o.numerics == "rounded"
  local ref = { x = {}, y = {}, scale = {} }
  for row = 0, rows - 1 do
    local ss, v = 0, {}
    for j = 0, cols - 1 do
      local i = row * cols + j
      local s = 0
      for r = 0, size - 1 do s = s + value(r, i) end
      if o.residual then s = s + residual_value(i) end
      local x = round:set(1, s):get(1)
      ref.x[i + 1] = x
      v[j] = rounded and x or s
      ss = ss + v[j] * v[j]
    end
    local rinv = 1 / math.sqrt(ss / cols + (o.epsilon or 1e-6))
    local amax = 0
    for j = 0, cols - 1 do
      local y = v[j] * rinv * (gamma_value(j) + (o.weight_offset or 0))
      ref.y[row * cols + j + 1] = y
      amax = math.max(amax, math.abs(y))
    end
    local bound = o.scale_ub and o.scale_ub > 0 and o.scale_ub or math.huge
    local scale = math.min(amax, bound) / fp8_max
    if rounded then scale = math.min(math.max(amax / fp8_max, 1 / (fp8_max * 512)), bound) end
    ref.scale[row + 1] = scale
  end
  return ref
end

-- Wrong counts of the outputs against the reference: a scale off by more than 1e-5 of itself
-- (float arithmetic against float64), an fp8 element that misses y by more than half an fp8 step
-- (2^-4 relative) plus twice the subnormal spacing; y saturates at FP8_MAX x scale.
local function check(rows, cols, ref, out, scales, o)
  local fp8_max, rel, tiny = o.fp8_max or 448, o.rel or 2 ^ -4, o.tiny or 2 ^ -9
  local hs <close> = host_copy(scales)
  local ho <close> = host_copy(out)
  local bad_scales, bad = 0, 0
  for row = 1, rows do
    local s, sref = hs:get(row), ref.scale[row]
    if not (math.abs(s - sref) <= 1e-5 * sref) then bad_scales = bad_scales + 1 end
    for j = 1, cols do
      local i = (row - 1) * cols + j
      local y = ref.y[i]
      local limit = fp8_max * sref
      if math.abs(y) > limit then y = y > 0 and limit or -limit end
      local got = ho:get(i) * s
      if not (math.abs(got - y) <= rel * math.abs(y) + 2 * sref * tiny) then bad = bad + 1 end
    end
  end
  return bad_scales, bad
end

local function run_case(name, dtype, rows, cols, o)
  test(name, function()
    local n = rows * cols
    local value = o.input or input
    local send <close> = buffer_of(n, dtype, function(i) return value(rank, i) end)
    local gamma <close> = buffer_of(cols, dtype, gamma_value)
    local out <close> = comm:buffer(n, o.out_dtype or "fp8_e4m3", where):poison()
    local scales <close> = comm:buffer(rows, "float32", where):poison()
    local opts = { epsilon = o.epsilon, weight_offset = o.weight_offset, scale_ub = o.scale_ub,
                   out_dtype = o.out_dtype, algo = o.algo, numerics = o.numerics }
    local res <close> = o.residual and buffer_of(n, dtype, residual_value) or nil
    local res_out <close> = o.residual and not o.in_place and comm:buffer(n, dtype, where):poison() or nil
    if res then opts.residual, opts.residual_out = res, res_out or res end
    assert(comm:allreduce_rmsnorm_fp8(send, out, scales, gamma, rows, cols, opts))
    local ref = reference(rows, cols, dtype, o)
    local bad_scales, bad = check(rows, cols, ref, out, scales, o)
    if bad_scales > 0 or bad > 0 then
      error(string.format("%d of %d scales and %d of %d elements wrong", bad_scales, rows, bad, n))
    end
    if res then -- residual_out (or the residual itself, updated in place) holds x
      local hx <close> = host_copy(opts.residual_out)
      local wrong = hx:compare(function(i) return ref.x[i] end, { rtol = 0, atol = 0 })
      if wrong > 0 then error(wrong .. " residual_out elements differ from x") end
    end
  end)
end

-- Rows of 37 (no multiple of the 16-byte packs) and of 64; epsilon, weight_offset and scale_ub
-- each change the result beyond the tolerance, so a dropped option fails.
run_case("float32, defaults", "float32", 3, 37, {})
run_case("bfloat16, residual into residual_out, epsilon", "bfloat16", 4, 64,
         { residual = true, epsilon = 0.25 })
run_case("float16, residual updated in place, weight_offset", "float16", 2, 64,
         { residual = true, in_place = true, weight_offset = 1 })
run_case("float32, scale_ub bounds the row maximum and saturates", "float32", 2, 37, { scale_ub = 0.5 })
run_case("float32, rounded: scale_ub bounds the scale and saturates", "float32", 2, 37,
         { scale_ub = 1 / 2048, numerics = "rounded" })
run_case("bfloat16, the float sum normalized (max)", "bfloat16", 3, 40, { input = input_fine })
run_case("bfloat16, rounded: the sum rounded first", "bfloat16", 3, 40,
         { input = input_fine, numerics = "rounded", residual = true })
run_case("bfloat16, e5m2", "bfloat16", 3, 40,
         { out_dtype = "fp8_e5m2", fp8_max = 57344, rel = 2 ^ -3, tiny = 2 ^ -16 })
if where == "device" then
  run_case("float32, fused one-shot", "float32", 5, 64, { algo = "oneshot", residual = true })
  run_case("bfloat16, two-shot then the norm", "bfloat16", 5, 64, { algo = "twoshot" })
else
  run_case("float32, mpi algorithm", "float32", 3, 37, { algo = "mpi" })
end

test("the reference check can fail", function()
  -- The same call checked against a reference without the residual must find wrong values.
  local rows, cols = 2, 64
  local send <close> = buffer_of(rows * cols, "float32", function(i) return input(rank, i) end)
  local gamma <close> = buffer_of(cols, "float32", gamma_value)
  local res <close> = buffer_of(rows * cols, "float32", residual_value)
  local out <close> = comm:buffer(rows * cols, "fp8_e4m3", where)
  local scales <close> = comm:buffer(rows, "float32", where)
  assert(comm:allreduce_rmsnorm_fp8(send, out, scales, gamma, rows, cols, { residual = res }))
  local bad_scales, bad = check(rows, cols, reference(rows, cols, "float32", {}), out, scales, {})
  assert(bad_scales > 0 and bad > 0, "a reference without the residual passed")
end)

test("max and rounded differ: each fails the other's reference", function()
  local rows, cols = 2, 40
  local send <close> = buffer_of(rows * cols, "bfloat16", function(i) return input_fine(rank, i) end)
  local gamma <close> = buffer_of(cols, "bfloat16", gamma_value)
  local out <close> = comm:buffer(rows * cols, "fp8_e4m3", where)
  local scales <close> = comm:buffer(rows, "float32", where)
  for _, pair in ipairs({ { "max", "rounded" }, { "rounded", "max" } }) do
    assert(comm:allreduce_rmsnorm_fp8(send, out, scales, gamma, rows, cols, { numerics = pair[1] }))
    local own = check(rows, cols, reference(rows, cols, "bfloat16", { input = input_fine, numerics = pair[1] }),
                      out, scales, {})
    local other = check(rows, cols, reference(rows, cols, "bfloat16", { input = input_fine, numerics = pair[2] }),
                        out, scales, {})
    assert(own == 0 and other > 0, pair[1] .. " against " .. pair[2] .. "'s reference: " .. own .. ", " .. other)
  end
end)

test("argument errors raise, naming the argument", function()
  local rows, cols = 2, 8
  local send <close> = comm:buffer(rows * cols, "float32", where):fill(1)
  local out <close> = comm:buffer(rows * cols, "fp8_e4m3", where)
  local scales <close> = comm:buffer(rows, "float32", where)
  local gamma <close> = comm:buffer(cols, "float32", where):fill(2)
  local f = comm.allreduce_rmsnorm_fp8
  raises("gamma is required", f, comm, send, out, scales, nil, rows, cols)
  raises("out_dtype bfloat16 does not match out's dtype fp8_e4m3", f, comm, send, out, scales, gamma, rows,
         cols, { out_dtype = "bfloat16" })
  raises("option 'out_dtype': unknown dtype 'fp4'", f, comm, send, out, scales, gamma, rows, cols,
         { out_dtype = "fp4" })
  raises("option 'residual' must be a gpucoll.buffer", f, comm, send, out, scales, gamma, rows, cols,
         { residual = 3 })
  raises("unknown option 'eps'", f, comm, send, out, scales, gamma, rows, cols, { eps = 1e-5 })
  raises("option 'epsilon' must be a number", f, comm, send, out, scales, gamma, rows, cols, { epsilon = "x" })
  raises("unknown algo 'fused'", f, comm, send, out, scales, gamma, rows, cols, { algo = "fused" })
  raises('numerics must be "max" or "rounded"', f, comm, send, out, scales, gamma, rows, cols, { numerics = "fast" })
  raises('numerics must be "max" or "rounded"', f, comm, send, out, scales, gamma, rows, cols, { numerics = 1 })
  raises("gamma buffer holds 8 elements, the call needs 9", f, comm, send, out, scales, gamma, 1, 9)
  raises("scales buffer holds 2 elements, the call needs 3", f, comm, send, out, scales, gamma, 3, 4)
  raises("rows must be >= 0", f, comm, send, out, scales, gamma, -1, cols)
  local half <close> = comm:buffer(rows, "float16", where)
  raises("scales must be a float32 buffer", f, comm, send, out, half, gamma, rows, cols)
  local g16 <close> = comm:buffer(cols, "float16", where)
  raises("gamma must have send's dtype", f, comm, send, out, scales, g16, rows, cols)
  local r16 <close> = comm:buffer(rows * cols, "float16", where)
  raises("the residual_out buffer must have send's dtype", f, comm, send, out, scales, gamma, rows, cols,
         { residual_out = r16 })
end)

test("library failures return nil, the library's message, code", function()
  local rows, cols = 2, 8
  local send <close> = comm:buffer(rows * cols, "float32", where):fill(1)
  local scales <close> = comm:buffer(rows, "float32", where)
  local gamma <close> = comm:buffer(cols, "float32", where):fill(2)
  -- out's dtype is the output type: bfloat16 is none of the fp8 types
  local bf <close> = comm:buffer(rows * cols, "bfloat16", where)
  local ok, msg, code = comm:allreduce_rmsnorm_fp8(send, bf, scales, gamma, rows, cols)
  assert(ok == nil and code == "GC_ERR_INVALID_ARGUMENT", tostring(code))
  assert(msg:find("out_dtype must be fp8_e4m3 or fp8_e5m2, not bfloat16", 1, true), msg)
  -- wrapped in assert, as scripts do, it raises that message
  raises("out_dtype must be fp8_e4m3 or fp8_e5m2, not bfloat16", function()
    assert(comm:allreduce_rmsnorm_fp8(send, bf, scales, gamma, rows, cols))
  end)
  local out <close> = comm:buffer(rows * cols, "fp8_e4m3", where)
  ok, msg, code = comm:allreduce_rmsnorm_fp8(send, out, scales, gamma, rows, cols, { epsilon = -1 })
  assert(ok == nil and code == "GC_ERR_INVALID_ARGUMENT" and msg:find("epsilon"), tostring(msg))
  local ints <close> = comm:buffer(rows * cols, "int32", where)
  local gi <close> = comm:buffer(cols, "int32", where)
  ok, msg, code = comm:allreduce_rmsnorm_fp8(ints, out, scales, gi, rows, cols)
  assert(ok == nil and code == "GC_ERR_UNSUPPORTED" and msg:find("float32, float16 or bfloat16"), tostring(msg))
  -- an overlap the library refuses: residual_out over send
  ok, msg, code = comm:allreduce_rmsnorm_fp8(send, out, scales, gamma, rows, cols, { residual_out = send })
  assert(ok == nil and code == "GC_ERR_INVALID_ARGUMENT" and msg:find("overlaps"), tostring(msg))
end)

H.finish(comm)
