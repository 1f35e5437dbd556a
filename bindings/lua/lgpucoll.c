/* lgpucoll.c — the gpucoll Lua module: communicators, collectives, timing, NCCL, module table. */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lgc.h"

#ifdef LGC_HAVE_NCCL
#include "nccl_loader.h"
#endif

#ifdef LGC_SHARED_MODULE
#include <dlfcn.h>
#endif

/* ---------------------------------------------------------------------------------------------
 * Shared helpers.
 * ------------------------------------------------------------------------------------------- */
int lgc_mpi_live(void) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

int lgc_world_rank(void) {
  int rank = 0;
  if (lgc_mpi_live()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int lgc_failmsg(lua_State *L, const char *code, const char *fmt, ...) {
  va_list ap;
  lua_pushnil(L);
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_pushstring(L, code);
  return 3;
}

/* lgc_unstick's account of the wait it just ended, or lgc_nccl_free's of NCCL's refusal, for the
 * failure that reports it. */
static char unstick_note[1024];

/* Expected failures come back as nil, message, code (like luaL_fileresult): the detailed message
 * the library recorded when there is one (lgc_unstick's account first), else the code's sentence. */
int lgc_fail(lua_State *L, lgc_comm_t *c, gc_result_t rc) {
  if ((rc == GC_ERR_STREAM_TIMEOUT || rc == GC_ERR_REMOTE) && unstick_note[0]) {
    lgc_failmsg(L, gc_result_name(rc), "%s", unstick_note);
    unstick_note[0] = '\0';
    return 3;
  }
  const char *detail = gc_comm_last_error(c ? c->comm : NULL);
  if (detail == NULL || detail[0] == '\0') detail = gc_strerror(rc);
  return lgc_failmsg(L, gc_result_name(rc), "%s", detail);
}

/* The ends of methods: lgc_fail on failure, else true (lgc_ok) or the object itself (lgc_self). */
int lgc_ok(lua_State *L, lgc_comm_t *c, gc_result_t rc) {
  if (rc != GC_SUCCESS) return lgc_fail(L, c, rc);
  lua_pushboolean(L, 1);
  return 1;
}

int lgc_self(lua_State *L, lgc_comm_t *c, gc_result_t rc) {
  if (rc != GC_SUCCESS) return lgc_fail(L, c, rc);
  lua_settop(L, 1);
  return 1;
}

static gc_result_t result_from_name(const char *name) {
  for (int r = 0; r < GC_NUM_RESULTS; r++)
    if (name && strcmp(name, gc_result_name((gc_result_t)r)) == 0) return (gc_result_t)r;
  return GC_ERR_INVALID_USAGE;
}

/* Communicators, symmetric buffers and NCCL handles are released by collective calls. Left to
 * the garbage collector they would be released at different moments on different ranks and
 * deadlock, so a registry table holds them until close()/free() or the end of the state (where
 * every rank runs the finalizers in the same, reverse-creation order). */
static const char *const ANCHORS = "gpucoll.anchors";

void lgc_anchor(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_getfield(L, LUA_REGISTRYINDEX, ANCHORS);
  lua_pushlightuserdata(L, lua_touserdata(L, idx));
  lua_pushvalue(L, idx);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

void lgc_unanchor(lua_State *L, const void *key) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, ANCHORS) == LUA_TTABLE) {
    lua_pushlightuserdata(L, (void *)key);
    lua_pushnil(L);
    lua_rawset(L, -3);
  }
  lua_pop(L, 1);
}

/* "unknown op 'mean' (expected one of: sum prod ...)" as an argument error: of argument `arg`
 * itself (key NULL), or of its option `key`. */
static int name_error(lua_State *L, int vidx, int arg, const char *key, const char *what,
                      const char *(*name)(int), int n) {
  vidx = lua_absindex(L, vidx);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; i < n; i++) {
    luaL_addchar(&b, ' ');
    luaL_addstring(&b, name(i));
  }
  luaL_pushresult(&b);
  const char *value = luaL_tolstring(L, vidx, NULL);
  if (key)
    lua_pushfstring(L, "option '%s': unknown %s '%s' (expected one of:%s)", key, what, value,
                    lua_tostring(L, -2));
  else
    lua_pushfstring(L, "unknown %s '%s' (expected one of:%s)", what, value, lua_tostring(L, -2));
  return luaL_argerror(L, arg, lua_tostring(L, -1));
}

static const char *dtype_name_i(int i) { return gc_dtype_name((gc_dtype_t)i); }
static const char *op_name_i(int i) { return gc_op_name((gc_op_t)i); }
static const char *algo_name_i(int i) { return gc_algo_name((gc_algo_t)i); }

/* The value at vidx must be a name; errors blame argument `arg` (option `key` when not NULL). */
static gc_dtype_t dtype_at(lua_State *L, int vidx, int arg, const char *key) {
  gc_dtype_t d;
  const char *s = lua_type(L, vidx) == LUA_TSTRING ? lua_tostring(L, vidx) : NULL;
  if (s == NULL || gc_dtype_from_name(s, &d) != GC_SUCCESS)
    name_error(L, vidx, arg, key, "dtype", dtype_name_i, GC_NUM_DTYPES);
  return d;
}

static gc_op_t op_at(lua_State *L, int vidx, int arg, const char *key) {
  gc_op_t op;
  const char *s = lua_type(L, vidx) == LUA_TSTRING ? lua_tostring(L, vidx) : NULL;
  if (s == NULL || gc_op_from_name(s, &op) != GC_SUCCESS)
    name_error(L, vidx, arg, key, "op", op_name_i, GC_NUM_OPS);
  return op;
}

static gc_algo_t algo_at(lua_State *L, int vidx, int arg, const char *key) {
  gc_algo_t a;
  const char *s = lua_type(L, vidx) == LUA_TSTRING ? lua_tostring(L, vidx) : NULL;
  if (s == NULL || gc_algo_from_name(s, &a) != GC_SUCCESS)
    name_error(L, vidx, arg, key, "algo", algo_name_i, GC_NUM_ALGOS);
  return a;
}

gc_dtype_t lgc_checkdtype(lua_State *L, int idx) { return dtype_at(L, idx, idx, NULL); }
gc_op_t lgc_checkop(lua_State *L, int idx) { return op_at(L, idx, idx, NULL); }

/* Option values: errors blame the options argument `oi` and name the option. */
static lua_Integer opt_integer_at(lua_State *L, int vidx, int oi, const char *key) {
  if (!lua_isinteger(L, vidx))
    luaL_argerror(L, oi, lua_pushfstring(L, "option '%s' must be an integer", key));
  return lua_tointeger(L, vidx);
}

static double opt_number_at(lua_State *L, int vidx, int oi, const char *key) {
  if (lua_type(L, vidx) != LUA_TNUMBER)
    luaL_argerror(L, oi, lua_pushfstring(L, "option '%s' must be a number", key));
  return lua_tonumber(L, vidx);
}

/* Streams travel through Lua as integers (addresses), like buffer:ptr(). */
static void *stream_at(lua_State *L, int vidx, int oi) {
  if (lua_islightuserdata(L, vidx)) return lua_touserdata(L, vidx);
  return (void *)(uintptr_t)opt_integer_at(L, vidx, oi, "stream");
}

static void *check_stream(lua_State *L, int idx) {
  if (lua_islightuserdata(L, idx)) return lua_touserdata(L, idx);
  return (void *)(uintptr_t)luaL_checkinteger(L, idx);
}

int lgc_optfield(lua_State *L, int t, const char *key) {
  t = lua_absindex(L, t);
  lua_pushstring(L, key);
  return lua_rawget(L, t);
}

/* Rejects option keys outside `known` so that a typo ({algos="oneshot"}) is an error, not a
 * silently ignored option. */
void lgc_check_keys(lua_State *L, int idx, const char *const known[]) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    int ok = 0;
    if (lua_type(L, -1) == LUA_TSTRING)
      for (int i = 0; known[i] && !ok; i++) ok = strcmp(known[i], lua_tostring(L, -1)) == 0;
    if (!ok) {
      const char *k = luaL_tolstring(L, -1, NULL);
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      lua_pushfstring(L, "unknown option '%s' (expected one of:", k);
      luaL_addvalue(&b);
      for (int i = 0; known[i]; i++) {
        luaL_addchar(&b, ' ');
        luaL_addstring(&b, known[i]);
      }
      luaL_addchar(&b, ')');
      luaL_pushresult(&b);
      luaL_argerror(L, idx, lua_tostring(L, -1));
    }
  }
}

