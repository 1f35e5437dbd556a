/* hold_stream.c — a test-only Lua module (require "gpucoll_hold"): hold(stream, seconds) enqueues
 * a host function that keeps `stream` (an integer, as comm.stream gives it) busy for that long,
 * standing for work that is not gpucoll's and does not end; now() is a monotonic clock (s). */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <lauxlib.h>
#include <lua.h>

static void CUDART_CB hold(void *arg) {
  double *seconds = arg;
  struct timespec t = {(time_t)*seconds, (long)((*seconds - (double)(time_t)*seconds) * 1e9)};
  free(seconds);
  while (nanosleep(&t, &t) != 0) {
  }
}

static int l_hold(lua_State *L) {
  cudaStream_t stream = (cudaStream_t)(uintptr_t)luaL_checkinteger(L, 1);
  lua_Number s = luaL_checknumber(L, 2);
  luaL_argcheck(L, s >= 0 && s <= 600, 2, "seconds must be in [0, 600]");
  double *arg = malloc(sizeof *arg);
  if (!arg) return luaL_error(L, "out of memory");
  *arg = (double)s;
  cudaError_t e = cudaLaunchHostFunc(stream, hold, arg);
  if (e != cudaSuccess) {
    free(arg);
    return luaL_error(L, "cudaLaunchHostFunc: %s", cudaGetErrorString(e));
  }
  return 0;
}

static int l_now(lua_State *L) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  lua_pushnumber(L, (lua_Number)t.tv_sec + 1e-9 * (lua_Number)t.tv_nsec);
  return 1;
}

__attribute__((visibility("default"))) int luaopen_gpucoll_hold(lua_State *L) {
  static const luaL_Reg fns[] = {{"hold", l_hold}, {"now", l_now}, {NULL, NULL}};
  luaL_newlib(L, fns);
  return 1;
}
