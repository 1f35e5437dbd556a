/* lgc_output.c — results out of Lua: aligned table (rank 0), CSV, JSON, progress, the output
 * directory and the plot command (no shell between), and the MPI library's own collectives, the
 * baseline a host-buffer sweep prints beside gpucoll. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <mpi.h>

#include "lgc.h"

/* Text is assembled as a list of pieces in a Lua table, then concatenated: the encoders push
 * values of their own, which a luaL_Buffer (it owns the top of the stack) does not allow. */
typedef struct {
  lua_State *L;
  int t;
  lua_Integer n;
} sink_t;

static void sink_init(sink_t *s, lua_State *L) {
  s->L = L;
  lua_newtable(L);
  s->t = lua_gettop(L);
  s->n = 0;
}
static void sink_lstr(sink_t *s, const char *p, size_t len) {
  if (len == 0) return;
  lua_pushlstring(s->L, p, len);
  lua_rawseti(s->L, s->t, ++s->n);
}
static void sink_str(sink_t *s, const char *p) { sink_lstr(s, p, strlen(p)); }
static void sink_pad(sink_t *s, char c, size_t n) {
  char buf[64];
  memset(buf, c, sizeof buf);
  for (; n > sizeof buf; n -= sizeof buf) sink_lstr(s, buf, sizeof buf);
  sink_lstr(s, buf, n);
}
/* Replaces the piece table with the concatenated string. */
static void sink_result(sink_t *s) {
  lua_State *L = s->L;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (lua_Integer i = 1; i <= s->n; i++) {
    lua_rawgeti(L, s->t, i);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  lua_replace(L, s->t);
  lua_settop(L, s->t);
}

/* A column format goes to snprintf, so it must be text around exactly one conversion for a
 * number (no %s or %n, no '*', no length modifier): flags, width and precision of at most 2
 * digits each (as string.format), then d i o u x X c (given an integer) or f F e E g G a A (a
 * float); "%%" is a literal %. Returns 'i' or 'f' and the conversion character's offset in *conv,
 * or 0 when fmt is not such a format. */
static int format_kind(const char *fmt, size_t *conv) {
  int kind = 0;
  for (const char *p = fmt; *p; p++) {
    if (*p != '%') continue;
    if (p[1] == '%') {
      p++;
      continue;
    }
    if (kind) return 0; /* a second conversion */
    p += 1 + strspn(p + 1, "-+ #0");
    for (int i = 0; i < 2 && isdigit((unsigned char)*p); i++) p++;
    if (*p == '.') {
      p++;
      for (int i = 0; i < 2 && isdigit((unsigned char)*p); i++) p++;
    }
    if (*p != '\0' && strchr("diouxXc", *p))
      kind = 'i';
    else if (*p != '\0' && strchr("fFeEgGaA", *p))
      kind = 'f';
    else
      return 0;
    *conv = (size_t)(p - fmt);
  }
  return kind;
}

/* Pushes the number at idx formatted with a format that format_kind accepted. Integer
 * conversions take it as a long long (byte counts pass 2^31), %c as an int. */
static void push_formatted(lua_State *L, int idx, const char *fmt, const char *name) {
  size_t conv = 0;
  char buf[64];
  if (format_kind(fmt, &conv) == 'f') {
    snprintf(buf, sizeof buf, fmt, (double)lua_tonumber(L, idx));
  } else {
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isint);
    if (!isint)
      luaL_error(L, "column '%s': format '%s' needs an integer, got %f", name, fmt,
                 lua_tonumber(L, idx));
    if (fmt[conv] == 'c') {
      snprintf(buf, sizeof buf, fmt, (int)v);
    } else {
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      luaL_addlstring(&b, fmt, conv);
      luaL_addstring(&b, "ll");
      luaL_addstring(&b, fmt + conv);
      luaL_pushresult(&b);
      snprintf(buf, sizeof buf, lua_tostring(L, -1), (long long)v);
      lua_pop(L, 1);
    }
  }
  lua_pushstring(L, buf);
}