/* ---------------------------------------------------------------------------------------------
 * Communicator.
 * ------------------------------------------------------------------------------------------- */
lgc_comm_t *lgc_checkcomm(lua_State *L, int idx) {
  lgc_comm_t *c = luaL_checkudata(L, idx, LGC_COMM);
  if (c->comm == NULL) luaL_argerror(L, idx, "the communicator is closed");
  return c;
}

/* An integer option (booleans read as 0/1) of the options table at argument t, in lo..INT_MAX
 * (an int: larger values must not wrap). */
static int opt_int(lua_State *L, int t, const char *key, int def, int lo) {
  int v = def;
  if (lgc_optfield(L, t, key) != LUA_TNIL) {
    lua_Integer i = lua_isboolean(L, -1) ? lua_toboolean(L, -1) : opt_integer_at(L, -1, t, key);
    if (i < lo || i > INT_MAX)
      luaL_argerror(L, t,
                    lua_pushfstring(L, "option '%s' must be between %d and %d", key, lo, INT_MAX));
    v = (int)i;
  }
  lua_pop(L, 1);
  return v;
}

/* gpucoll.comm([{device=, use_gpu=, local_size=, staging_bytes=, timeout_ms=}]) over
 * MPI_COMM_WORLD. Collective. */
static int l_comm(lua_State *L) {
  static const char *const keys[] = {"device", "use_gpu", "local_size", "staging_bytes",
                                     "timeout_ms", NULL};
  gc_config_t cfg = GC_CONFIG_INIT;
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lgc_check_keys(L, 1, keys);
    cfg.device = opt_int(L, 1, "device", cfg.device, INT_MIN);
    cfg.use_gpu = opt_int(L, 1, "use_gpu", cfg.use_gpu, INT_MIN);
    cfg.local_size = opt_int(L, 1, "local_size", cfg.local_size, INT_MIN);
    if (lgc_optfield(L, 1, "staging_bytes") != LUA_TNIL) { /* a size: 2 GB and more must not wrap */
      lua_Integer v = opt_integer_at(L, -1, 1, "staging_bytes");
      if (v < 0) luaL_argerror(L, 1, "option 'staging_bytes' must not be negative");
      cfg.staging_bytes = (size_t)v;
    }
    lua_pop(L, 1);
    cfg.timeout_ms = opt_int(L, 1, "timeout_ms", cfg.timeout_ms, INT_MIN);
  }
  lgc_comm_t *c = lua_newuserdatauv(L, sizeof *c, 0);
  memset(c, 0, sizeof *c);
  luaL_setmetatable(L, LGC_COMM);
  gc_comm_t comm = NULL;
  gc_result_t rc = gc_comm_init(&comm, MPI_COMM_WORLD, &cfg);
  if (rc != GC_SUCCESS) return lgc_fail(L, NULL, rc);
  c->comm = comm;
  c->mpi = MPI_COMM_WORLD;
  gc_comm_rank(comm, &c->rank);
  gc_comm_size(comm, &c->size);
  gc_comm_device(comm, &c->device);
  if (gc_comm_stream(comm, &c->stream) != GC_SUCCESS) c->stream = NULL;
  lgc_anchor(L, -1);
  return 1;
}

#ifdef LGC_HAVE_NCCL
struct lgc_nccl {
  gcb_nccl_t *h; /* NULL once closed */
  lgc_comm_t *comm;
  lgc_nccl_t *next;
  int used;      /* has enqueued calls: a stuck wait may be its doing */
  void *stream;  /* of its last call */
};
static gc_result_t nccl_release(lua_State *L, lgc_nccl_t *n);
#endif

/* Collective: closes NCCL handles, then destroys it with the buffers made from it. When a device
 * stayed busy (GC_ERR_STREAM_TIMEOUT) the communicator stays open, its buffers detached. */
static gc_result_t comm_release(lua_State *L, lgc_comm_t *c) {
  if (c->comm == NULL) return GC_SUCCESS;
#ifdef LGC_HAVE_NCCL
  while (c->nccls) nccl_release(L, c->nccls);
  unstick_note[0] = '\0'; /* an account of those waits has nobody to tell */
#endif
  lgc_buffers_detach(L, c);
  gc_result_t rc = gc_comm_destroy(c->comm);
  if (rc == GC_ERR_STREAM_TIMEOUT) return rc; /* nothing freed; close() may be called again */
  c->comm = NULL;
  c->stream = NULL;
  lgc_unanchor(L, c);
  return rc;
}

/* A callback of gc_time or compare() must not destroy the communicator under the C code that
 * called it. (__gc cannot run then: the object is on the stack; __close can.) */
static void check_idle(lua_State *L, lgc_comm_t *c) {
  if (c->busy)
    luaL_error(L, "cannot close the communicator inside a time() or compare() callback that uses it");
}

static int m_close(lua_State *L) {
  lgc_comm_t *c = luaL_checkudata(L, 1, LGC_COMM);
  check_idle(L, c);
  return lgc_ok(L, NULL, comm_release(L, c));
}

static int m_gc(lua_State *L) { /* __gc and __close */
  lgc_comm_t *c = luaL_checkudata(L, 1, LGC_COMM);
  check_idle(L, c);
  comm_release(L, c);
  return 0;
}

static int m_tostring(lua_State *L) {
  lgc_comm_t *c = luaL_checkudata(L, 1, LGC_COMM);
  if (c->comm == NULL) {
    lua_pushstring(L, "gpucoll.comm (closed)");
    return 1;
  }
  int lr = -1, ls = -1, nodes = -1;
  gc_comm_local_rank(c->comm, &lr);
  gc_comm_local_size(c->comm, &ls);
  gc_comm_node_count(c->comm, &nodes);
  if (c->device >= 0)
    lua_pushfstring(L, "gpucoll.comm (rank %d/%d, local %d/%d, nodes %d, device %d)", c->rank,
                    c->size, lr, ls, nodes, c->device);
  else
    lua_pushfstring(L, "gpucoll.comm (rank %d/%d, local %d/%d, nodes %d, host-only)", c->rank,
                    c->size, lr, ls, nodes);
  return 1;
}

static int m_sync(lua_State *L) {
  lgc_comm_t *c = lgc_checkcomm(L, 1);
  void *stream = lua_isnoneornil(L, 2) ? c->stream : check_stream(L, 2);
  return lgc_ok(L, c, lgc_unstick(c, gc_synchronize(c->comm, stream), stream));
}

/* comm:autotune([max_bytes [, dtype]]) — times every algorithm per collective up to max_bytes
 * (default 64 MiB, float32) and makes the fastest the communicator's choice; collective. */
static int m_autotune(lua_State *L) {
  lgc_comm_t *c = lgc_checkcomm(L, 1);
  lua_Integer max_bytes = luaL_optinteger(L, 2, (lua_Integer)64 << 20);
  luaL_argcheck(L, max_bytes > 0, 2, "max_bytes must be positive");
  gc_dtype_t dtype = lua_isnoneornil(L, 3) ? GC_FLOAT32 : lgc_checkdtype(L, 3);
  gc_result_t rc = gc_autotune(c->comm, (size_t)max_bytes, dtype);
  if (rc != GC_SUCCESS) return lgc_fail(L, c, rc);
  lua_pushstring(L, gc_comm_algo_table(c->comm));
  return 1;
}

/* comm:tune_save(path), comm:tune_load(path), comm:tune_reset() — collective; true or nil, msg, code. */
static int tune_file(lua_State *L, gc_result_t (*fn)(gc_comm_t, const char *)) {
  lgc_comm_t *c = lgc_checkcomm(L, 1);
  return lgc_ok(L, c, fn(c->comm, luaL_checkstring(L, 2)));
}
static int m_tune_save(lua_State *L) { return tune_file(L, gc_tune_save); }
static int m_tune_load(lua_State *L) { return tune_file(L, gc_tune_load); }
static int m_tune_reset(lua_State *L) {
  lgc_comm_t *c = lgc_checkcomm(L, 1);
  return lgc_ok(L, c, gc_tune_reset(c->comm));
}

