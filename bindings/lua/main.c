/* main.c — gpucoll-lua: Lua 5.4 with the gpucoll module preloaded, run once per MPI rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "gpucoll.h"
#include "lgc.h"

/* The exit status of a script stopped by --time-limit, as coreutils' timeout(1) uses. */
#define EXIT_TIME_LIMIT 124
/* How long a failing rank waits for every other rank to reach the end of the script (failed or
 * not) before it takes them to be blocked in a collective and aborts them. */
#define AGREE_SECONDS 10.0

static const char usage[] =
    "usage: gpucoll-lua COMMAND\n"
    "  run FILE [ARGS...]  run a Lua script (FILE '-' = stdin); ARGS go to the table `arg`\n"
    "  -e CODE [ARGS...]   run a chunk of Lua\n"
    "  --params            print the table of GC_* environment knobs\n"
    "  --version           print the versions of gpucoll and Lua\n"
    "  --help              print this text\n"
    "Options of run and -e, before FILE or CODE:\n"
    "  --time-limit SECONDS  stop a script still running after SECONDS: exit status 124\n"
    "Run one process per GPU under MPI, e.g.  mpirun -np 4 gpucoll-lua run examples/sweep.lua\n"
    "The module is preloaded: local gpucoll = require \"gpucoll\" (also the global `gpucoll`).\n"
    "A usage mistake, or a script error that every rank reaches, prints one line on rank 0 and\n"
    "exits 1 on every rank. An error on some ranks while others wait in a collective prints a\n"
    "traceback tagged [rank N] and aborts every rank (MPI_Abort). --time-limit stops a script at\n"
    "its next Lua instruction past the limit, on every rank.\n";

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the time limit: a count hook raises an error once the deadline has passed ----------------- */
static double limit_seconds;   /* 0: no limit */
static double limit_deadline;  /* CLOCK_MONOTONIC seconds */
static int limit_hit;

static void fail(lua_State *L, const char *msg, int with_traceback);

/* Past the deadline the hook ends the run itself (fail), with no error to unwind: a script's own
 * pcall would catch an error and go on. */
static void limit_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  if (now_seconds() < limit_deadline) return;
  limit_hit = 1;
  luaL_where(L, 0);
  lua_pushfstring(L, "time limit of %f s exceeded (--time-limit)", limit_seconds);
  lua_concat(L, 2);
  fail(L, lua_tostring(L, -1), 1);
}

static void start_time_limit(lua_State *L) {
  if (limit_seconds <= 0) return;
  limit_deadline = now_seconds() + limit_seconds;
  lua_sethook(L, limit_hook, LUA_MASKCOUNT, 1000);
}

/* ---- how a run ends: every rank agrees on the outcome before it leaves ------------------------- */
struct outcome {
  int first_failed; /* the lowest rank that failed; the world size when none did */
  int status;       /* the exit status: the largest that any rank asks for */
};

/* Every rank contributes whether it failed and the status it wants. seconds > 0 bounds the wait;
 * returns 0 when it runs out (a peer is elsewhere, e.g. blocked in a collective) or MPI fails. */
static int agree(int failed, int status, double seconds, struct outcome *out) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int mine[2] = {failed ? rank : size, -status}, all[2];
  MPI_Request req;
  if (MPI_Iallreduce(mine, all, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req) != MPI_SUCCESS) return 0;
  double end = now_seconds() + seconds;
  const struct timespec pause = {0, 1000000};
  for (;;) {
    int done = 0;
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return 0;
    if (done) break;
    if (seconds > 0 && now_seconds() >= end) return 0; /* the request goes with MPI_Abort */
    nanosleep(&pause, NULL);
  }
  out->first_failed = all[0];
  out->status = -all[1];
  return 1;
}

/* Leaves after a failure that every rank knows of: the lowest failing rank prints its one line,
 * and every rank finalizes MPI and exits with the agreed status. The Lua state is not closed: its
 * <close> variables and finalizers would close communicators, collectively, while the ranks stand
 * at different points of the script; MPI_Finalize needs none of them closed first. */
static void leave(const struct outcome *o, const char *msg) {
  int rank = lgc_world_rank();
  if (msg != NULL && rank == o->first_failed) {
    if (rank == 0) fprintf(stderr, "gpucoll-lua: %s\n", msg);
    else fprintf(stderr, "gpucoll-lua: [rank %d] %s\n", rank, msg);
  }
  fflush(stdout);
  fflush(stderr);
  MPI_Finalize();
  exit(o->status);
}

/* Prints a failing rank's traceback and brings every rank down, so that peers blocked in a
 * collective do not wait forever. */
static void die(const char *msg) {
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* This rank failed with msg: leaves cleanly when every rank reaches its end of the script in
 * time, else aborts them all with the tagged traceback (when there is one). */
static void fail(lua_State *L, const char *msg, int with_traceback) {
  struct outcome o;
  if (agree(1, limit_hit ? EXIT_TIME_LIMIT : 1, AGREE_SECONDS, &o)) leave(&o, msg);
  if (with_traceback) {
    luaL_traceback(L, L, msg, 1);
    msg = lua_tostring(L, -1);
  }
  char tag[32], newline_tag[40];
  snprintf(tag, sizeof tag, "[rank %d] ", lgc_world_rank());
  snprintf(newline_tag, sizeof newline_tag, "\n%s", tag);
  lua_pushstring(L, tag);
  luaL_gsub(L, msg, "\n", newline_tag);
  lua_concat(L, 2);
  die(lua_tostring(L, -1));
}

/* Message handler: runs where the error is raised, before any unwinding, because unwinding would
 * run the script's <close> variables, and closing a communicator is collective: the failing rank
 * would wait there for peers that wait for it in their next collective. */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) msg = lua_tostring(L, -1);
    else msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  fail(L, msg, 1);
  return 1; /* not reached */
}