/* Numbers print the way a results table wants them: integers whole, floats with 2 decimals
 * from 1 up (times in us, GB/s), 3 significant digits below; or with the column's format. */
static void push_cell(lua_State *L, int idx, const char *fmt, const char *name) {
  idx = lua_absindex(L, idx);
  switch (lua_type(L, idx)) {
  case LUA_TNIL: lua_pushliteral(L, "-"); break;
  case LUA_TNUMBER:
    if (fmt) {
      push_formatted(L, idx, fmt, name);
    } else if (lua_isinteger(L, idx)) {
      lua_pushfstring(L, "%I", lua_tointeger(L, idx));
    } else {
      double v = lua_tonumber(L, idx);
      char buf[64];
      snprintf(buf, sizeof buf, (v == 0 || fabs(v) >= 1 || !isfinite(v)) ? "%.2f" : "%.3g", v);
      lua_pushstring(L, buf);
    }
    break;
  default: luaL_tolstring(L, idx, NULL); break;
  }
}

/* Columns: a list of names, or of {name, format} pairs (format as for string.format, for the
 * table only). Pushes the name; returns the format or NULL. */
static const char *column(lua_State *L, int cols, int j) {
  const char *fmt = NULL;
  if (lua_rawgeti(L, cols, j) == LUA_TTABLE) {
    lua_rawgeti(L, -1, 2);
    fmt = lua_tostring(L, -1); /* stays valid: the columns table holds the string */
    lua_pop(L, 1);
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
  }
  if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "column %d must be a name or {name, format}", j);
  size_t conv;
  if (fmt && !format_kind(fmt, &conv))
    luaL_error(L, "column '%s': bad format '%s' (it needs one conversion of d i o u x X c or f F e E "
               "g G a A, with flags, width and precision of up to 2 digits; %%%% for a literal %%)",
               lua_tostring(L, -1), fmt);
  return fmt;
}

/* Pushes a columns table: the given one, or the sorted keys of the first row. */
static int columns_arg(lua_State *L, int rows, int idx) {
  if (!lua_isnoneornil(L, idx)) {
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushvalue(L, idx);
    return lua_gettop(L);
  }
  lua_newtable(L);
  int cols = lua_gettop(L), n = 0;
  if (lua_rawgeti(L, rows, 1) == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) == LUA_TSTRING) {
        lua_pushvalue(L, -1);
        lua_rawseti(L, cols, ++n);
      }
    }
  }
  lua_pop(L, 1);
  lua_getglobal(L, "table");
  lua_getfield(L, -1, "sort");
  lua_pushvalue(L, cols);
  lua_call(L, 1, 0);
  lua_pop(L, 1);
  return cols;
}

/* gpucoll.table(rows, [columns]) -> the text; printed to stdout on rank 0. Rows are tables
 * keyed by column name; numbers are right-aligned, text left-aligned, nil shows as "-". */