/* comm.peers: this rank's row of the peer matrix, indexed by local rank + 1. */
static int push_peers(lua_State *L, lgc_comm_t *c) {
  int ls = 0;
  gc_result_t rc = gc_comm_local_size(c->comm, &ls);
  if (rc != GC_SUCCESS) return lgc_fail(L, c, rc);
  lua_createtable(L, ls, 0);
  for (int p = 0; p < ls; p++) {
    int ok = 0;
    rc = gc_comm_peer_access(c->comm, p, &ok);
    if (rc != GC_SUCCESS) return lgc_fail(L, c, rc);
    lua_pushboolean(L, ok);
    lua_rawseti(L, -2, p + 1);
  }
  return 1;
}

typedef gc_result_t (*int_query_fn)(gc_comm_t, int *);
static const struct {
  const char *name;
  int_query_fn fn;
  int boolean;
} int_fields[] = {
    {"rank", gc_comm_rank, 0},
    {"size", gc_comm_size, 0},
    {"local_rank", gc_comm_local_rank, 0},
    {"local_size", gc_comm_local_size, 0},
    {"node_count", gc_comm_node_count, 0},
    {"device", gc_comm_device, 0},
    {"cuda_aware", gc_comm_cuda_aware_mpi, 1},
    {"p2p_ready", gc_comm_p2p_ready, 1},
};

/* Methods first, then the query fields (so c.rank reads like a field and stays current). */
static int m_index(lua_State *L) {
  lgc_comm_t *c = luaL_checkudata(L, 1, LGC_COMM);
  const char *key = luaL_checkstring(L, 2);
  lua_getmetatable(L, 1);
  if (lua_getfield(L, -1, "__methods") == LUA_TTABLE && lua_getfield(L, -1, key) != LUA_TNIL)
    return 1;
  if (strcmp(key, "closed") == 0) {
    lua_pushboolean(L, c->comm == NULL);
    return 1;
  }
  for (size_t i = 0; i < sizeof int_fields / sizeof int_fields[0]; i++) {
    if (strcmp(key, int_fields[i].name) != 0) continue;
    if (c->comm == NULL) return luaL_error(L, "comm.%s: the communicator is closed", key);
    int v = 0;
    gc_result_t rc = int_fields[i].fn(c->comm, &v);
    if (rc != GC_SUCCESS) return luaL_error(L, "comm.%s: %s", key, gc_comm_last_error(c->comm));
    if (int_fields[i].boolean)
      lua_pushboolean(L, v);
    else
      lua_pushinteger(L, v);
    return 1;
  }
  if (strcmp(key, "peers") == 0 || strcmp(key, "algo_table") == 0 || strcmp(key, "stream") == 0) {
    if (c->comm == NULL) return luaL_error(L, "comm.%s: the communicator is closed", key);
    if (key[0] == 'p') {
      if (push_peers(L, c) != 1) return luaL_error(L, "comm.peers: %s", lua_tostring(L, -2));
    } else if (key[0] == 'a') {
      lua_pushstring(L, gc_comm_algo_table(c->comm));
    } else {
      lua_pushinteger(L, (lua_Integer)(uintptr_t)c->stream);
    }
    return 1;
  }
  return 0; /* nil, as for any table */
}

/* ---------------------------------------------------------------------------------------------
 * Collectives. Counts derive from the buffers (opts.count overrides):
 *   allreduce       count     = #send           recv holds count
 *   reducescatter   recvcount = #send // size   recv holds recvcount
 *   reducescatter_2d rows x cols given          send holds rows*cols, recv the rank's part
 *   allgather       sendcount = #send           recv holds size * sendcount
 *   broadcast       count     = #recv           (send exists on the root only)
 *   reducescatter_allreduce  recvcount = #send // L   recv holds recvcount
 *   allreduce_allgather      sendcount = #send        recv holds L * sendcount
 * (L: the communicator's local_size, the ranks of a node.) In place when send and recv are the
 * same buffer: for reduce-scatter the rank's slice of it is the output (2-D: axis 0 only, the
 * rank's rows), for all-gather the rank's slice is the input (NCCL's in-place layout); the mixed
 * operations alike, with the slice of the rank's local rank. The add option holds as many
 * elements as the output, but sendcount for allreduce_allgather (it applies to the all-reduce,
 * before the gather).
 * ------------------------------------------------------------------------------------------- */
typedef enum {
  C_ALLREDUCE, C_REDUCESCATTER, C_RS2D, C_ALLGATHER, C_BROADCAST, /* nccl_coll's order */
  C_RS_AR, C_AR_AG /* reducescatter_allreduce, allreduce_allgather */
} coll_t;

typedef struct {
  const void *send;
  void *recv;
  size_t count; /* the count argument of the C call */
  size_t rows, cols;
  int axis, root;
  gc_dtype_t dtype;
  gc_op_t op;
  void *stream;
  gc_options_t o;
} call_t;

static int reducing(coll_t k) { return k != C_ALLGATHER && k != C_BROADCAST; }

static void need(lua_State *L, int idx, const lgc_buffer_t *b, size_t n, const char *what) {
  if (b->count < n)
    luaL_argerror(L, idx,
                  lua_pushfstring(L, "%s buffer holds %I elements, the call needs %I", what,
                                  (lua_Integer)b->count, (lua_Integer)n));
}

/* The launch options of the table at `oi` that every gpucoll collective takes: algo, max_blocks,
 * pdl, stream. */
static void parse_launch_opts(lua_State *L, int oi, gc_options_t *o, void **stream) {
  if (lgc_optfield(L, oi, "algo") != LUA_TNIL) o->algo = algo_at(L, -1, oi, "algo");
  lua_pop(L, 1);
  if (lgc_optfield(L, oi, "max_blocks") != LUA_TNIL) {
    lua_Integer mb = opt_integer_at(L, -1, oi, "max_blocks");
    luaL_argcheck(L, mb >= 0 && mb <= INT_MAX, oi,
                  lua_pushfstring(L, "max_blocks must be between 0 and %d", INT_MAX));
    o->max_blocks = (int)mb;
  }
  lua_pop(L, 1);
  /* A boolean only: Lua's truth would read 0 and -1 (gc_options_t's "GC_PDL" and "off") as on. */
  if (lgc_optfield(L, oi, "pdl") != LUA_TNIL) { /* absent: GC_PDL */
    if (!lua_isboolean(L, -1)) luaL_argerror(L, oi, "option 'pdl' must be a boolean");
    o->pdl = lua_toboolean(L, -1) ? 1 : -1;
  }
  lua_pop(L, 1);
  if (lgc_optfield(L, oi, "stream") != LUA_TNIL) *stream = stream_at(L, -1, oi);
  lua_pop(L, 1);
}

/* Option `key` of the table at `oi`: a live gpucoll.buffer, or NULL when absent. The table keeps it
 * referenced for the duration of the call. */
static lgc_buffer_t *opt_buffer_at(lua_State *L, int oi, const char *key) {
  lgc_buffer_t *b = NULL;
  if (lgc_optfield(L, oi, key) != LUA_TNIL) {
    b = lgc_testbuffer(L, -1);
    if (b == NULL)
      luaL_argerror(L, oi, lua_pushfstring(L, "option '%s' must be a gpucoll.buffer", key));
    lgc_checkbuffer(L, -1);
  }
  lua_pop(L, 1);
  return b;
}

/* The compressed wire (gc_options_t.wire, wire_group): wire = "native" | "fp8" | "bf16",
 * wire_group = 32 | 64 | 128 (0 = 32); which calls take them is the library's to say. */
