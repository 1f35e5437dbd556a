/* lgc_buffer.c — gpucoll.buffer: device, host and symmetric buffers, element access, checks. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lgc.h"

/* Elements are converted with the library's own rules: gc_element_get / gc_element_set. */
static int is_integer_dtype(gc_dtype_t d) { return d == GC_INT32 || d == GC_INT64 || d == GC_UINT8; }

/* ---------------------------------------------------------------------------------------------
 * The userdata.
 * ------------------------------------------------------------------------------------------- */
static const char *const kind_names[] = {"host", "device", "symmetric", "nccl"};

lgc_buffer_t *lgc_testbuffer(lua_State *L, int idx) { return luaL_testudata(L, idx, LGC_BUFFER); }

lgc_buffer_t *lgc_checkbuffer(lua_State *L, int idx) {
  lgc_buffer_t *b = luaL_checkudata(L, idx, LGC_BUFFER);
  if (b->root->base == NULL) luaL_argerror(L, idx, "the buffer has been freed");
  if (b->comm->comm == NULL) luaL_argerror(L, idx, "the buffer's communicator is closed");
  return b;
}

void *lgc_ptr(const lgc_buffer_t *b) {
  return b->root->base ? (char *)b->root->base + b->offset : NULL;
}

/* Host code may touch the memory directly: host buffers, and everything on host-only ranks. */
static int host_visible(const lgc_buffer_t *b) { return b->kind == LGC_HOST || b->comm->device < 0; }

gc_result_t lgc_quiesce(lgc_comm_t *c) {
  if (c->device < 0) return GC_SUCCESS;
  gc_result_t rc = lgc_unstick(c, gc_synchronize(c->comm, c->stream), c->stream);
  if (rc == GC_SUCCESS && c->stream != NULL) rc = lgc_unstick(c, gc_synchronize(c->comm, NULL), NULL);
  return rc;
}

static void list_remove(lgc_buffer_t *b) {
  if (b->prev)
    b->prev->next = b->next;
  else if (b->comm->buffers == b)
    b->comm->buffers = b->next;
  if (b->next) b->next->prev = b->prev;
  b->prev = b->next = NULL;
}

/* Forgets an owning buffer's memory (freed, or left to gc_comm_destroy). */
static void buffer_detach(lua_State *L, lgc_buffer_t *b) {
  b->base = NULL;
  list_remove(b);
  if (b->anchored) lgc_unanchor(L, b);
}

/* Frees an owning buffer; collective for symmetric ones. GC_ERR_STREAM_TIMEOUT (the device stayed
 * busy) frees nothing: with `keep` the buffer stays usable and may be freed again; without (the
 * buffer is going away) its memory is left to gc_comm_destroy. */
static gc_result_t buffer_release(lua_State *L, lgc_buffer_t *b, int keep) {
  if (b->root != b || b->base == NULL) return GC_SUCCESS;
  gc_result_t rc = GC_SUCCESS;
  if (b->comm->comm != NULL && b->kind == LGC_NCCL_MEM) {
#ifdef LGC_HAVE_NCCL
    rc = lgc_nccl_free(b);
#endif
  } else if (b->comm->comm != NULL) {
    rc = b->kind == LGC_SYMMETRIC ? gc_mem_free(b->comm->comm, b->base)
                                  : gc_buffer_free(b->comm->comm, b->base);
  }
  if (!keep || rc != GC_ERR_STREAM_TIMEOUT) buffer_detach(L, b);
  return rc;
}

gc_result_t lgc_buffer_release(lua_State *L, lgc_buffer_t *b) { return buffer_release(L, b, 0); }

/* Before gc_comm_destroy, which frees every buffer still made from the communicator: one
 * collective call and one wait for the device, not one per buffer. */
void lgc_buffers_detach(lua_State *L, lgc_comm_t *c) {
  while (c->buffers) buffer_detach(L, c->buffers);
}