static int l_table(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int cols = columns_arg(L, 1, 2);
  int nc = (int)luaL_len(L, cols), nr = (int)luaL_len(L, 1);
  size_t *width = lua_newuserdatauv(L, sizeof(size_t) * 2 * (size_t)(nc + 1), 0);
  size_t *right = width + nc + 1;
  /* Cells as strings in a grid (row 1 = header), widths from the longest cell of each column. */
  lua_createtable(L, nr + 1, 0);
  int grid = lua_gettop(L);
  lua_createtable(L, nc, 0);
  for (int j = 1; j <= nc; j++) {
    column(L, cols, j);
    width[j] = lua_rawlen(L, -1);
    right[j] = 0;
    lua_rawseti(L, -2, j);
  }
  lua_rawseti(L, grid, 1);
  for (int i = 1; i <= nr; i++) {
    if (lua_rawgeti(L, 1, i) != LUA_TTABLE) return luaL_error(L, "table: row %d is not a table", i);
    lua_createtable(L, nc, 0);
    for (int j = 1; j <= nc; j++) {
      const char *fmt = column(L, cols, j);
      const char *name = lua_tostring(L, -1); /* stays valid: the columns table holds it */
      lua_gettable(L, -3);
      if (lua_type(L, -1) == LUA_TNUMBER) right[j] = 1;
      push_cell(L, -1, fmt, name);
      lua_remove(L, -2);
      size_t w = lua_rawlen(L, -1);
      if (w > width[j]) width[j] = w;
      lua_rawseti(L, -2, j);
    }
    lua_rawseti(L, grid, i + 1);
    lua_pop(L, 1);
  }
  sink_t s;
  sink_init(&s, L);
  for (int i = 1; i <= nr + 1; i++) {
    for (int j = 1; j <= nc; j++) {
      lua_rawgeti(L, grid, i);
      lua_rawgeti(L, -1, j);
      size_t len;
      const char *cell = lua_tolstring(L, -1, &len);
      size_t pad = width[j] - len;
      if (j > 1) sink_str(&s, "  ");
      if (right[j]) sink_pad(&s, ' ', pad);
      sink_lstr(&s, cell, len);
      if (!right[j] && j < nc) sink_pad(&s, ' ', pad);
      lua_pop(L, 2);
    }
    sink_str(&s, "\n");
    if (i == 1) { /* a rule under the header */
      for (int j = 1; j <= nc; j++) {
        if (j > 1) sink_str(&s, "  ");
        sink_pad(&s, '-', width[j]);
      }
      sink_str(&s, "\n");
    }
  }
  sink_result(&s);
  if (lgc_world_rank() == 0) {
    fputs(lua_tostring(L, -1), stdout);
    fflush(stdout);
  }
  return 1;
}

static void csv_field(sink_t *s, const char *p, size_t len) {
  if (strpbrk(p, ",\"\n\r") == NULL) {
    sink_lstr(s, p, len);
    return;
  }
  sink_str(s, "\"");
  for (const char *q; (q = memchr(p, '"', len)) != NULL; len -= (size_t)(q + 1 - p), p = q + 1) {
    sink_lstr(s, p, (size_t)(q + 1 - p));
    sink_str(s, "\""); /* a quote doubles */
  }
  sink_lstr(s, p, len);
  sink_str(s, "\"");
}

/* Writes text to path on rank 0 (other ranks write nothing and return true). Not collective, so
 * that a script may call it under `if comm.rank == 0`. Returns true or nil, msg, code. */
static int write_rank0(lua_State *L, const char *path, const char *text, size_t len) {
  int err = 0;
  if (lgc_world_rank() == 0) {
    FILE *f = fopen(path, "w");
    if (f == NULL) {
      err = errno;
    } else {
      if (fwrite(text, 1, len, f) != len) err = errno ? errno : EIO;
      if (fclose(f) != 0 && !err) err = errno;
    }
  }
  if (err) return lgc_failmsg(L, gc_result_name(GC_ERR_SYSTEM), "%s: %s", path, strerror(err));
  lua_pushboolean(L, 1);
  return 1;
}

/* Ends an output: with no path the text is the result (every rank), else rank 0 writes it. */
static int sink_to(lua_State *L, sink_t *s, const char *path) {
  sink_result(s);
  if (path == NULL) return 1;
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  return write_rank0(L, path, text, len);
}

/* gpucoll.csv(path, rows, [columns]) — rank 0 writes the file (world rank).
 * path nil: no file; the text is returned on every rank instead of true. */