static void parse_wire_opts(lua_State *L, int oi, gc_options_t *o) {
  if (lgc_optfield(L, oi, "wire") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING || gc_wire_from_name(lua_tostring(L, -1), &o->wire) != GC_SUCCESS)
      luaL_argerror(L, oi, "option 'wire' must be \"native\", \"fp8\" or \"bf16\"");
  }
  lua_pop(L, 1);
  if (lgc_optfield(L, oi, "wire_group") != LUA_TNIL) {
    lua_Integer g = opt_integer_at(L, -1, oi, "wire_group");
    luaL_argcheck(L, g >= 0 && g <= INT_MAX, oi, "wire_group must be 32, 64 or 128 (0 = 32)");
    o->wire_group = (int)g;
  }
  lua_pop(L, 1);
}

/* Reads the options table at `oi` (may be absent) into call; nccl = only what NCCL takes.
 * out_dtype is GC_DTYPE_SAME and add NULL where the option is absent. */
static void parse_opts(lua_State *L, int oi, coll_t k, int nccl, call_t *call, int *has_count,
                       size_t *count, gc_dtype_t *out_dtype, lgc_buffer_t **add) {
  static const char *const all[] = {"op", "algo", "max_blocks", "pdl", "scale", "add",
                                    "out_dtype", "stream", "count", "wire", "wire_group", NULL};
  static const char *const nccl_keys[] = {"op", "stream", "count", NULL};
  *has_count = 0;
  *out_dtype = GC_DTYPE_SAME;
  *add = NULL;
  if (lua_isnoneornil(L, oi)) return;
  luaL_checktype(L, oi, LUA_TTABLE);
  lgc_check_keys(L, oi, nccl ? nccl_keys : all);
  if (lgc_optfield(L, oi, "op") != LUA_TNIL) {
    if (!reducing(k)) luaL_argerror(L, oi, "option 'op' applies to reductions only");
    call->op = op_at(L, -1, oi, "op");
  }
  lua_pop(L, 1);
  parse_launch_opts(L, oi, &call->o, &call->stream);
  if (lgc_optfield(L, oi, "scale") != LUA_TNIL) call->o.scale = opt_number_at(L, -1, oi, "scale");
  lua_pop(L, 1);
  if (lgc_optfield(L, oi, "out_dtype") != LUA_TNIL) *out_dtype = dtype_at(L, -1, oi, "out_dtype");
  lua_pop(L, 1);
  if (lgc_optfield(L, oi, "count") != LUA_TNIL) {
    lua_Integer n = opt_integer_at(L, -1, oi, "count");
    luaL_argcheck(L, n >= 0, oi, "count must be >= 0");
    *count = (size_t)n;
    *has_count = 1;
  }
  lua_pop(L, 1);
  *add = opt_buffer_at(L, oi, "add");
  parse_wire_opts(L, oi, &call->o);
}

/* Arguments: (self, send, recv, [root | rows, cols, axis], opts). */
static void prepare(lua_State *L, lgc_comm_t *c, coll_t k, int nccl, call_t *call) {
  gc_options_t init = GC_OPTIONS_INIT;
  memset(call, 0, sizeof *call);
  call->o = init;
  call->op = GC_SUM;
  call->stream = c->stream;
  int oi = k == C_BROADCAST ? 5 : k == C_RS2D ? 7 : 4;
  lgc_buffer_t *send = NULL, *recv = lgc_checkbuffer(L, 3);
  if (k == C_BROADCAST && lua_isnoneornil(L, 2))
    send = NULL; /* non-root ranks need no send buffer */
  else
    send = lgc_checkbuffer(L, 2);
  if (k == C_BROADCAST) {
    lua_Integer root = luaL_optinteger(L, 4, 0);
    luaL_argcheck(L, root >= 0 && root < c->size, 4, "root out of range");
    call->root = (int)root;
  }
  if (k == C_RS2D) {
    lua_Integer rows = luaL_checkinteger(L, 4), cols = luaL_checkinteger(L, 5);
    lua_Integer axis = luaL_checkinteger(L, 6);
    luaL_argcheck(L, rows >= 0, 4, "rows must be >= 0");
    luaL_argcheck(L, cols >= 0, 5, "cols must be >= 0");
    luaL_argcheck(L, axis == 0 || axis == 1, 6, "axis must be 0 (rows) or 1 (columns)");
    call->rows = (size_t)rows;
    call->cols = (size_t)cols;
    call->axis = (int)axis;
  }
  int has_count;
  size_t count = 0;
  gc_dtype_t out_dtype;
  lgc_buffer_t *add;
  parse_opts(L, oi, k, nccl, call, &has_count, &count, &out_dtype, &add);

  call->dtype = send ? send->dtype : recv->dtype;
  if (send && !reducing(k) && send->dtype != recv->dtype)
    luaL_argerror(L, 3, "send and recv must have the same dtype");
  /* A reduction may convert on output: recv's dtype is the output dtype. */
  gc_dtype_t out = recv->dtype;
  if (out_dtype != GC_DTYPE_SAME && out_dtype != out)
    luaL_argerror(L, oi, lua_pushfstring(L, "out_dtype %s does not match recv's dtype %s",
                                         gc_dtype_name(out_dtype), gc_dtype_name(out)));
  if (out != call->dtype) {
    if (nccl) luaL_argerror(L, 3, "NCCL needs send and recv of the same dtype");
    call->o.out_dtype = out;
  }
  int inplace = send != NULL && send == recv;
  /* Reduce-scatter and all-gather split into the ranks, the mixed operations into the node's
   * ranks: n parts, this rank's the slot-th. */
  int n_parts = c->size, slot = c->rank;
  if (k == C_RS_AR || k == C_AR_AG) {
    gc_comm_local_size(c->comm, &n_parts);
    gc_comm_local_rank(c->comm, &slot);
  }
  size_t n = (size_t)n_parts;
  size_t outcount = 0;
  call->send = send ? lgc_ptr(send) : NULL;
  call->recv = lgc_ptr(recv);
  size_t es = gc_dtype_size(call->dtype);
  switch (k) {
  case C_ALLREDUCE:
    call->count = has_count ? count : send->count;
    need(L, 2, send, call->count, "send");
    need(L, 3, recv, call->count, "recv");
    outcount = call->count;
    break;
  case C_REDUCESCATTER:
  case C_RS_AR:
    call->count = has_count ? count : send->count / n;
    need(L, 2, send, call->count * n, "send");
    if (inplace)
      call->recv = (char *)lgc_ptr(send) + (size_t)slot * call->count * es;
    else
      need(L, 3, recv, call->count, "recv");
    outcount = call->count;
    break;
  case C_RS2D: {
    size_t off, len;
    need(L, 2, send, call->rows * call->cols, "send");
    gc_partition(call->axis == 0 ? call->rows : call->cols, c->size, c->rank, &off, &len);
    outcount = call->axis == 0 ? len * call->cols : call->rows * len;
    if (inplace) {
      /* The library's in-place layout is recv == this rank's rows of send; it has none for
       * columns. Refused alike on every rank, so that none enters the collective alone. */
      if (call->axis != 0)
        luaL_argerror(L, 3, "in place needs axis 0 (no in-place layout for columns)");
      call->recv = (char *)lgc_ptr(send) + off * call->cols * es;
    } else {
      need(L, 3, recv, outcount, "recv");
    }
    break;
  }
  case C_ALLGATHER:
  case C_AR_AG:
    call->count = has_count ? count : inplace ? recv->count / n : send->count;
    if (inplace)
      call->send = (char *)lgc_ptr(recv) + (size_t)slot * call->count * es;
    else
      need(L, 2, send, call->count, "send");
    need(L, 3, recv, call->count * n, "recv");
    outcount = k == C_AR_AG ? call->count : call->count * n; /* the add's: the all-reduce's */
    break;
  case C_BROADCAST:
    call->count = has_count ? count : recv->count;
    need(L, 3, recv, call->count, "recv");
    /* Refused here, not by the library: its peers, which need no send buffer, would already be
     * waiting in the broadcast when the root's call failed. */
    if (c->rank == call->root) {
      if (send == NULL) luaL_argerror(L, 2, "the root needs a send buffer");
      need(L, 2, send, call->count, "send");
    }
    outcount = call->count;
    break;
  }
  if (add) {
    if (add->dtype != call->dtype) luaL_argerror(L, oi, "the add buffer must have the input dtype");
    need(L, oi, add, outcount, "add");
    call->o.add = lgc_ptr(add);
  }
}