static int make_buffer(lua_State *L, lgc_kind_t kind) {
  lgc_comm_t *c = lgc_checkcomm(L, 1);
  lua_Integer count = luaL_checkinteger(L, 2);
  luaL_argcheck(L, count >= 0, 2, "count must be >= 0");
  gc_dtype_t dtype = lgc_checkdtype(L, 3);
  if (kind != LGC_SYMMETRIC) {
    static const char *const where[] = {"host", "device", NULL};
    kind = (lgc_kind_t)luaL_checkoption(L, 4, c->device >= 0 ? "device" : "host", where);
  }
  size_t es = gc_dtype_size(dtype);
  luaL_argcheck(L, (size_t)count <= SIZE_MAX / es, 2, "count too large");
  /* Zero-element buffers still get one element of memory so their pointer is a real one. */
  size_t bytes = (count ? (size_t)count : 1) * es;
  lgc_buffer_t *b = lua_newuserdatauv(L, sizeof *b, 1);
  memset(b, 0, sizeof *b);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* the communicator outlives its buffers */
  void *p = NULL;
  gc_result_t rc = kind == LGC_SYMMETRIC ? gc_mem_alloc(c->comm, bytes, &p)
                                         : gc_buffer_alloc(c->comm, bytes, kind == LGC_DEVICE, &p);
  if (rc != GC_SUCCESS) return lgc_fail(L, c, rc);
  lgc_buffer_init(L, b, c, p, (size_t)count, dtype, kind, kind == LGC_SYMMETRIC);
  return 1;
}

void lgc_buffer_init(lua_State *L, lgc_buffer_t *b, lgc_comm_t *c, void *p, size_t count, gc_dtype_t dtype,
                     lgc_kind_t kind, int anchored) {
  b->comm = c;
  b->root = b;
  b->base = p;
  b->count = count;
  b->dtype = dtype;
  b->kind = kind;
  b->anchored = anchored;
  b->next = c->buffers;
  if (c->buffers) c->buffers->prev = b;
  c->buffers = b;
  luaL_setmetatable(L, LGC_BUFFER);
  if (anchored) lgc_anchor(L, -1); /* freed collectively, never by the collector */
}

int lgc_comm_buffer(lua_State *L) { return make_buffer(L, LGC_DEVICE); }
int lgc_comm_symmetric(lua_State *L) { return make_buffer(L, LGC_SYMMETRIC); }

/* compare() reads the buffer while its reference function runs: that function must not free it.
 * (__gc cannot run then: the buffer is on the stack; __close can.) */
static void check_idle(lua_State *L, const lgc_buffer_t *b) {
  if (b->busy) luaL_error(L, "cannot free the buffer inside its own compare() callback");
}

static int b_free(lua_State *L) {
  lgc_buffer_t *b = luaL_checkudata(L, 1, LGC_BUFFER);
  if (b->root != b) return luaL_argerror(L, 1, "a view cannot be freed; free the buffer it looks into");
  check_idle(L, b);
  return lgc_ok(L, b->comm, buffer_release(L, b, 1));
}

static int b_gc(lua_State *L) { /* __gc and __close */
  lgc_buffer_t *b = luaL_checkudata(L, 1, LGC_BUFFER);
  if (b->root == b) {
    check_idle(L, b);
    buffer_release(L, b, 0);
  }
  return 0;
}

static int b_tostring(lua_State *L) {
  lgc_buffer_t *b = luaL_checkudata(L, 1, LGC_BUFFER);
  if (lgc_ptr(b) == NULL)
    lua_pushfstring(L, "gpucoll.buffer (freed)");
  else
    lua_pushfstring(L, "gpucoll.buffer (%I x %s, %s%s, %p)", (lua_Integer)b->count,
                    gc_dtype_name(b->dtype), kind_names[b->kind], b->root != b ? " view" : "",
                    lgc_ptr(b));
  return 1;
}

static int b_len(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)((lgc_buffer_t *)luaL_checkudata(L, 1, LGC_BUFFER))->count);
  return 1;
}

/* Lua calls __eq for a buffer and any other userdata (a comm, a file) too: those are unequal. */
static int b_eq(lua_State *L) {
  lgc_buffer_t *a = lgc_testbuffer(L, 1), *b = lgc_testbuffer(L, 2);
  lua_pushboolean(L, a && b && a->root == b->root && a->offset == b->offset && a->count == b->count &&
                         a->dtype == b->dtype);
  return 1;
}

static int b_ptr(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)(uintptr_t)lgc_ptr(lgc_checkbuffer(L, 1)));
  return 1;
}

/* buf:offset(k) -> a view of elements k+1..#buf (k elements in), for unaligned pointers. */
static int b_offset(lua_State *L) {
  lgc_buffer_t *b = lgc_checkbuffer(L, 1);
  lua_Integer k = luaL_checkinteger(L, 2);
  luaL_argcheck(L, k >= 0 && (size_t)k <= b->count, 2, "offset out of range");
  lgc_buffer_t *v = lua_newuserdatauv(L, sizeof *v, 1);
  memset(v, 0, sizeof *v);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* keeps the buffer it looks into alive */
  v->comm = b->comm;
  v->root = b->root;
  v->offset = b->offset + (size_t)k * gc_dtype_size(b->dtype);
  v->count = b->count - (size_t)k;
  v->dtype = b->dtype;
  v->kind = b->kind;
  luaL_setmetatable(L, LGC_BUFFER);
  return 1;
}