static int l_csv(lua_State *L) {
  const char *path = luaL_optstring(L, 1, NULL);
  luaL_checktype(L, 2, LUA_TTABLE);
  int cols = columns_arg(L, 2, 3);
  int nc = (int)luaL_len(L, cols), nr = (int)luaL_len(L, 2);
  sink_t s;
  sink_init(&s, L);
  for (int j = 1; j <= nc; j++) {
    column(L, cols, j);
    size_t len;
    const char *name = lua_tolstring(L, -1, &len);
    if (j > 1) sink_str(&s, ",");
    csv_field(&s, name, len);
    lua_pop(L, 1);
  }
  sink_str(&s, "\n");
  for (int i = 1; i <= nr; i++) {
    if (lua_rawgeti(L, 2, i) != LUA_TTABLE) return luaL_error(L, "csv: row %d is not a table", i);
    for (int j = 1; j <= nc; j++) {
      column(L, cols, j);
      lua_gettable(L, -2);
      if (j > 1) sink_str(&s, ",");
      if (lua_type(L, -1) == LUA_TNUMBER && !lua_isinteger(L, -1)) {
        char num[64];
        snprintf(num, sizeof num, "%.9g", lua_tonumber(L, -1));
        sink_str(&s, num);
      } else if (!lua_isnil(L, -1)) {
        size_t len;
        const char *p = luaL_tolstring(L, -1, &len);
        csv_field(&s, p, len);
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    sink_str(&s, "\n");
  }
  return sink_to(L, &s, path);
}

/* ---------------------------------------------------------------------------------------------
 * JSON: tables that are sequences 1..n (n > 0) become arrays, others objects with sorted keys
 * (so files diff well); an empty table is {}. NaN and infinities become null.
 * ------------------------------------------------------------------------------------------- */
static void json_string(sink_t *s, const char *p, size_t len) {
  sink_str(s, "\"");
  size_t run = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)p[i];
    if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
    sink_lstr(s, p + run, i - run);
    run = i + 1;
    char esc[8];
    if (ch == '"' || ch == '\\')
      snprintf(esc, sizeof esc, "\\%c", ch);
    else if (ch == '\n')
      snprintf(esc, sizeof esc, "\\n");
    else if (ch == '\t')
      snprintf(esc, sizeof esc, "\\t");
    else
      snprintf(esc, sizeof esc, "\\u%04x", ch);
    sink_str(s, esc);
  }
  sink_lstr(s, p + run, len - run);
  sink_str(s, "\"");
}

static int sort_keys_cmp(lua_State *L) { /* numbers before strings, each in order */
  int ta = lua_type(L, 1), tb = lua_type(L, 2);
  if (ta != tb)
    lua_pushboolean(L, ta == LUA_TNUMBER);
  else
    lua_pushboolean(L, lua_compare(L, 1, 2, LUA_OPLT));
  return 1;
}

/* Encodes the value at the top of the stack (left there). Each level of nesting holds a few
 * stack slots (the value, an object's sorted keys and key), beyond the LUA_MINSTACK a C
 * function is given: every level makes room for itself. */
static void json_value(sink_t *s, int depth) {
  lua_State *L = s->L;
  int v = lua_gettop(L);
  if (depth > 64) luaL_error(L, "json: nesting deeper than 64 (a cycle?)");
  luaL_checkstack(L, 8, "json: nesting too deep");
  switch (lua_type(L, v)) {
  case LUA_TNIL: sink_str(s, "null"); break;
  case LUA_TBOOLEAN: sink_str(s, lua_toboolean(L, v) ? "true" : "false"); break;
  case LUA_TNUMBER: {
    char num[64];
    if (lua_isinteger(L, v))
      snprintf(num, sizeof num, "%lld", (long long)lua_tointeger(L, v));
    else if (isfinite(lua_tonumber(L, v)))
      snprintf(num, sizeof num, "%.17g", lua_tonumber(L, v));
    else
      snprintf(num, sizeof num, "null");
    sink_str(s, num);
    break;
  }
  case LUA_TSTRING: {
    size_t len;
    const char *p = lua_tolstring(L, v, &len);
    json_string(s, p, len);
    break;
  }
  case LUA_TTABLE: {
    lua_Integer n = (lua_Integer)lua_rawlen(L, v), count = 0;
    lua_pushnil(L);
    while (lua_next(L, v)) {
      count++;
      lua_pop(L, 1);
    }
    if (n > 0 && count == n) {
      sink_str(s, "[");
      for (lua_Integer i = 1; i <= n; i++) {
        if (i > 1) sink_str(s, ",");
        lua_rawgeti(L, v, i);
        json_value(s, depth + 1);
        lua_pop(L, 1);
      }
      sink_str(s, "]");
      break;
    }
    lua_createtable(L, (int)count, 0);
    int keys = lua_gettop(L), k = 0;
    lua_pushnil(L);
    while (lua_next(L, v)) {
      lua_pop(L, 1);
      int t = lua_type(L, -1);
      if (t != LUA_TSTRING && t != LUA_TNUMBER)
        luaL_error(L, "json: keys must be strings or numbers, not %s", luaL_typename(L, -1));
      lua_pushvalue(L, -1);
      lua_rawseti(L, keys, ++k);
    }
    lua_getglobal(L, "table");
    lua_getfield(L, -1, "sort");
    lua_pushvalue(L, keys);
    lua_pushcfunction(L, sort_keys_cmp);
    lua_call(L, 2, 0);
    lua_pop(L, 1);
    sink_str(s, "{");
    for (int i = 1; i <= k; i++) {
      if (i > 1) sink_str(s, ",");
      lua_rawgeti(L, keys, i);
      size_t len;
      lua_pushvalue(L, -1);
      const char *p = luaL_tolstring(L, -1, &len); /* numbers become string keys */
      json_string(s, p, len);
      lua_pop(L, 2);
      sink_str(s, ":");
      lua_gettable(L, v);
      json_value(s, depth + 1);
      lua_pop(L, 1);
    }
    sink_str(s, "}");
    lua_pop(L, 1); /* keys */
    break;
  }
  default: luaL_error(L, "json: cannot encode a %s value", luaL_typename(L, v));
  }
}