static gc_result_t run_gpucoll(lgc_comm_t *c, coll_t k, const call_t *a) {
  switch (k) {
  case C_ALLREDUCE:
    return gc_allreduce_ex(a->send, a->recv, a->count, a->dtype, a->op, c->comm, a->stream, &a->o);
  case C_REDUCESCATTER:
    return gc_reducescatter_ex(a->send, a->recv, a->count, a->dtype, a->op, c->comm, a->stream,
                               &a->o);
  case C_RS2D:
    return gc_reducescatter_2d(a->send, a->recv, a->rows, a->cols, a->axis, a->dtype, a->op,
                               c->comm, a->stream, &a->o);
  case C_ALLGATHER:
    return gc_allgather_ex(a->send, a->recv, a->count, a->dtype, c->comm, a->stream, &a->o);
  case C_BROADCAST:
    return gc_broadcast_ex(a->send, a->recv, a->count, a->dtype, a->root, c->comm, a->stream,
                           &a->o);
  case C_RS_AR:
    return gc_reducescatter_allreduce(a->send, a->recv, a->count, a->dtype, a->op, c->comm,
                                      a->stream, &a->o);
  case C_AR_AG:
    return gc_allreduce_allgather(a->send, a->recv, a->count, a->dtype, a->op, c->comm, a->stream,
                                  &a->o);
  }
  return GC_ERR_INTERNAL;
}

static int collective(lua_State *L, coll_t k) {
  lgc_comm_t *c = lgc_checkcomm(L, 1);
  call_t call;
  prepare(L, c, k, 0, &call);
  return lgc_ok(L, c, lgc_unstick(c, run_gpucoll(c, k, &call), call.stream)); /* the MPI path waits */
}

/* comm:plan(collective, <that collective's arguments>): the plan the call would take, running
 * nothing (not collective): a table of algorithm, fell_from (absent: no fallback), from_table,
 * path, blocks, threads, chunk_bytes, piece_bytes and staged; nil, msg, code where the call
 * would be refused. The collective's name is taken off the stack, so argument errors count from
 * the collective's own arguments. */
static int m_plan(lua_State *L) {
  static const char *const names[] = {"allreduce", "reducescatter", "allgather", "broadcast", NULL};
  static const coll_t kinds[] = {C_ALLREDUCE, C_REDUCESCATTER, C_ALLGATHER, C_BROADCAST};
  static const gc_collective_t colls[] = {GC_COLLECTIVE_ALLREDUCE, GC_COLLECTIVE_REDUCESCATTER,
                                          GC_COLLECTIVE_ALLGATHER, GC_COLLECTIVE_BROADCAST};
  lgc_comm_t *c = lgc_checkcomm(L, 1);
  const int i = luaL_checkoption(L, 2, NULL, names);
  lua_remove(L, 2);
  call_t call;
  prepare(L, c, kinds[i], 0, &call);
  gc_plan_t p = GC_PLAN_INIT;
  gc_result_t r = gc_plan_query(&p, colls[i], call.send, call.recv, call.count, call.dtype, call.op,
                                call.root, c->comm, &call.o);
  if (r != GC_SUCCESS) return lgc_ok(L, c, r);
  lua_createtable(L, 0, 9);
  lua_pushstring(L, gc_algo_name(p.algo));
  lua_setfield(L, -2, "algorithm");
  if (p.fell_from != GC_ALGO_AUTO) {
    lua_pushstring(L, gc_algo_name(p.fell_from));
    lua_setfield(L, -2, "fell_from");
  }
  lua_pushboolean(L, p.from_table);
  lua_setfield(L, -2, "from_table");
  lua_pushstring(L, gc_plan_path_name(p.path));
  lua_setfield(L, -2, "path");
  const lua_Integer numbers[] = {p.blocks, p.threads, (lua_Integer)p.chunk_bytes, (lua_Integer)p.piece_bytes};
  static const char *const keys[] = {"blocks", "threads", "chunk_bytes", "piece_bytes"};
  for (int k = 0; k < 4; k++) {
    lua_pushinteger(L, numbers[k]);
    lua_setfield(L, -2, keys[k]);
  }
  lua_pushboolean(L, p.staged);
  lua_setfield(L, -2, "staged");
  return 1;
}

static int m_allreduce(lua_State *L) { return collective(L, C_ALLREDUCE); }
static int m_reducescatter(lua_State *L) { return collective(L, C_REDUCESCATTER); }
static int m_reducescatter_2d(lua_State *L) { return collective(L, C_RS2D); }
static int m_allgather(lua_State *L) { return collective(L, C_ALLGATHER); }
static int m_broadcast(lua_State *L) { return collective(L, C_BROADCAST); }
static int m_reducescatter_allreduce(lua_State *L) { return collective(L, C_RS_AR); }
static int m_allreduce_allgather(lua_State *L) { return collective(L, C_AR_AG); }

/* comm:allreduce_rmsnorm_fp8(send, out, scales, gamma, rows, cols [, opts]) — the fused all-reduce +
 * RMSNorm + FP8 quantization of a rows x cols matrix (gpucoll.h gives the formulas). send holds the
 * input (float32, float16 or bfloat16), out receives the quantized rows in its own dtype (fp8),
 * scales (float32) one scale per row, gamma the cols weights in send's dtype. opts: epsilon
 * weight_offset scale_ub residual residual_out out_dtype numerics algo max_blocks pdl stream;
 * residual and residual_out are buffers of send's dtype (residual_out may be residual itself);
 * numerics is "max" (the default) or "rounded". */
static int m_allreduce_rmsnorm_fp8(lua_State *L) {
  static const char *const keys[] = {"epsilon", "weight_offset", "scale_ub", "residual",
                                     "residual_out", "out_dtype", "numerics", "algo", "max_blocks",
                                     "pdl", "stream", NULL};
  lgc_comm_t *c = lgc_checkcomm(L, 1);
  lgc_buffer_t *send = lgc_checkbuffer(L, 2), *out = lgc_checkbuffer(L, 3);
  lgc_buffer_t *scales = lgc_checkbuffer(L, 4);
  if (lua_isnoneornil(L, 5))
    luaL_argerror(L, 5, "gamma is required (a gpucoll.buffer of cols weights)");
  lgc_buffer_t *gamma = lgc_checkbuffer(L, 5);
  lua_Integer rows = luaL_checkinteger(L, 6), cols = luaL_checkinteger(L, 7);
  luaL_argcheck(L, rows >= 0, 6, "rows must be >= 0");
  luaL_argcheck(L, cols >= 0, 7, "cols must be >= 0");
  luaL_argcheck(L, cols == 0 || rows <= LUA_MAXINTEGER / cols, 6, "rows x cols is too large");
  const int oi = 8;
  gc_rmsnorm_fp8_t norm = GC_RMSNORM_FP8_INIT;
  gc_options_t o = GC_OPTIONS_INIT;
  void *stream = c->stream;
  lgc_buffer_t *residual = NULL, *residual_out = NULL;
  norm.out_dtype = out->dtype; /* the library refuses what is no fp8 type */
  if (!lua_isnoneornil(L, oi)) {
    luaL_checktype(L, oi, LUA_TTABLE);
    lgc_check_keys(L, oi, keys);
    const struct { const char *key; float *at; } numbers[] = {
        {"epsilon", &norm.epsilon}, {"weight_offset", &norm.weight_offset}, {"scale_ub", &norm.scale_ub}};
    for (int i = 0; i < 3; i++) {
      if (lgc_optfield(L, oi, numbers[i].key) != LUA_TNIL) *numbers[i].at = (float)opt_number_at(L, -1, oi, numbers[i].key);
      lua_pop(L, 1);
    }
    if (lgc_optfield(L, oi, "out_dtype") != LUA_TNIL) {
      gc_dtype_t od = dtype_at(L, -1, oi, "out_dtype");
      if (od != out->dtype)
        luaL_argerror(L, oi, lua_pushfstring(L, "out_dtype %s does not match out's dtype %s",
                                             gc_dtype_name(od), gc_dtype_name(out->dtype)));
    }
    lua_pop(L, 1);
    if (lgc_optfield(L, oi, "numerics") != LUA_TNIL) {
      if (lua_type(L, -1) != LUA_TSTRING || gc_norm_numerics_from_name(lua_tostring(L, -1), &norm.numerics) != GC_SUCCESS)
        luaL_argerror(L, oi, "numerics must be \"max\" or \"rounded\"");
    }
    lua_pop(L, 1);
    residual = opt_buffer_at(L, oi, "residual");
    residual_out = opt_buffer_at(L, oi, "residual_out");
    parse_launch_opts(L, oi, &o, &stream);
  }
  const size_t count = (size_t)rows * (size_t)cols;
  const gc_dtype_t dtype = send->dtype;
  need(L, 2, send, count, "send");
  need(L, 3, out, count, "out");
  need(L, 4, scales, (size_t)rows, "scales");
  need(L, 5, gamma, (size_t)cols, "gamma");
  if (scales->dtype != GC_FLOAT32) luaL_argerror(L, 4, "scales must be a float32 buffer");
  if (gamma->dtype != dtype) luaL_argerror(L, 5, "gamma must have send's dtype");
  const struct { lgc_buffer_t *b; const char *name; } extra[] = {{residual, "residual"},
                                                                 {residual_out, "residual_out"}};
  for (int i = 0; i < 2; i++) {
    if (!extra[i].b) continue;
    if (extra[i].b->dtype != dtype)
      luaL_argerror(L, oi, lua_pushfstring(L, "the %s buffer must have send's dtype", extra[i].name));
    need(L, oi, extra[i].b, count, extra[i].name);
  }
  norm.gamma = lgc_ptr(gamma);
  norm.residual = residual ? lgc_ptr(residual) : NULL;
  norm.residual_out = residual_out ? lgc_ptr(residual_out) : NULL;
  gc_result_t rc = gc_allreduce_rmsnorm_fp8(lgc_ptr(send), lgc_ptr(out), lgc_ptr(scales), (size_t)rows,
                                            (size_t)cols, dtype, &norm, c->comm, stream, &o);
  return lgc_ok(L, c, lgc_unstick(c, rc, stream)); /* the MPI path waits */
}

