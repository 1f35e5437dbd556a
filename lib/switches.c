/* switches.c — the dispatch table's experiment switches (piece sizes, schedules, the copy-engine
 * all-reduce's form and stages, the LL kernels' relay size and block size, the hierarchical
 * collectives across nodes). Each is declared once
 * below; the declaration parses GC_SWITCHES and a tune file's 'set' lines, checks the range and
 * writes the lines gc_tune_save keeps. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gc_internal.h"
#include "gc_plan.h"

typedef struct {
  const char *key;           /* the field's name in gc__switches_t, GC_SWITCHES and tune files */
  size_t offset;             /* of the field */
  int is_size;               /* size_t field (else int) */
  int64_t lo, hi;            /* integer fields: the range */
  int64_t step;              /* integer fields: a value is rounded down to a multiple of it */
  const char *const *words;  /* word fields: the words, NULL-ended; the value is the index + base */
  int base;                  /* the value of words[0] */
  int64_t fallback;          /* the built-in value */
  const char *doc;
} switch_decl_t;

static const char *const auto_owners_ring[] = {"auto", "owners", "ring", NULL};
static const char *const auto_off_on[] = {"auto", "0", "1", NULL};
static const char *const ce_forms[] = {"auto", "copies", "reads", "writes", NULL}; /* GC_CE_AR_* order */

#define INT_FIELD(f, lo, hi, step, def, doc) {#f, offsetof(gc__switches_t, f), 0, lo, hi, step, NULL, 0, def, doc}
#define SIZE_FIELD(f, lo, hi, def, doc) {#f, offsetof(gc__switches_t, f), 1, lo, hi, 1, NULL, 0, def, doc}
#define WORD_FIELD(f, words, base, def, doc) {#f, offsetof(gc__switches_t, f), 0, 0, 0, 1, words, base, def, doc}

static const switch_decl_t decls[] = {
    SIZE_FIELD(push_piece, 0, INT32_MAX, 0, "bytes per piece of the kernels by writes (0: by size)"),
    WORD_FIELD(push_schedule, auto_owners_ring, -1, -1, "broadcast by writes: owners, ring or auto (by size)"),
    WORD_FIELD(push_control, auto_off_on, -1, -1,
               "kernels by writes: a control warp signals (1), the block (0), auto (reduce-scatter on 3-4 GPUs, "
               "all-gather through staging)"),
    WORD_FIELD(ce_allreduce, ce_forms, 0, GC_CE_AR_AUTO, "copy-engine all-reduce's reduce half: copies, reads, writes or auto"),
    INT_FIELD(ce_chunks, 1, GC_CE_MAX_CHUNKS, 1, 2, "copy-engine all-reduce by copies: pipeline stages"),
    INT_FIELD(staged_blocks, 1, 128, 1, 128, "staged copy-engine path: blocks of its copies out of staging"),
    SIZE_FIELD(ll_relay_bytes, 0, INT32_MAX, 524288, "LL broadcast on 3+ GPUs: through owners from this size"),
    INT_FIELD(ll_threads, 32, 512, 32, 128, "threads per block of the LL kernels (rounded down to a multiple of 32)"),
    WORD_FIELD(hierarchical, auto_off_on, -1, -1,
               "across nodes: the node's GPUs and MPI between nodes (1), flat MPI (0), auto (device buffers)"),
};
enum { N_SWITCHES = sizeof decls / sizeof decls[0] };

static int64_t get(const gc__switches_t *sw, const switch_decl_t *d) {
  const char *at = (const char *)sw + d->offset;
  return d->is_size ? (int64_t) * (const size_t *)at : *(const int *)at;
}

static void put(gc__switches_t *sw, const switch_decl_t *d, int64_t v) {
  char *at = (char *)sw + d->offset;
  if (d->is_size) *(size_t *)at = (size_t)v;
  else *(int *)at = (int)v;
}

