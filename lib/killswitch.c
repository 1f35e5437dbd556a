/* killswitch.c — the multicast kill switches of NCCL, torch and NVSHMEM, read where multicast could
 * be set up or planned: any one of them set keeps gpucoll off NVLink multicast too. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <strings.h>

#include "gc_internal.h"

/* Whether a kill switch's value turns multicast off. NCCL reads NCCL_NVLS_ENABLE as an integer,
 * so whatever is not one (a word, an empty value) is its 0: off. The disabling switches of torch
 * and NVSHMEM also take words; only a clear 0, false, no or off leaves them on. A wrong guess here
 * can take the host's GPUs out of service, so every doubt reads as off. */
bool gc__switch_says_off(const char *value, bool off_is_zero) {
  int64_t n = 0;
  const int number = gc__parse_int(value, &n);
  if (off_is_zero) return !number || n == 0;
  if (number) return n != 0;
  static const char *const no[] = {"false", "no", "off"};
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
    if (strcasecmp(value, no[i]) == 0) return false;
  return true;
}

bool gc__multicast_kill_switch(const char **which) {
  static const struct { const char *name; bool off_is_zero; } switches[] = {
      {"NCCL_NVLS_ENABLE", true},
      {"TORCH_SYMM_MEM_DISABLE_MULTICAST", false},
      {"NVSHMEM_DISABLE_NVLS", false},
  };
  for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++) {
    const char *v = getenv(switches[i].name);
    if (v && gc__switch_says_off(v, switches[i].off_is_zero)) {
      if (which) *which = switches[i].name;
      return true;
    }
  }
  return false;
}