/* gpucoll.json(path, value) — rank 0 writes the file (world rank).
 * path nil: returns the text on every rank. */
static int l_json(lua_State *L) {
  const char *path = luaL_optstring(L, 1, NULL);
  luaL_checkany(L, 2);
  lua_settop(L, 2);
  sink_t s;
  sink_init(&s, L);
  lua_pushvalue(L, 2);
  json_value(&s, 0);
  lua_pop(L, 1);
  sink_str(&s, "\n");
  return sink_to(L, &s, path);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* gpucoll.progress(i, n, [label]) — step i of n on stderr, rank 0 only, with the time since
 * step 1 and an estimate of the time left: a bar redrawn in place on a terminal, else (under
 * mpirun, in logs) one plain line per step. Returns whether it printed. */
static int l_progress(lua_State *L) {
  static double started;
  lua_Integer i = luaL_checkinteger(L, 1), n = luaL_checkinteger(L, 2);
  const char *label = luaL_optstring(L, 3, "");
  luaL_argcheck(L, n > 0, 2, "n must be > 0");
  if (lgc_world_rank() != 0) {
    lua_pushboolean(L, 0);
    return 1;
  }
  if (i < 0) i = 0;
  if (i > n) i = n;
  if (i <= 1 || started == 0.0) started = now_s();
  const double el = now_s() - started;
  char left[48] = "";
  if (i > 1) snprintf(left, sizeof left, ", %.0f s, ~%.0f s left", el, el / (double)(i - 1) * (double)(n - i + 1));
  if (isatty(STDERR_FILENO)) {
    enum { W = 30 };
    char bar[W + 1];
    int fill = (int)(W * i / n);
    for (int k = 0; k < W; k++) bar[k] = k < fill ? '#' : '.';
    bar[W] = '\0';
    fprintf(stderr, "\r\033[K[%s] %3d%% %lld/%lld %s%s", bar, (int)(100 * i / n), (long long)i,
            (long long)n, label, left);
    if (i == n) fputc('\n', stderr);
  } else {
    fprintf(stderr, "gpucoll-lua: %lld/%lld %s%s\n", (long long)i, (long long)n, label, left);
  }
  fflush(stderr);
  lua_pushboolean(L, 1);
  return 1;
}

/* gpucoll.mkdir(path) — makes path and its missing parents (as mkdir -p; not collective).
 * Returns true, or nil, msg, code. */
static int l_mkdir(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  luaL_argcheck(L, len > 0 && strlen(path) == len, 1, "a non-empty path without NUL bytes");
  char *p = strdup(path);
  if (!p) return luaL_error(L, "out of memory");
  int err = 0;
  for (char *q = p + 1; !err; q++) {
    const int end = *q == '\0';
    if (*q != '/' && !end) continue;
    *q = '\0';
    if (mkdir(p, 0777) != 0 && errno != EEXIST) err = errno;
    if (end) break;
    *q = '/';
  }
  struct stat st;
  if (!err && (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))) err = ENOTDIR;
  free(p);
  if (err) return lgc_failmsg(L, gc_result_name(GC_ERR_SYSTEM), "mkdir %s: %s", path, strerror(err));
  lua_pushboolean(L, 1);
  return 1;
}