/* ---------------------------------------------------------------------------------------------
 * Timing: gc_time calls back into Lua; fn(stream) enqueues the operation to time.
 * ------------------------------------------------------------------------------------------- */
typedef struct {
  lua_State *L;
  int fn;       /* stack index of the Lua function */
  int err_ref;  /* the error value once fn failed */
  int raised;   /* fn raised (rethrown) rather than returned nil, msg, code */
  gc_result_t rc;
} timed_t;

static gc_result_t timed_call(void *arg, void *stream) {
  timed_t *t = arg;
  lua_State *L = t->L;
  if (t->err_ref != LUA_NOREF) return t->rc; /* stop at the first failure */
  lua_pushvalue(L, t->fn);
  lua_pushinteger(L, (lua_Integer)(uintptr_t)stream);
  if (lua_pcall(L, 1, 3, 0) != LUA_OK) {
    t->raised = 1;
    t->rc = GC_ERR_INVALID_USAGE;
    t->err_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return t->rc;
  }
  /* The nil, msg, code convention (or false, msg) from a collective inside fn. */
  if (!lua_toboolean(L, -3) && lua_type(L, -2) == LUA_TSTRING) {
    t->rc = result_from_name(lua_tostring(L, -1));
    if (t->rc == GC_SUCCESS) t->rc = GC_ERR_INVALID_USAGE;
    lua_pop(L, 1);
    t->err_ref = luaL_ref(L, LUA_REGISTRYINDEX); /* the message */
    lua_pop(L, 1);
    return t->rc;
  }
  lua_pop(L, 3);
  return GC_SUCCESS;
}

/* comm:time(fn, {warmup=, iters=, graph=, stream=}) -> microseconds per call (max over ranks). */
static int m_time(lua_State *L) {
  static const char *const keys[] = {"warmup", "iters", "graph", "stream", NULL};
  lgc_comm_t *c = lgc_checkcomm(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  int warmup = 5, iters = 20, graph = c->device >= 0;
  void *stream = c->stream;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    lgc_check_keys(L, 3, keys);
    warmup = opt_int(L, 3, "warmup", warmup, 0);
    iters = opt_int(L, 3, "iters", iters, 1);
    graph = opt_int(L, 3, "graph", graph, INT_MIN);
    if (lgc_optfield(L, 3, "stream") != LUA_TNIL) stream = stream_at(L, -1, 3);
    lua_pop(L, 1);
  }
  lua_settop(L, 3);
  timed_t t = {L, 2, LUA_NOREF, 0, GC_SUCCESS};
  double us = 0;
  /* No collection while timing: a finalizer freeing device memory (cudaFree) in the middle of a
   * graph capture would invalidate it, and collector pauses would land in the timed loop. */
  int gc_was_running = lua_gc(L, LUA_GCISRUNNING);
  lua_gc(L, LUA_GCSTOP);
  c->busy++; /* fn may not close c inside gc_time */
  gc_result_t rc = lgc_unstick(c, gc_time(c->comm, timed_call, &t, stream, warmup, iters, graph, &us), stream);
  c->busy--;
  if (gc_was_running) lua_gc(L, LUA_GCRESTART);
  if (t.err_ref != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, t.err_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, t.err_ref);
    if (t.raised) return lua_error(L);
    const char *msg = lua_tostring(L, -1);
    return lgc_failmsg(L, gc_result_name(t.rc), "%s", msg);
  }
  if (rc != GC_SUCCESS) return lgc_fail(L, c, rc);
  lua_pushnumber(L, us);
  return 1;
}

/* ---------------------------------------------------------------------------------------------
 * NCCL, loaded at run time by bench/nccl/nccl_loader.c, with the same collective signatures.
 * ------------------------------------------------------------------------------------------- */
#ifdef LGC_HAVE_NCCL
static void note_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note_add(const char *fmt, ...) {
  size_t len = strlen(unstick_note);
  if (len + 1 >= sizeof unstick_note) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(unstick_note + len, sizeof unstick_note - len, fmt, ap);
  va_end(ap);
}

gc_result_t lgc_unstick(lgc_comm_t *c, gc_result_t rc, void *stream) {
  unstick_note[0] = '\0';
  if (rc != GC_ERR_STREAM_TIMEOUT) return rc;
  int tried = 0, aborted = 0;
  for (lgc_nccl_t *n = c->nccls; n; n = n->next) {
    if (!n->h || !n->used || gcb_nccl_aborted(n->h)) continue;
    if (!tried++) note_add("%s", gc_comm_last_error(c->comm));
    char async[512] = "", err[512] = "";
    gcb_nccl_async_error(n->h, async, sizeof async);
    if (gcb_nccl_abort(n->h, "its kernels could not finish: a wait for them timed out", err, sizeof err) == 0) {
      aborted++;
      note_add("; aborted the NCCL communicator (rank %d/%d), whose kernels could not finish%s%s", c->rank,
               c->size, async[0] ? ": " : "", async);
    } else {
      note_add("; could not abort the NCCL communicator (rank %d/%d): %s", c->rank, c->size, err);
    }
  }
  if (aborted) {
    /* The aborted kernels end now; what follows them on the stream still has to. */
    if (gc_synchronize(c->comm, stream) == GC_SUCCESS)
      note_add("; the stream has finished since; open another with comm:nccl()");
    else
      note_add("; the stream is still not done: %s", gc_comm_last_error(c->comm));
  }
  return rc;
}

/* Closes n. ncclCommDestroy waits for the calls in flight, so they are waited for first, bounded
 * (and aborted when stuck): the result of that wait, for close() to report. */
