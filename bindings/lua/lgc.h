/* lgc.h — what the files of the gpucoll Lua module share (internal to bindings/lua). */
#ifndef LGC_H
#define LGC_H

#include <stddef.h>

#include <lauxlib.h>
#include <lua.h>

#include "gpucoll.h"

/* The module's entry point is the one symbol gpucoll.so must export (the build hides the rest). */
#define LGC_EXPORT __attribute__((visibility("default")))
LGC_EXPORT int luaopen_gpucoll(lua_State *L);

#define LGC_COMM "gpucoll.comm"
#define LGC_BUFFER "gpucoll.buffer"
#define LGC_NCCL "gpucoll.nccl"

/* LGC_NCCL_MEM: memory an NCCL communicator made for one of its buffer modes (nc:buffer), freed and
 * deregistered through it. */
typedef enum { LGC_HOST, LGC_DEVICE, LGC_SYMMETRIC, LGC_NCCL_MEM } lgc_kind_t;

typedef struct lgc_buffer lgc_buffer_t;
typedef struct lgc_nccl lgc_nccl_t;

typedef struct lgc_comm {
  gc_comm_t comm;          /* NULL once closed */
  MPI_Comm mpi;            /* the communicator it was made from (for NCCL's bootstrap) */
  void *stream;            /* the communicator's stream; NULL on host-only ranks */
  int rank, size, device;
  lgc_buffer_t *buffers;   /* owning buffers still allocated; close() frees them */
  lgc_nccl_t *nccls;       /* NCCL communicators opened from it; close() closes them */
  int busy;                /* time() or compare() is calling back into Lua: close() refuses */
} lgc_comm_t;

struct lgc_buffer {
  lgc_comm_t *comm;
  lgc_buffer_t *root;         /* the owning buffer: itself, or the one a view looks into */
  void *base;                 /* the allocation (owning buffers); NULL once freed */
  size_t offset;              /* bytes from root->base */
  size_t count;               /* elements */
  gc_dtype_t dtype;
  lgc_kind_t kind;
  int busy;                   /* owning buffers: compare() is calling back into Lua; free() refuses */
  int anchored;               /* freed collectively, never by the collector (lgc_anchor) */
  lgc_buffer_t *prev, *next;  /* in comm->buffers, owning buffers only */
  lgc_nccl_t *nccl;           /* LGC_NCCL_MEM: the NCCL communicator that made it, its mode and */
  int nccl_mode;              /* registration handle (gcb_nccl_mode_t; NULL handle: none) */
  void *nccl_reg;
};

/* lgpucoll.c */
lgc_comm_t *lgc_checkcomm(lua_State *L, int idx); /* raises if not a comm or closed */
int lgc_fail(lua_State *L, lgc_comm_t *c, gc_result_t rc); /* pushes nil, message, code */
int lgc_failmsg(lua_State *L, const char *code, const char *fmt, ...);
/* A method's end: lgc_fail when rc failed, else true (lgc_ok) or argument 1 (lgc_self). */
int lgc_ok(lua_State *L, lgc_comm_t *c, gc_result_t rc);
int lgc_self(lua_State *L, lgc_comm_t *c, gc_result_t rc);
void lgc_anchor(lua_State *L, int idx); /* keeps the userdata alive until lgc_unanchor */
void lgc_unanchor(lua_State *L, const void *key);
int lgc_mpi_live(void); /* MPI is initialized and not yet finalized */
int lgc_world_rank(void);
gc_dtype_t lgc_checkdtype(lua_State *L, int idx);
gc_op_t lgc_checkop(lua_State *L, int idx);
/* Pushes field `key` of the options table at `t` and returns its type. A raw read, like the check
 * of the table's keys: its own fields only, and no metamethod runs while a call parses its
 * arguments (one could free a buffer the call already holds). */
int lgc_optfield(lua_State *L, int t, const char *key);
/* Raises for a key of the options table at idx that is not in `known` (NULL-terminated), so that a
 * typo is an error, not an option silently left at its default. */
void lgc_check_keys(lua_State *L, int idx, const char *const known[]);

/* lgc_buffer.c */
lgc_buffer_t *lgc_checkbuffer(lua_State *L, int idx); /* raises if not a buffer or freed */
lgc_buffer_t *lgc_testbuffer(lua_State *L, int idx);  /* NULL when not a buffer */
void *lgc_ptr(const lgc_buffer_t *b);
int lgc_comm_buffer(lua_State *L);    /* comm:buffer(count, dtype [, where]) */
int lgc_comm_symmetric(lua_State *L); /* comm:symmetric(count, dtype) */
/* Makes the userdata at the top of the stack (lua_newuserdatauv with one user value, already set
 * to what it keeps alive) an owning buffer of c over p; anchored when `anchored`. */
void lgc_buffer_init(lua_State *L, lgc_buffer_t *b, lgc_comm_t *c, void *p, size_t count, gc_dtype_t dtype,
                     lgc_kind_t kind, int anchored);
/* Frees an owning buffer now (collective for anchored ones); its memory is forgotten whatever the
 * outcome. */
gc_result_t lgc_buffer_release(lua_State *L, lgc_buffer_t *b);
/* Frees every buffer the communicator still owns (close); collective for symmetric ones. */
void lgc_buffers_detach(lua_State *L, lgc_comm_t *c);
/* Waits for the communicator's stream and the legacy stream, so host-side access sees the
 * results of collectives and collectives see host-side writes. */
gc_result_t lgc_quiesce(lgc_comm_t *c);

/* lgpucoll.c: after a wait for `stream` returned rc. GC_ERR_STREAM_TIMEOUT there means work that
 * is not gpucoll's never ended; in gpucoll-lua that is a call of an NCCL communicator made from
 * c whose peers never came. Every such communicator that ran calls is aborted (its kernels end),
 * the stream is waited for again, and the next lgc_fail of GC_ERR_STREAM_TIMEOUT (whichever comm
 * it blames) tells what happened. rc is returned. */
gc_result_t lgc_unstick(lgc_comm_t *c, gc_result_t rc, void *stream);
/* lgpucoll.c: deregisters and frees an LGC_NCCL_MEM buffer's memory through its NCCL communicator
 * (collective for symmetric windows); GC_ERR_REMOTE with the reason kept for lgc_fail. */
gc_result_t lgc_nccl_free(lgc_buffer_t *b);
void lgc_buffer_register(lua_State *L);

/* lgc_output.c: gpucoll.table, csv, json, progress (added to the module table on the stack). */
void lgc_output_register(lua_State *L);

#endif /* LGC_H */