/* A host copy of the first n elements (or the memory itself where the host may touch it). */
typedef struct {
  void *p;
  int owned;
} hostview_t;

static gc_result_t host_open(lgc_buffer_t *b, size_t n, int load_it, hostview_t *h) {
  h->owned = 0;
  h->p = lgc_ptr(b);
  if (host_visible(b)) return GC_SUCCESS;
  size_t bytes = n * gc_dtype_size(b->dtype);
  h->p = malloc(bytes ? bytes : 1);
  if (h->p == NULL) return GC_ERR_SYSTEM;
  h->owned = 1;
  gc_result_t rc = load_it && bytes ? gc_memcpy(b->comm->comm, h->p, lgc_ptr(b), bytes) : GC_SUCCESS;
  if (rc != GC_SUCCESS) { /* the callers only close views they opened */
    free(h->p);
    h->p = NULL;
    h->owned = 0;
  }
  return rc;
}

/* Writes a host copy back (store_it) and releases it. */
static gc_result_t host_close(lgc_buffer_t *b, size_t n, int store_it, hostview_t *h) {
  gc_result_t rc = GC_SUCCESS;
  if (!h->owned) return rc;
  size_t bytes = n * gc_dtype_size(b->dtype);
  if (store_it && bytes) rc = gc_memcpy(b->comm->comm, lgc_ptr(b), h->p, bytes);
  free(h->p);
  h->p = NULL;
  return rc;
}

/* buf:fill(seed) — the library's seeded random pattern; returns buf. */
static int b_fill(lua_State *L) {
  lgc_buffer_t *b = lgc_checkbuffer(L, 1);
  lua_Integer seed = luaL_checkinteger(L, 2);
  gc_result_t rc = lgc_quiesce(b->comm);
  if (rc == GC_SUCCESS)
    rc = gc_fill_random(b->comm->comm, lgc_ptr(b), b->count, b->dtype, (uint64_t)seed);
  if (rc == GC_SUCCESS) rc = lgc_quiesce(b->comm);
  return lgc_self(L, b->comm, rc);
}

/* buf:poison() — NaN in every float element (all-ones bits), 0xA5 bytes in integers, so that
 * an element a collective forgot to write cannot pass a comparison. Returns buf. */
static int b_poison(lua_State *L) {
  lgc_buffer_t *b = lgc_checkbuffer(L, 1);
  size_t bytes = b->count * gc_dtype_size(b->dtype);
  gc_result_t rc = lgc_quiesce(b->comm);
  hostview_t h;
  if (rc == GC_SUCCESS) rc = host_open(b, b->count, 0, &h);
  if (rc != GC_SUCCESS) return lgc_fail(L, b->comm, rc);
  memset(h.p, is_integer_dtype(b->dtype) ? 0xA5 : 0xFF, bytes);
  rc = host_close(b, b->count, 1, &h);
  if (rc == GC_SUCCESS) rc = lgc_quiesce(b->comm);
  return lgc_self(L, b->comm, rc);
}

static size_t check_index(lua_State *L, lgc_buffer_t *b, int idx) {
  lua_Integer i = luaL_checkinteger(L, idx);
  luaL_argcheck(L, i >= 1 && (size_t)i <= b->count, idx,
                lua_pushfstring(L, "index %I out of range 1..%I", i, (lua_Integer)b->count));
  return (size_t)i - 1;
}

static void push_element(lua_State *L, gc_dtype_t d, const void *p) {
  if (d == GC_INT64) {
    int64_t v;
    memcpy(&v, p, 8);
    lua_pushinteger(L, (lua_Integer)v);
  } else if (is_integer_dtype(d)) {
    lua_pushinteger(L, (lua_Integer)gc_element_get(p, 0, d));
  } else {
    lua_pushnumber(L, gc_element_get(p, 0, d));
  }
}