static gc_result_t nccl_release(lua_State *L, lgc_nccl_t *n) {
  gc_result_t rc = GC_SUCCESS;
  if (n->h) {
    lgc_comm_t *c = n->comm;
    if (n->used && !gcb_nccl_aborted(n->h)) {
      rc = lgc_quiesce(c);
      if (rc == GC_SUCCESS && n->stream != c->stream && n->stream != NULL)
        rc = lgc_unstick(c, gc_synchronize(c->comm, n->stream), n->stream);
    }
    /* Its buffers go first, in the same order on every rank (symmetric windows are
     * deregistered collectively): they need the communicator. */
    for (lgc_buffer_t *b = c->buffers; b;) {
      if (b->kind != LGC_NCCL_MEM || b->nccl != n) {
        b = b->next;
        continue;
      }
      gc_result_t brc = lgc_buffer_release(L, b);
      if (rc == GC_SUCCESS) rc = brc;
      b = c->buffers;
    }
    gcb_nccl_close(n->h);
    n->h = NULL;
  }
  for (lgc_nccl_t **p = &n->comm->nccls; *p; p = &(*p)->next)
    if (*p == n) {
      *p = n->next;
      break;
    }
  n->next = NULL;
  lgc_unanchor(L, n);
  return rc;
}

static const char *const nccl_mode_names[] = {"plain", "registered", "symmetric", NULL};

gc_result_t lgc_nccl_free(lgc_buffer_t *b) {
  lgc_nccl_t *n = b->nccl;
  if (n == NULL || n->h == NULL) return GC_SUCCESS; /* nccl_release frees them before it closes */
  char err[512] = "";
  gcb_nccl_mode_t mode = (gcb_nccl_mode_t)b->nccl_mode;
  int bad = gcb_nccl_deregister(n->h, mode, b->nccl_reg, err, sizeof err);
  b->nccl_reg = NULL;
  if (!bad) bad = gcb_nccl_buffer_free(n->h, mode, b->base, err, sizeof err);
  if (!bad) return GC_SUCCESS;
  unstick_note[0] = '\0';
  note_add("NCCL %s buffer: %s", nccl_mode_names[mode], err);
  return GC_ERR_REMOTE;
}

static lgc_nccl_t *check_nccl(lua_State *L, int idx) {
  lgc_nccl_t *n = luaL_checkudata(L, idx, LGC_NCCL);
  if (n->h == NULL) luaL_argerror(L, idx, "the NCCL communicator is closed");
  return n;
}

static const gcb_coll_t nccl_coll[] = {GCB_ALLREDUCE, GCB_REDUCESCATTER, GCB_NUM_COLLS,
                                       GCB_ALLGATHER, GCB_BROADCAST};

static int nccl_collective(lua_State *L, coll_t k) {
  lgc_nccl_t *n = check_nccl(L, 1);
  call_t call;
  prepare(L, n->comm, k, 1, &call);
  char err[512] = "";
  if (gcb_nccl_run(n->h, nccl_coll[k], call.send, call.recv, call.count, call.dtype, call.op,
                   call.root, call.stream, err, sizeof err) != 0)
    return lgc_failmsg(L, gc_result_name(gcb_nccl_aborted(n->h) ? GC_ERR_INVALID_USAGE : GC_ERR_REMOTE),
                       "NCCL: %s", err);
  n->used = 1;
  n->stream = call.stream;
  lua_pushboolean(L, 1);
  return 1;
}

static int n_allreduce(lua_State *L) { return nccl_collective(L, C_ALLREDUCE); }
static int n_reducescatter(lua_State *L) { return nccl_collective(L, C_REDUCESCATTER); }
static int n_allgather(lua_State *L) { return nccl_collective(L, C_ALLGATHER); }
static int n_broadcast(lua_State *L) { return nccl_collective(L, C_BROADCAST); }

/* nc:mode(name) -> true when this NCCL has buffer mode `name` ("plain", "registered",
 * "symmetric"; nccl-tests' -R 0, 1, 2), else nil, a one-line reason, GC_ERR_UNSUPPORTED. The same
 * on every rank of one NCCL version. */
static int n_mode(lua_State *L) {
  lgc_nccl_t *n = check_nccl(L, 1);
  gcb_nccl_mode_t mode = (gcb_nccl_mode_t)luaL_checkoption(L, 2, NULL, nccl_mode_names);
  char err[512] = "";
  if (gcb_nccl_mode_available(n->h, mode, err, sizeof err) != 0)
    return lgc_failmsg(L, gc_result_name(GC_ERR_UNSUPPORTED), "%s", err);
  lua_pushboolean(L, 1);
  return 1;
}

/* Every rank learns whether all of them succeeded (so that none enters a collective registration
 * its peers skip); a failed MPI call counts as a failure. */
static int all_ok(lgc_comm_t *c, int ok) {
  int all = 0;
  return MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, c->mpi) == MPI_SUCCESS && all;
}

/* nc:buffer(count, dtype [, mode]) -> a device buffer (kind "nccl") prepared for NCCL buffer mode
 * `mode` (default "plain": cudaMalloc; "registered": ncclMemAlloc + ncclCommRegister;
 * "symmetric": ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC), collective: every
 * rank makes the same sizes in the same order, and frees them so, with free(), <close> or
 * nc:close(), never the collector), or nil, msg, code. It takes every buffer method, and gpucoll's
 * collectives too. */
static int n_buffer(lua_State *L) {
  lgc_nccl_t *n = check_nccl(L, 1);
  lua_Integer count = luaL_checkinteger(L, 2);
  luaL_argcheck(L, count >= 0, 2, "count must be >= 0");
  gc_dtype_t dtype = lgc_checkdtype(L, 3);
  gcb_nccl_mode_t mode = (gcb_nccl_mode_t)luaL_checkoption(L, 4, "plain", nccl_mode_names);
  size_t es = gc_dtype_size(dtype);
  luaL_argcheck(L, (size_t)count <= SIZE_MAX / es, 2, "count too large");
  size_t bytes = (count ? (size_t)count : 1) * es;
  char err[512] = "";
  if (gcb_nccl_mode_available(n->h, mode, err, sizeof err) != 0)
    return lgc_failmsg(L, gc_result_name(GC_ERR_UNSUPPORTED), "%s", err);
  lgc_buffer_t *b = lua_newuserdatauv(L, sizeof *b, 1);
  memset(b, 0, sizeof *b);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* the NCCL communicator (and its comm) outlive the buffer */
  void *p = NULL, *reg = NULL;
  int ok = gcb_nccl_buffer_alloc(n->h, mode, bytes, &p, err, sizeof err) == 0;
  if (mode == GCB_NCCL_SYMMETRIC && !all_ok(n->comm, ok) && ok) {
    snprintf(err, sizeof err, "another rank could not allocate its %zu bytes", bytes);
    ok = 0;
  } else if (ok && gcb_nccl_register(n->h, mode, p, bytes, &reg, err, sizeof err) != 0) {
    ok = 0;
  }
  if (!ok) {
    char ignored[256];
    if (p) gcb_nccl_buffer_free(n->h, mode, p, ignored, sizeof ignored);
    return lgc_failmsg(L, gc_result_name(GC_ERR_REMOTE), "NCCL %s buffer of %zu bytes: %s",
                       nccl_mode_names[mode], bytes, err);
  }
  b->nccl = n;
  b->nccl_mode = (int)mode;
  b->nccl_reg = reg;
  lgc_buffer_init(L, b, n->comm, p, (size_t)count, dtype, LGC_NCCL_MEM, mode == GCB_NCCL_SYMMETRIC);
  return 1;
}

static int n_version(lua_State *L) {
  lua_pushstring(L, gcb_nccl_version(check_nccl(L, 1)->h));
  return 1;
}

static int n_close(lua_State *L) {
  lgc_nccl_t *n = luaL_checkudata(L, 1, LGC_NCCL);
  lgc_comm_t *c = n->comm;
  return lgc_ok(L, c, n->h ? nccl_release(L, n) : GC_SUCCESS);
}

/* nc:abort() — ends this rank's NCCL communicator at once, calls in flight included (their
 * kernels stop waiting for peers); its later calls fail. close() still releases it. */
static int n_abort(lua_State *L) {
  lgc_nccl_t *n = check_nccl(L, 1);
  char err[512] = "";
  if (gcb_nccl_abort(n->h, "by nc:abort()", err, sizeof err) != 0)
    return lgc_failmsg(L, gc_result_name(GC_ERR_UNSUPPORTED), "NCCL: %s", err);
  lua_pushboolean(L, 1);
  return 1;
}