/* If a script leaves through os.exit, MPI must still be finalized or mpirun reports an error. */
static void finalize_at_exit(void) {
  if (lgc_mpi_live()) MPI_Finalize();
}

static void set_args(lua_State *L, char **argv, int argc, int script) {
  lua_createtable(L, argc - script, script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

/* Runs the loaded chunk with the script arguments. A failure does not return (fail): runtime
 * errors reach it through msghandler, load errors (a missing file, a syntax error) and errors
 * that reach no handler (memory) from here. A rank that succeeds waits for the others' outcome. */
static void run_chunk(lua_State *L, int status, char **argv, int argc, int first_arg) {
  if (status == LUA_OK) {
    int base = lua_gettop(L);
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    int nargs = 0;
    for (int i = first_arg; i < argc; i++, nargs++) lua_pushstring(L, argv[i]);
    start_time_limit(L);
    status = lua_pcall(L, nargs, 0, base);
    lua_sethook(L, NULL, 0, 0);
    lua_remove(L, base);
  }
  if (status != LUA_OK) fail(L, lua_tostring(L, -1), 0);
  struct outcome o;
  if (!agree(0, 0, 0, &o)) die("gpucoll-lua: the ranks could not agree on how the script ended");
  if (o.status != 0) leave(&o, NULL);
}

static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "gpucoll-lua: cannot create a Lua state (out of memory)\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  luaL_openlibs(L);
  luaL_requiref(L, "gpucoll", luaopen_gpucoll, 1); /* package.loaded.gpucoll and the global */
  lua_pop(L, 1);
  return L;
}

/* A usage mistake: every rank sees the same command line, so rank 0 alone says so. */
static int usage_error(const char *fmt, const char *what) {
  if (lgc_world_rank() == 0) {
    fputs("gpucoll-lua: ", stderr);
    fprintf(stderr, fmt, what);
    fputs(" (gpucoll-lua --help shows the usage)\n", stderr);
  }
  return 1;
}

/* Reads the options after `run` / `-e` from argv[*next]; returns 0, or 1 after a usage error. */
static int parse_options(int argc, char **argv, int *next) {
  while (*next < argc && strncmp(argv[*next], "--", 2) == 0 && argv[*next][2] != '\0') {
    const char *opt = argv[*next], *value = NULL;
    if (strcmp(opt, "--time-limit") == 0) {
      if (*next + 1 >= argc) return usage_error("%s needs a number of seconds", opt);
      value = argv[++*next];
    } else if (strncmp(opt, "--time-limit=", 13) == 0) {
      value = opt + 13;
    } else {
      return usage_error("unknown option '%s'", opt);
    }
    char *end = NULL;
    double s = strtod(value, &end);
    if (end == value || *end != '\0' || !isfinite(s) || s <= 0)
      return usage_error("--time-limit takes a positive number of seconds, not '%s'", value);
    limit_seconds = s;
    ++*next;
  }
  return 0;
}

static int run_command(int argc, char **argv) {
  const char *cmd = argv[1];
  int next = 2;
  if (parse_options(argc, argv, &next) != 0) return 1;
  if (next >= argc) return usage_error("%s needs a file or a chunk of Lua", cmd);
  lua_State *L = new_state();
  set_args(L, argv, argc, next);
  int status;
  if (cmd[0] == 'r') {
    const char *file = strcmp(argv[next], "-") == 0 ? NULL : argv[next];
    status = luaL_loadfile(L, file);
  } else {
    status = luaL_loadbuffer(L, argv[next], strlen(argv[next]), "=(command line)");
  }
  run_chunk(L, status, argv, argc, next + 1);
  lua_close(L); /* finalizers destroy communicators and buffers, collectively */
  return 0;
}

int main(int argc, char **argv) {
  const char *cmd = argc > 1 ? argv[1] : NULL;
  /* --help and --version need no MPI, so they work on a login node without mpirun. */
  if (cmd == NULL || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    fputs(usage, cmd ? stdout : stderr);
    return cmd ? 0 : 1;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("gpucoll-lua: gpucoll %s, %s\n", gc_get_version(), LUA_RELEASE);
    return 0;
  }
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    fprintf(stderr, "gpucoll-lua: MPI_Init_thread failed\n");
    return 1;
  }
  atexit(finalize_at_exit);
  int rc = 0;
  if (strcmp(cmd, "--params") == 0) {
    if (lgc_world_rank() == 0) fputs(gc_params_table(), stdout);
  } else if (strcmp(cmd, "run") == 0 || strcmp(cmd, "-e") == 0) {
    rc = run_command(argc, argv);
  } else {
    rc = usage_error("unknown command '%s'", cmd);
  }
  MPI_Finalize();
  return rc;
}