void gc__switches_default(gc__switches_t *sw) {
  memset(sw, 0, sizeof *sw);
  for (int i = 0; i < N_SWITCHES; i++) put(sw, &decls[i], decls[i].fallback);
}

/* The words a word field takes, or the range of an integer one, for a message. */
static void takes(const switch_decl_t *d, char *buf, size_t cap) {
  if (!d->words) {
    snprintf(buf, cap, "%lld to %lld", (long long)d->lo, (long long)d->hi);
    return;
  }
  size_t n = 0;
  buf[0] = '\0';
  for (int k = 0; d->words[k] && n < cap; k++) n += (size_t)snprintf(buf + n, cap - n, "%s%s", k ? ", " : "", d->words[k]);
}

static const char *key_list(char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  for (int i = 0; i < N_SWITCHES && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", decls[i].key);
  return buf;
}

static gc_result_t set_one(gc__switches_t *sw, const switch_decl_t *d, const char *value, const char *where) {
  char range[96];
  int64_t v = 0;
  int ok = 0;
  for (int k = 0; d->words && d->words[k]; k++)
    if (strcmp(value, d->words[k]) == 0) ok = 1, v = k + d->base;
  if (!d->words) ok = gc__parse_int(value, &v) && v >= d->lo && v <= d->hi;
  if (!ok) {
    takes(d, range, sizeof range);
    return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s %s=%s: use %s", where, d->key, value, range);
  }
  put(sw, d, v / d->step * d->step);
  return GC_SUCCESS;
}

gc_result_t gc__switches_set(gc__switches_t *sw, const char *key, const char *value, const char *where) {
  for (int i = 0; i < N_SWITCHES; i++)
    if (strcmp(key, decls[i].key) == 0) return set_one(sw, &decls[i], value, where);
  char keys[256];
  return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s no switch '%s' (%s)", where, key, key_list(keys, sizeof keys));
}

gc_result_t gc__switches_parse(gc__switches_t *sw, const char *list, const char *where) {
  char item[128];
  for (const char *s = list; s && *s;) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if (len >= sizeof item) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s '%.*s' is too long", where, (int)len, s);
    memcpy(item, s, len);
    item[len] = '\0';
    char *eq = strchr(item, '=');
    if (!eq) return GC_FAIL(NULL, GC_ERR_INVALID_ARGUMENT, "%s '%s' is not key=value", where, item);
    *eq = '\0';
    GC_CHECK(gc__switches_set(sw, item, eq + 1, where));
    s = end ? end + 1 : NULL;
  }
  return GC_SUCCESS;
}

int gc__switches_count(void) { return N_SWITCHES; }

const char *gc__switch_key(int i) { return decls[i].key; }

int64_t gc__switch_value(const gc__switches_t *sw, int i) { return get(sw, &decls[i]); }

/* The value of switch i as GC_SWITCHES and tune files spell it. */
static void spell(const gc__switches_t *sw, int i, char *buf, size_t cap) {
  const int64_t v = get(sw, &decls[i]);
  if (decls[i].words) snprintf(buf, cap, "%s", decls[i].words[v - decls[i].base]);
  else snprintf(buf, cap, "%lld", (long long)v);
}

void gc__switches_write(const gc__switches_t *sw, FILE *f) {
  for (int i = 0; i < N_SWITCHES; i++) {
    if (get(sw, &decls[i]) == decls[i].fallback) continue;
    char v[32];
    spell(sw, i, v, sizeof v);
    fprintf(f, "set %s %s\n", decls[i].key, v);
  }
}

size_t gc__switches_describe(const gc__switches_t *sw, char *buf, size_t cap) {
  size_t n = 0;
  for (int i = 0; i < N_SWITCHES && n < cap; i++) {
    char v[32];
    spell(sw, i, v, sizeof v);
    n += (size_t)snprintf(buf + n, cap - n, "switch %-14s %-8s %s\n", decls[i].key, v, decls[i].doc);
  }
  return n < cap ? n : cap;
}