/* buf:get(i) -> element i (1-based) as a number; integers as Lua integers. */
static int b_get(lua_State *L) {
  lgc_buffer_t *b = lgc_checkbuffer(L, 1);
  size_t i = check_index(L, b, 2), es = gc_dtype_size(b->dtype);
  unsigned char tmp[8];
  gc_result_t rc = GC_SUCCESS;
  if (host_visible(b)) {
    memcpy(tmp, (char *)lgc_ptr(b) + i * es, es);
  } else {
    rc = lgc_quiesce(b->comm);
    if (rc == GC_SUCCESS) rc = gc_memcpy(b->comm->comm, tmp, (char *)lgc_ptr(b) + i * es, es);
  }
  if (rc != GC_SUCCESS) return lgc_fail(L, b->comm, rc);
  push_element(L, b->dtype, tmp);
  return 1;
}

/* buf:set(i, v) — element i (1-based); integers must be given as integers. Returns buf. */
static int b_set(lua_State *L) {
  lgc_buffer_t *b = lgc_checkbuffer(L, 1);
  size_t i = check_index(L, b, 2), es = gc_dtype_size(b->dtype);
  unsigned char tmp[8];
  if (b->dtype == GC_INT64) {
    int64_t v = (int64_t)luaL_checkinteger(L, 3);
    memcpy(tmp, &v, 8);
  } else if (is_integer_dtype(b->dtype)) {
    gc_element_set(tmp, 0, b->dtype, (double)luaL_checkinteger(L, 3));
  } else {
    gc_element_set(tmp, 0, b->dtype, luaL_checknumber(L, 3));
  }
  gc_result_t rc = GC_SUCCESS;
  if (host_visible(b)) {
    memcpy((char *)lgc_ptr(b) + i * es, tmp, es);
  } else {
    rc = lgc_quiesce(b->comm);
    if (rc == GC_SUCCESS) rc = gc_memcpy(b->comm->comm, (char *)lgc_ptr(b) + i * es, tmp, es);
    if (rc == GC_SUCCESS) rc = lgc_quiesce(b->comm);
  }
  return lgc_self(L, b->comm, rc);
}

/* Through host views of the first n elements of both (the callers quiesce their communicators
 * first): dst[i] = src[i] converted (op NULL), or dst[i] = op(dst[i], src[i]) in float64. *blame is
 * the communicator a failure belongs to: src's when its view cannot be made, else dst's. */
static gc_result_t host_combine(lgc_buffer_t *d, lgc_buffer_t *s, size_t n, const gc_op_t *op,
                                lgc_comm_t **blame) {
  hostview_t hs, hd;
  *blame = s->comm;
  gc_result_t rc = host_open(s, n, 1, &hs);
  if (rc != GC_SUCCESS) return rc;
  *blame = d->comm;
  rc = host_open(d, n, op != NULL, &hd);
  if (rc != GC_SUCCESS) {
    host_close(s, n, 0, &hs);
    return rc;
  }
  for (size_t i = 0; i < n; i++) {
    double x = gc_element_get(hs.p, i, s->dtype);
    if (op) {
      double a = gc_element_get(hd.p, i, d->dtype);
      x = *op == GC_SUM ? a + x : *op == GC_PROD ? a * x : *op == GC_MIN ? fmin(a, x) : fmax(a, x);
    }
    gc_element_set(hd.p, i, d->dtype, x);
  }
  host_close(s, n, 0, &hs);
  return host_close(d, n, 1, &hd);
}

/* dst:copy_from(src [, n]) — the first n (default #dst) elements of src into dst (same dtype: a
 * plain copy between any two places; other dtypes: converted on the host). Returns dst. */
static int b_copy_from(lua_State *L) {
  lgc_buffer_t *d = lgc_checkbuffer(L, 1), *s = lgc_checkbuffer(L, 2);
  lua_Integer want = luaL_optinteger(L, 3, (lua_Integer)d->count);
  luaL_argcheck(L, want >= 0 && (size_t)want <= d->count, 3, "count exceeds the destination");
  size_t n = (size_t)want;
  luaL_argcheck(L, s->count >= n, 2,
                lua_pushfstring(L, "source holds %I elements, the copy needs %I", (lua_Integer)s->count,
                                (lua_Integer)n));
  lgc_comm_t *blame = d->comm;
  gc_result_t rc = lgc_quiesce(d->comm);
  if (rc == GC_SUCCESS && s->comm != d->comm) {
    blame = s->comm;
    rc = lgc_quiesce(s->comm);
  }
  if (rc == GC_SUCCESS && d->dtype == s->dtype) {
    /* A host-only communicator copies with memmove, which cannot reach device memory: copy
     * through the one with a GPU when either has one. */
    blame = d->comm->device >= 0 ? d->comm : s->comm;
    if (n) rc = gc_memcpy(blame->comm, lgc_ptr(d), lgc_ptr(s), n * gc_dtype_size(d->dtype));
  } else if (rc == GC_SUCCESS) {
    rc = host_combine(d, s, n, NULL, &blame);
  }
  if (rc == GC_SUCCESS) {
    blame = d->comm;
    rc = lgc_quiesce(d->comm);
  }
  return lgc_self(L, blame, rc);
}

