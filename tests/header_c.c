/* header_c.c — the header test: gpucoll.h alone (twice) under strict C11 with -pedantic -Werror. */
#include "gpucoll.h"
#include "gpucoll.h"

int gc_header_test_c(void);
int gc_header_test_c(void) {
  gc_options_t o = GC_OPTIONS_INIT;
  gc_config_t c = GC_CONFIG_INIT;
  gc_dtype_t d = GC_BFLOAT16;
  gc_result_t r = GC_ERR_TIMEOUT;
  return (int)o.version + (int)c.version + (int)d + (int)r + GC_NUM_DTYPES + GC_VERSION_CODE;
}