/* gpucoll.run(argv, [{quiet = bool}]) — runs argv[1] (looked up in PATH) with the arguments
 * argv[2..], no shell in between, and waits; quiet sends its output to /dev/null. Returns true on
 * exit status 0, else nil, msg, code. Not collective. */
static int l_run(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int quiet = 0;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    static const char *const keys[] = {"quiet", NULL};
    lgc_check_keys(L, 2, keys);
    lgc_optfield(L, 2, "quiet");
    quiet = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  const lua_Integer n = luaL_len(L, 1);
  luaL_argcheck(L, n >= 1 && n < 256, 1, "argv wants 1 to 255 strings");
  const char *argv[256];
  for (lua_Integer k = 1; k <= n; k++) {
    lua_rawgeti(L, 1, k);
    argv[k - 1] = lua_tostring(L, -1); /* the strings stay alive in argv's table */
    if (!argv[k - 1] || lua_type(L, -1) != LUA_TSTRING) return luaL_error(L, "run: argv[%d] is not a string", (int)k);
    lua_pop(L, 1);
  }
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (quiet) {
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  extern char **environ;
  pid_t pid;
  int err = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err) return lgc_failmsg(L, gc_result_name(GC_ERR_SYSTEM), "%s: %s", argv[0], strerror(err));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return lgc_failmsg(L, gc_result_name(GC_ERR_SYSTEM), "waitpid: %s", strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (WIFEXITED(status))
    return lgc_failmsg(L, gc_result_name(GC_ERR_SYSTEM), "%s: exit status %d", argv[0], WEXITSTATUS(status));
  return lgc_failmsg(L, gc_result_name(GC_ERR_SYSTEM), "%s: ended by signal %d", argv[0], WTERMSIG(status));
}

/* gpucoll.device_name(device) — the CUDA device's model ("NVIDIA H100 80GB HBM3"), for titles
 * and CSVs. Returns the name, or nil, msg, code. */
static int l_device_name(lua_State *L) {
  const int device = (int)luaL_checkinteger(L, 1);
  struct cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess)
    return lgc_failmsg(L, gc_result_name(GC_ERR_CUDA), "device %d: %s", device, cudaGetErrorString(e));
  lua_pushstring(L, prop.name);
  return 1;
}

/* MPI's datatype and op for a call, or a reason there is none. */
static const char *mpi_types(gc_dtype_t dt, gc_op_t op, MPI_Datatype *mdt, MPI_Op *mop) {
  switch (dt) {
    case GC_FLOAT32: *mdt = MPI_FLOAT; break;
    case GC_FLOAT64: *mdt = MPI_DOUBLE; break;
    case GC_INT32: *mdt = MPI_INT32_T; break;
    case GC_INT64: *mdt = MPI_INT64_T; break;
    case GC_UINT8: *mdt = MPI_UINT8_T; break;
    default: return "MPI has no datatype for it";
  }
  switch (op) {
    case GC_SUM: *mop = MPI_SUM; return NULL;
    case GC_PROD: *mop = MPI_PROD; return NULL;
    case GC_MIN: *mop = MPI_MIN; return NULL;
    case GC_MAX: *mop = MPI_MAX; return NULL;
    default: return "MPI has no such op";
  }
}

