/* test_main.c — runs the CUnit suites: `gc_tests --unit` alone, or under mpirun on the world
 * communicator (`--gpu` for device buffers, `--suite NAME` to pick suites). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <mpi.h>

#include "gc_test.h"

/* One row per suite: name, the function that registers it, whether it needs the communicator. */
static const struct {
  const char *name;
  void (*add)(void);
  int needs_comm;
} suites[] = {
    {"types", gc_test_suite_types, 0},
    {"errors", gc_test_suite_errors, 0},
    {"params", gc_test_suite_params, 0},
    {"dispatch", gc_test_suite_dispatch, 0},
    {"plan", gc_test_suite_plan, 0},
    {"comm", gc_test_suite_comm, 1},
    {"validation", gc_test_suite_validation, 1},
    {"allreduce", gc_test_suite_allreduce, 1},
    {"collectives", gc_test_suite_collectives, 1},
    {"p2p", gc_test_suite_p2p, 1},
    {"tune", gc_test_suite_tune, 1},
    {"plan_query", gc_test_suite_plan_query, 1},
    {"rmsnorm", gc_test_suite_rmsnorm, 1},
    {"mixed", gc_test_suite_mixed, 1},
    {"hierarchy", gc_test_suite_hierarchy, 1},
    {"mixed_layout_numbering", gc_test_suite_mixed_layout_numbering, 0},
    {"mixed_layout", gc_test_suite_mixed_layout, 1},
    {"wire", gc_test_suite_wire, 0},
    {"wire_gpu", gc_test_suite_wire_gpu, 1},
    {"wire_calls", gc_test_suite_wire_calls, 1},
};
#define NUM_SUITES ((int)(sizeof suites / sizeof suites[0]))

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--gpu] [--unit] [--verbose] [--suite NAME]... [--test TEXT]...\n"
          "  --unit        run the suites that need no communicator (no mpirun needed)\n"
          "  --gpu         buffers on the GPU; fails when a rank has none\n"
          "  --test TEXT   run only the tests whose names contain one of these texts\n"
          "  --verbose     rank 0 names each test as it starts and ends (where a long run got to)\n"
          "  --suite NAME  run only these suites:", argv0);
  for (int i = 0; i < NUM_SUITES; i++) fprintf(stderr, " %s", suites[i].name);
  fprintf(stderr, "\n  GC_TEST_SEED=N fixes the random inputs (the seed is printed each run)\n"
                  "  GC_TEST_TRACE=1 prints each call of the random sequences as it is made\n");
}