static int n_gc(lua_State *L) {
  lgc_nccl_t *n = luaL_checkudata(L, 1, LGC_NCCL);
  if (n->h) nccl_release(L, n);
  unstick_note[0] = '\0'; /* an account of its wait has nobody to tell */
  return 0;
}

static int n_tostring(lua_State *L) {
  lgc_nccl_t *n = luaL_checkudata(L, 1, LGC_NCCL);
  if (n->h)
    lua_pushfstring(L, "gpucoll.nccl (NCCL %s, rank %d/%d%s)", gcb_nccl_version(n->h), n->comm->rank,
                    n->comm->size, gcb_nccl_aborted(n->h) ? ", aborted" : "");
  else
    lua_pushstring(L, "gpucoll.nccl (closed)");
  return 1;
}

static const luaL_Reg nccl_methods[] = {
    {"allreduce", n_allreduce}, {"reducescatter", n_reducescatter}, {"allgather", n_allgather},
    {"broadcast", n_broadcast}, {"version", n_version},             {"close", n_close},
    {"abort", n_abort},         {"mode", n_mode},               {"buffer", n_buffer},
    {NULL, NULL}};

/* comm:nccl() -> an NCCL communicator over the same ranks and device, or nil, msg, code.
 * Collective (NCCL's unique id is broadcast over MPI). */
static int m_nccl(lua_State *L) {
  lgc_comm_t *c = lgc_checkcomm(L, 1);
  lgc_nccl_t *n = lua_newuserdatauv(L, sizeof *n, 1);
  memset(n, 0, sizeof *n);
  luaL_setmetatable(L, LGC_NCCL);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* the comm outlives its NCCL handle */
  char err[512] = "";
  gcb_nccl_t *h = NULL;
  /* Collective also on host-only ranks: the loader names a missing library first, then a rank
   * without a GPU, alike on every rank. */
  if (gcb_nccl_open(&h, c->mpi, c->device, err, sizeof err) != 0)
    return lgc_failmsg(L, gc_result_name(GC_ERR_UNSUPPORTED), "NCCL unavailable: %s", err);
  n->h = h;
  n->comm = c;
  n->next = c->nccls;
  c->nccls = n;
  lgc_anchor(L, -1);
  return 1;
}
#else
gc_result_t lgc_unstick(lgc_comm_t *c, gc_result_t rc, void *stream) {
  (void)c;
  (void)stream;
  return rc; /* no NCCL here: nothing of ours can be stuck */
}

static int m_nccl(lua_State *L) {
  lgc_checkcomm(L, 1);
  return lgc_failmsg(L, gc_result_name(GC_ERR_UNSUPPORTED),
                     "NCCL unavailable: gpucoll-lua was built without the NCCL loader (gpucoll_nccl)");
}
#endif

static const luaL_Reg comm_methods[] = {
    {"buffer", lgc_comm_buffer},
    {"symmetric", lgc_comm_symmetric},
    {"allreduce", m_allreduce},
    {"allreduce_rmsnorm_fp8", m_allreduce_rmsnorm_fp8},
    {"reducescatter", m_reducescatter},
    {"reducescatter_2d", m_reducescatter_2d},
    {"allgather", m_allgather},
    {"broadcast", m_broadcast},
    {"reducescatter_allreduce", m_reducescatter_allreduce},
    {"allreduce_allgather", m_allreduce_allgather},
    {"plan", m_plan},
    {"time", m_time},
    {"sync", m_sync},
    {"autotune", m_autotune},
    {"tune_save", m_tune_save},
    {"tune_load", m_tune_load},
    {"tune_reset", m_tune_reset},
    {"nccl", m_nccl},
    {"close", m_close},
    {NULL, NULL}};

/* ---------------------------------------------------------------------------------------------
 * Module functions.
 * ------------------------------------------------------------------------------------------- */
static int l_params(lua_State *L) {
  lua_pushstring(L, gc_params_table());
  return 1;
}

static int l_partition(lua_State *L) {
  lua_Integer total = luaL_checkinteger(L, 1), parts = luaL_checkinteger(L, 2);
  lua_Integer index = luaL_checkinteger(L, 3);
  luaL_argcheck(L, total >= 0, 1, "total must be >= 0");
  luaL_argcheck(L, parts >= 1 && parts <= INT_MAX, 2,
                lua_pushfstring(L, "parts must be between 1 and %d", INT_MAX));
  luaL_argcheck(L, index >= 0 && index < parts, 3, "index out of range");
  size_t off, len;
  gc_partition((size_t)total, (int)parts, (int)index, &off, &len);
  lua_pushinteger(L, (lua_Integer)off);
  lua_pushinteger(L, (lua_Integer)len);
  return 2;
}

static int l_dtype_size(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)gc_dtype_size(lgc_checkdtype(L, 1)));
  return 1;
}

static int l_strerror(lua_State *L) {
  gc_result_t rc = result_from_name(luaL_checkstring(L, 1));
  lua_pushstring(L, gc_strerror(rc));
  return 1;
}

/* gpucoll.world() -> rank, size of MPI_COMM_WORLD (before any communicator exists). */
static int l_world(lua_State *L) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  lua_pushinteger(L, rank);
  lua_pushinteger(L, size);
  return 2;
}

static const luaL_Reg module_funcs[] = {
    {"comm", l_comm},           {"params", l_params},         {"partition", l_partition},
    {"dtype_size", l_dtype_size}, {"strerror", l_strerror},   {"world", l_world},
    {NULL, NULL}};

static void push_names(lua_State *L, const char *field, const char *(*name)(int), int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushstring(L, name(i));
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, field);
}

/* When the module (not a host program such as gpucoll-lua) started MPI, it also ends it: from
 * the __gc of a registry sentinel made before any communicator, so it runs after their
 * finalizers at lua_close, or at exit() for scripts that leave through os.exit. */
static int owns_mpi;

static void finalize_mpi(void) {
  if (owns_mpi && lgc_mpi_live()) MPI_Finalize();
}

static int sentinel_gc(lua_State *L) {
  (void)L;
  finalize_mpi();
  return 0;
}

static void ensure_mpi(lua_State *L) {
  int init = 0;
  MPI_Initialized(&init);
  if (init) return;
#ifdef LGC_SHARED_MODULE
  /* lua5.4 dlopens us RTLD_LOCAL; Open MPI's plugins look up libmpi's symbols globally. */
  dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  dlopen("libmpi.so.12", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
#endif
  int provided = 0;
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    luaL_error(L, "gpucoll: MPI_Init_thread failed");
  owns_mpi = 1;
  atexit(finalize_mpi);
  lua_newuserdatauv(L, 0, 0);
  lua_newtable(L);
  lua_pushcfunction(L, sentinel_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "gpucoll.mpi_sentinel");
}

static void new_class(lua_State *L, const char *name, const luaL_Reg *methods,
                      lua_CFunction index, lua_CFunction gc, lua_CFunction tostring) {
  luaL_newmetatable(L, name);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  if (index) {
    lua_setfield(L, -2, "__methods");
    lua_pushcfunction(L, index);
  }
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
}

LGC_EXPORT int luaopen_gpucoll(lua_State *L) {
  ensure_mpi(L);
  if (lua_getfield(L, LUA_REGISTRYINDEX, ANCHORS) != LUA_TTABLE) {
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, ANCHORS);
  }
  lua_pop(L, 1);
  new_class(L, LGC_COMM, comm_methods, m_index, m_gc, m_tostring);
#ifdef LGC_HAVE_NCCL
  new_class(L, LGC_NCCL, nccl_methods, NULL, n_gc, n_tostring);
#endif
  lgc_buffer_register(L);

  luaL_newlib(L, module_funcs);
  lgc_output_register(L);
  lua_pushstring(L, gc_get_version());
  lua_setfield(L, -2, "version");
#ifdef LGC_HAVE_NCCL
  lua_pushboolean(L, 1);
#else
  lua_pushboolean(L, 0);
#endif
  lua_setfield(L, -2, "have_nccl");
  push_names(L, "dtypes", dtype_name_i, GC_NUM_DTYPES);
  push_names(L, "ops", op_name_i, GC_NUM_OPS);
  push_names(L, "algos", algo_name_i, GC_NUM_ALGOS);
  return 1;
}