/* dst:accumulate(src [, op]) — dst[i] = op(dst[i], src[i]) on the host in float64, op one of
 * sum, prod, min, max. Builds references for the checks: a float64 buffer accumulating every
 * rank's input is the reduction that the collective's output is compared with. Returns dst. */
static int b_accumulate(lua_State *L) {
  lgc_buffer_t *d = lgc_checkbuffer(L, 1), *s = lgc_checkbuffer(L, 2);
  gc_op_t op = lua_isnoneornil(L, 3) ? GC_SUM : lgc_checkop(L, 3);
  luaL_argcheck(L, op != GC_AVG, 3, "accumulate takes sum, prod, min or max");
  size_t n = d->count;
  luaL_argcheck(L, s->count >= n, 2, "source holds fewer elements than the destination");
  lgc_comm_t *blame = d->comm;
  gc_result_t rc = lgc_quiesce(d->comm);
  if (rc == GC_SUCCESS && s->comm != d->comm) {
    blame = s->comm;
    rc = lgc_quiesce(s->comm);
  }
  if (rc == GC_SUCCESS) rc = host_combine(d, s, n, &op, &blame);
  if (rc == GC_SUCCESS) rc = lgc_quiesce(d->comm);
  return lgc_self(L, blame, rc);
}

/* Default tolerances: about one rounding of the output dtype (the library reduces half types in
 * float32 and rounds once), exact for integers. */
static void default_tol(gc_dtype_t d, double *rtol, double *atol) {
  switch (d) {
  case GC_FLOAT32: *rtol = 1e-5; *atol = 1e-5; break;
  case GC_FLOAT64: *rtol = 1e-12; *atol = 1e-12; break;
  case GC_FLOAT16: *rtol = 2e-3; *atol = 2e-3; break;
  case GC_BFLOAT16: *rtol = 1e-2; *atol = 1e-2; break;
  case GC_FP8_E4M3: *rtol = 0.07; *atol = 0.02; break;
  case GC_FP8_E5M2: *rtol = 0.13; *atol = 0.04; break;
  default: *rtol = 0; *atol = 0; break;
  }
}

/* buf:compare(ref, {rtol=, atol=}) -> wrong, first_bad (1-based, nil if none), max_abs_err.
 * ref is a buffer (any dtype and place, at least #buf elements) or a function i -> value.
 * An element passes when |x - ref| <= atol + rtol * |ref|, or both are NaN. */