int main(int argc, char **argv) {
  int unit = 0, gpu = 0, verbose = 0, nsel = 0;
  const char *sel[32];
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--unit") == 0) unit = 1;
    else if (strcmp(argv[i], "--gpu") == 0) gpu = 1;
    else if (strcmp(argv[i], "--verbose") == 0) verbose = 1;
    else if (strcmp(argv[i], "--suite") == 0 && i + 1 < argc && nsel < 32) sel[nsel++] = argv[++i];
    else if (strcmp(argv[i], "--test") == 0 && i + 1 < argc && gc_test_nonly < GC_TEST_MAX_ONLY)
      gc_test_only[gc_test_nonly++] = argv[++i];
    else {
      usage(argv[0]);
      return 2;
    }
  }
  if (verbose) setvbuf(stdout, NULL, _IONBF, 0); /* a test's name shows before it ends */
  for (int s = 0; s < nsel; s++) {
    int known = 0;
    for (int i = 0; i < NUM_SUITES; i++) known |= strcmp(sel[s], suites[i].name) == 0;
    if (!known) {
      fprintf(stderr, "unknown suite '%s'\n", sel[s]);
      usage(argv[0]);
      return 2;
    }
  }

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &gc_test_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &gc_test_size);

  /* A fresh seed each run, the same on every rank; GC_TEST_SEED reproduces a run. */
  unsigned long long seed = 0;
  if (gc_test_rank == 0) {
    const char *env = getenv("GC_TEST_SEED");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = env && *env ? strtoull(env, NULL, 0)
                       : ((unsigned long long)ts.tv_sec * 1000003ull) ^ (unsigned long long)ts.tv_nsec ^
                             ((unsigned long long)getpid() << 20);
    printf("gc_tests: %d rank(s), %s buffers, seed %llu (GC_TEST_SEED=%llu reproduces it)\n",
           gc_test_size, gpu ? "device" : "host", seed, seed);
    fflush(stdout);
  }
  MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  gc_test_seed = seed;

  int setup_failed = 0;
  if (!unit) {
    gc_config_t cfg = GC_CONFIG_INIT;
    cfg.use_gpu = gpu;
    gc_result_t r = gc_comm_init(&gc_test_comm, MPI_COMM_WORLD, &cfg);
    if (r != GC_SUCCESS) {
      fprintf(stderr, "[rank %d] gc_comm_init failed: %s\n", gc_test_rank,
              gc_comm_last_error(NULL)[0] ? gc_comm_last_error(NULL) : gc_result_name(r));
      setup_failed = 1;
      gc_test_comm = NULL;
    } else if (gpu) {
      int dev = -1;
      gc_comm_device(gc_test_comm, &dev);
      if (dev < 0) {
        fprintf(stderr,
                "[rank %d] --gpu given but this rank has no usable GPU: refusing to run the GPU "
                "tests on host buffers\n", gc_test_rank);
        setup_failed = 1;
      }
      gc_test_on_gpu = 1;
    }
    int any_failed = setup_failed;
    MPI_Allreduce(&setup_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_failed) {
      if (gc_test_comm) gc_comm_destroy(gc_test_comm);
      MPI_Finalize();
      return 1;
    }
  }

  if (CU_initialize_registry() != CUE_SUCCESS) {
    fprintf(stderr, "CU_initialize_registry: %s\n", CU_get_error_msg());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int i = 0; i < NUM_SUITES; i++) {
    int chosen = nsel == 0 ? (unit ? !suites[i].needs_comm : suites[i].needs_comm) : 0;
    for (int s = 0; s < nsel; s++) chosen |= strcmp(sel[s], suites[i].name) == 0;
    if (chosen && suites[i].needs_comm && unit) {
      if (gc_test_rank == 0)
        fprintf(stderr, "suite '%s' needs a communicator: run it without --unit\n", suites[i].name);
      chosen = 0;
    }
    if (chosen) suites[i].add();
  }
  if (gc_test_nonly && CU_get_registry()->uiNumberOfTests == 0) {
    if (gc_test_rank == 0) fprintf(stderr, "no test of the chosen suites has a name with the --test text(s) given\n");
    CU_cleanup_registry();
    if (gc_test_comm) gc_comm_destroy(gc_test_comm);
    MPI_Finalize();
    return 2;
  }

  /* Rank 0 reports; the others stay quiet unless something failed on them. */
  CU_basic_set_mode(gc_test_rank != 0 ? CU_BRM_SILENT : verbose ? CU_BRM_VERBOSE : CU_BRM_NORMAL);
  /* CUnit prints its summary even when silent: the other ranks' stdout goes nowhere meanwhile
   * (their failures come back below, and stderr stays open for the tests' own messages). */
  int saved_stdout = -1;
  if (gc_test_rank != 0) {
    fflush(stdout);
    int devnull = open("/dev/null", O_WRONLY);
    saved_stdout = devnull >= 0 ? dup(STDOUT_FILENO) : -1;
    if (saved_stdout >= 0) dup2(devnull, STDOUT_FILENO);
    if (devnull >= 0) close(devnull);
  }
  CU_basic_run_tests();
  if (saved_stdout >= 0) {
    fflush(stdout);
    dup2(saved_stdout, STDOUT_FILENO);
    close(saved_stdout);
  }
  unsigned mine = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
  if (gc_test_rank != 0 && mine) {
    printf("\n[rank %d] %u failure(s):\n", gc_test_rank, mine);
    CU_basic_show_failures(CU_get_failure_list());
    printf("\n");
  }
  fflush(stdout);
  unsigned total = mine;
  MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED, MPI_SUM, MPI_COMM_WORLD);
  CU_cleanup_registry();

  if (gc_test_comm) {
    gc_result_t r = gc_comm_destroy(gc_test_comm);
    if (r != GC_SUCCESS) {
      fprintf(stderr, "[rank %d] gc_comm_destroy: %s\n", gc_test_rank, gc_comm_last_error(NULL));
      total++;
    }
  }
  if (gc_test_rank == 0) printf("gc_tests: %u failure(s) over %d rank(s)\n", total, gc_test_size);
  MPI_Finalize();
  return total != 0;
}