/* gpucoll.mpi(comm, coll, send, recv, [{op = "sum", root = 0}]) — the MPI library's own
 * collective (MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast) on host buffers
 * over the communicator's MPI communicator, counts as gpucoll's (recv's count for reduce-scatter,
 * send's for all-gather); send == recv is in place (all-gather: send is this rank's slice of
 * recv; reduce-scatter has no in-place form here). Collective.
 * Returns true, or nil, msg, code. */
static int l_mpi(lua_State *L) {
  static const char *const colls[] = {"allreduce", "reducescatter", "allgather", "broadcast", NULL};
  lgc_comm_t *c = lgc_checkcomm(L, 1);
  const int k = luaL_checkoption(L, 2, NULL, colls);
  lgc_buffer_t *sb = lgc_checkbuffer(L, 3), *rb = lgc_checkbuffer(L, 4);
  gc_op_t op = GC_SUM;
  int root = 0;
  if (!lua_isnoneornil(L, 5)) {
    luaL_checktype(L, 5, LUA_TTABLE);
    static const char *const keys[] = {"op", "root", NULL};
    lgc_check_keys(L, 5, keys);
    if (lgc_optfield(L, 5, "op") != LUA_TNIL) op = lgc_checkop(L, -1);
    if (lgc_optfield(L, 5, "root") != LUA_TNIL) root = (int)luaL_checkinteger(L, -1);
    lua_pop(L, 2);
  }
  if (sb->kind != LGC_HOST || rb->kind != LGC_HOST || sb->dtype != rb->dtype)
    return lgc_failmsg(L, gc_result_name(GC_ERR_INVALID_ARGUMENT), "mpi: send and recv want host buffers of one dtype");
  MPI_Datatype dt;
  MPI_Op mop;
  const char *why = mpi_types(sb->dtype, op, &dt, &mop);
  if (why) return lgc_failmsg(L, gc_result_name(GC_ERR_UNSUPPORTED), "mpi: %s %s: %s", gc_dtype_name(sb->dtype), gc_op_name(op), why);
  void *s = lgc_ptr(sb), *r = lgc_ptr(rb);
  const size_t count = k == 1 ? rb->count : sb->count, es = gc_dtype_size(sb->dtype);
  const size_t need_send = k == 1 ? count * (size_t)c->size : count, need_recv = k == 2 ? count * (size_t)c->size : count;
  if (count > (size_t)INT32_MAX || sb->count < need_send || rb->count < need_recv || (k == 1 && s == r) ||
      (k == 3 && (root < 0 || root >= c->size)))
    return lgc_failmsg(L, gc_result_name(GC_ERR_INVALID_ARGUMENT), "mpi %s: counts, root or placement do not fit", colls[k]);
  const void *in = s == r ? MPI_IN_PLACE : s;
  if (k == 2) in = s == (char *)r + (size_t)c->rank * count * es ? MPI_IN_PLACE : s; /* its slice */
  int e;
  switch (k) {
    case 0: e = MPI_Allreduce(in, r, (int)count, dt, mop, c->mpi); break;
    case 1: e = MPI_Reduce_scatter_block(s, r, (int)count, dt, mop, c->mpi); break;
    case 2: e = MPI_Allgather(in, (int)count, dt, r, (int)count, dt, c->mpi); break;
    default:
      if (c->rank == root && s != r) memcpy(r, s, count * es);
      e = MPI_Bcast(r, (int)count, dt, root, c->mpi);
      break;
  }
  if (e != MPI_SUCCESS) return lgc_failmsg(L, gc_result_name(GC_ERR_MPI), "mpi %s: MPI error %d", colls[k], e);
  lua_pushboolean(L, 1);
  return 1;
}

void lgc_output_register(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"table", l_table}, {"csv", l_csv},   {"json", l_json}, {"progress", l_progress},
      {"mkdir", l_mkdir}, {"run", l_run},   {"mpi", l_mpi},   {"device_name", l_device_name},
      {NULL, NULL}};
  luaL_setfuncs(L, funcs, 0);
}