static int b_compare(lua_State *L) {
  lgc_buffer_t *b = lgc_checkbuffer(L, 1);
  lgc_buffer_t *r = lgc_testbuffer(L, 2);
  if (r)
    lgc_checkbuffer(L, 2);
  else
    luaL_argexpected(L, lua_type(L, 2) == LUA_TFUNCTION, 2, "gpucoll.buffer or function");
  double rtol, atol;
  default_tol(b->dtype, &rtol, &atol);
  if (!lua_isnoneornil(L, 3)) {
    /* Checked like every options table: a misspelt tolerance would pass with the default one. */
    static const char *const keys[] = {"rtol", "atol", NULL};
    double *const at[] = {&rtol, &atol};
    luaL_checktype(L, 3, LUA_TTABLE);
    lgc_check_keys(L, 3, keys);
    for (int k = 0; k < 2; k++) {
      if (lgc_optfield(L, 3, keys[k]) != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TNUMBER)
          luaL_argerror(L, 3, lua_pushfstring(L, "option '%s' must be a number", keys[k]));
        *at[k] = lua_tonumber(L, -1);
      }
      lua_pop(L, 1);
    }
  }
  size_t n = b->count;
  if (r) luaL_argcheck(L, r->count >= n, 2, "the reference holds fewer elements than the buffer");
  gc_result_t rc = lgc_quiesce(b->comm);
  if (rc == GC_SUCCESS && r && r->comm != b->comm) rc = lgc_quiesce(r->comm);
  hostview_t hb, hr = {NULL, 0};
  if (rc == GC_SUCCESS) rc = host_open(b, n, 1, &hb);
  if (rc != GC_SUCCESS) return lgc_fail(L, b->comm, rc);
  if (r && (rc = host_open(r, n, 1, &hr)) != GC_SUCCESS) {
    host_close(b, n, 0, &hb);
    return lgc_fail(L, r->comm, rc);
  }
  size_t wrong = 0, first = 0, i;
  double maxerr = 0;
  int raised = 0;
  /* hb.p may be b's own memory: the reference function must not free b or close its comm. */
  b->root->busy++;
  b->comm->busy++;
  for (i = 0; i < n; i++) {
    double x = gc_element_get(hb.p, i, b->dtype), e;
    if (r) {
      e = gc_element_get(hr.p, i, r->dtype);
    } else {
      lua_pushvalue(L, 2);
      lua_pushinteger(L, (lua_Integer)i + 1);
      /* A raising reference function must not leak the host copies (nor leave b busy). */
      if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        raised = 1;
        break;
      }
      int isnum = 0;
      e = lua_tonumberx(L, -1, &isnum);
      lua_pop(L, 1);
      if (!isnum) break;
    }
    int ok = (isnan(x) && isnan(e)) || x == e || fabs(x - e) <= atol + rtol * fabs(e);
    if (!ok) {
      if (wrong++ == 0) first = i + 1;
      double err = fabs(x - e);
      if (!(err <= maxerr)) maxerr = isnan(err) ? INFINITY : err;
    } else if (fabs(x - e) > maxerr && !isinf(x)) {
      maxerr = fabs(x - e);
    }
  }
  b->root->busy--;
  b->comm->busy--;
  host_close(b, n, 0, &hb);
  if (r) host_close(r, n, 0, &hr);
  if (raised) return lua_error(L);
  if (i < n)
    return luaL_error(L, "compare: the reference function returned a non-number for index %I",
                      (lua_Integer)i + 1);
  lua_pushinteger(L, (lua_Integer)wrong);
  if (wrong)
    lua_pushinteger(L, (lua_Integer)first);
  else
    lua_pushnil(L);
  lua_pushnumber(L, maxerr);
  return 3;
}

static const luaL_Reg buffer_methods[] = {
    {"fill", b_fill},     {"poison", b_poison},         {"get", b_get},
    {"set", b_set},       {"copy_from", b_copy_from},   {"accumulate", b_accumulate},
    {"compare", b_compare}, {"offset", b_offset},       {"ptr", b_ptr},
    {"free", b_free},     {NULL, NULL}};

/* Methods first, then the fields count, dtype, kind, bytes, itemsize, freed. */
static int b_index(lua_State *L) {
  lgc_buffer_t *b = luaL_checkudata(L, 1, LGC_BUFFER);
  const char *key = luaL_checkstring(L, 2);
  lua_getmetatable(L, 1);
  if (lua_getfield(L, -1, "__methods") == LUA_TTABLE && lua_getfield(L, -1, key) != LUA_TNIL)
    return 1;
  size_t es = gc_dtype_size(b->dtype);
  if (strcmp(key, "count") == 0)
    lua_pushinteger(L, (lua_Integer)b->count);
  else if (strcmp(key, "dtype") == 0)
    lua_pushstring(L, gc_dtype_name(b->dtype));
  else if (strcmp(key, "kind") == 0)
    lua_pushstring(L, kind_names[b->kind]);
  else if (strcmp(key, "bytes") == 0)
    lua_pushinteger(L, (lua_Integer)(b->count * es));
  else if (strcmp(key, "itemsize") == 0)
    lua_pushinteger(L, (lua_Integer)es);
  else if (strcmp(key, "freed") == 0)
    lua_pushboolean(L, lgc_ptr(b) == NULL);
  else
    lua_pushnil(L);
  return 1;
}

void lgc_buffer_register(lua_State *L) {
  luaL_newmetatable(L, LGC_BUFFER);
  luaL_newlib(L, buffer_methods);
  lua_setfield(L, -2, "__methods");
  static const luaL_Reg meta[] = {{"__index", b_index}, {"__gc", b_gc},   {"__close", b_gc},
                                  {"__tostring", b_tostring}, {"__len", b_len}, {"__eq", b_eq},
                                  {NULL, NULL}};
  luaL_setfuncs(L, meta, 0);
  lua_pop(L, 1);
}
