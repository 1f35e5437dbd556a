// header_cxx.cpp — the header test: gpucoll.h under strict C++17 with -pedantic -Werror.
#include "gpucoll.h"

int gc_header_test_cxx();
int gc_header_test_cxx() {
  gc_options_t o = GC_OPTIONS_INIT;
  gc_config_t c = GC_CONFIG_INIT;
  gc_dtype_t d = GC_FP8_E4M3;
  gc_timed_fn fn = nullptr;
  gc_comm_t comm = nullptr;
  (void)fn;
  (void)comm;
  return static_cast<int>(o.version + c.version) + static_cast<int>(d) + GC_NUM_ALGOS;
}
