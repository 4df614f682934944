/* Lookups that answer relative to their caller, for xsched's shim tests (no CUDA). One source,
 * three roles:
 *   -DPART_B -shared   libb: defines `only_in_b` and `shared_name` (returns 2)
 *   -DPART_A -shared   liba, linked against libb: defines `shared_name` (returns 1), and probes
 *                      `dlsym(RTLD_DEFAULT, "only_in_b")` (found in liba's own scope, which holds
 *                      libb) and `dlsym(RTLD_NEXT, "shared_name")` (libb's, the next after liba)
 *   (neither)          the program: opens liba (argv[1]) RTLD_LOCAL and prints
 *                      {"default":1,"next":2} when both lookups answer as glibc documents */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#if defined(PART_B)
int only_in_b = 7;
int shared_name(void) { return 2; }
#elif defined(PART_A)
int shared_name(void) { return 1; }
int probe_default(void) { return dlsym(RTLD_DEFAULT, "only_in_b") != NULL; }
int probe_next(void) {
  int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "shared_name");
  return next ? next() : 0;
}
#else
int main(int argc, char **argv) {
  if (argc < 2) return 2;
  void *a = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!a) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  int (*probe_default)(void) = (int (*)(void))dlsym(a, "probe_default");
  int (*probe_next)(void) = (int (*)(void))dlsym(a, "probe_next");
  if (!probe_default || !probe_next) return 1;
  printf("{\"default\":%d,\"next\":%d}\n", probe_default(), probe_next());
  return 0;
}
#endif
