/* main.c — gpucoll-lua: Lua 5.4 with the gpucoll module preloaded, run once per MPI rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "gpucoll.h"
#include "lgc.h"

static const char usage[] =
    "usage: gpucoll-lua COMMAND\n"
    "  run FILE [ARGS...]  run a Lua script (FILE '-' = stdin); ARGS go to the table `arg`\n"
    "  -e CODE [ARGS...]   run a chunk of Lua\n"
    "  --params            print the table of GC_* environment knobs\n"
    "  --version           print the versions of gpucoll and Lua\n"
    "  --help              print this text\n"
    "Run one process per GPU under MPI, e.g.  mpirun -np 4 gpucoll-lua run examples/sweep.lua\n"
    "The module is preloaded: local gpucoll = require \"gpucoll\" (also the global `gpucoll`).\n"
    "A script error prints a traceback tagged [rank N] and aborts every rank (MPI_Abort).\n";

/* Prints a script's error and brings every rank down, so that peers blocked in a collective do
 * not wait forever. */
static void die(const char *msg) {
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Message handler: traceback of the failing rank, every line tagged, for interleaved output.
 * It aborts right here, where the error is raised: unwinding would first run the script's
 * <close> variables, and closing a communicator is collective, so the failing rank would wait
 * there (up to GC_TIMEOUT_MS) for peers that wait for it in their next collective. */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) die(lua_tostring(L, -1));
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  const char *tb = lua_tostring(L, -1);
  char tag[32], newline_tag[40];
  snprintf(tag, sizeof tag, "[rank %d] ", lgc_world_rank());
  snprintf(newline_tag, sizeof newline_tag, "\n%s", tag);
  lua_pushstring(L, tag);
  luaL_gsub(L, tb, "\n", newline_tag);
  lua_concat(L, 2);
  die(lua_tostring(L, -1));
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

/* Runs the loaded chunk with the script arguments; on error prints the traceback and aborts
 * every rank (msghandler does for runtime errors; here: syntax errors, and errors such as
 * memory errors that reach no handler). */
static int run_chunk(lua_State *L, int status, char **argv, int argc, int first_arg) {
  if (status == LUA_OK) {
    int base = lua_gettop(L);
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    int nargs = 0;
    for (int i = first_arg; i < argc; i++, nargs++) lua_pushstring(L, argv[i]);
    status = lua_pcall(L, nargs, 0, base);
    lua_remove(L, base);
  } else {
    /* A syntax error: tag it like a runtime one. */
    lua_pushfstring(L, "[rank %d] %s", lgc_world_rank(), lua_tostring(L, -1));
  }
  if (status == LUA_OK) return 0;
  die(lua_tostring(L, -1));
  return 1; /* not reached */
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

int main(int argc, char **argv) {
  const char *cmd = argc > 1 ? argv[1] : NULL;
  /* --help and --version need no MPI, so they work on a login node without mpirun. */
  if (cmd == NULL || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    fputs(usage, cmd ? stdout : stderr);
    return cmd ? 0 : 2;
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
    if (argc < 3) {
      if (lgc_world_rank() == 0) fprintf(stderr, "gpucoll-lua: %s needs an argument\n%s", cmd, usage);
      rc = 2;
    } else {
      lua_State *L = new_state();
      int status;
      set_args(L, argv, argc, 2);
      if (cmd[0] == 'r') {
        const char *file = strcmp(argv[2], "-") == 0 ? NULL : argv[2];
        status = luaL_loadfile(L, file);
      } else {
        status = luaL_loadbuffer(L, argv[2], strlen(argv[2]), "=(command line)");
      }
      rc = run_chunk(L, status, argv, argc, 3);
      lua_close(L); /* finalizers destroy communicators and buffers, collectively */
    }
  } else {
    if (lgc_world_rank() == 0) fprintf(stderr, "gpucoll-lua: unknown command '%s'\n%s", cmd, usage);
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
