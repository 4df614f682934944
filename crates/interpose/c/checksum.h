/* The checksum the shims' unchanged test programs print over their results, so that a run
 * through a shim can be compared with a native one (FNV-1a over the floats' bits). */
#ifndef XSCHED_TEST_CHECKSUM_H
#define XSCHED_TEST_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t checksum(const float *v, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    uint32_t bits;
    memcpy(&bits, &v[i], sizeof bits);
    h = (h ^ bits) * 16777619u;
  }
  return h;
}

#endif
