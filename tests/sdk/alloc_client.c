/* A program that uses libanxin_alloc.so the way a PyTorch job does, on the
 * simulated device (ANXIN_ALLOC_CONF=provider:sim,...), for the test that
 * its statistics reach the agent:
 *
 *   sdk_alloc_client [--wait]
 *
 * Allocates 8 MiB twice and 24 MiB on device 0 and 4 MiB on device 1, frees
 * the first 8 MiB block and asks for 12 MiB (which, with fragment_threshold:0,
 * remaps the freed block's chunks), asks device 0 for 1 TiB (an OOM),
 * frees the second 8 MiB block, then prints one line of
 * JSON: each device's reserved, allocated, fragmentation, ooms and unmaps
 * (what the agent calls remaps) from anxin_alloc_get_stats, and whether
 * libanxin_sdk.so is loaded in the process ("sdk_loaded"). With --wait it
 * then sleeps until a signal ends it, so that the allocator's statistics
 * keep going to the agent; without, it exits 0. */
#include <anxin/alloc.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void print_device(int device, int last) {
  anxin_alloc_stats s;
  if (anxin_alloc_get_stats(device, &s) != 0) {
    fprintf(stderr, "no statistics for device %d: %s\n", device, anxin_alloc_last_error());
    return;
  }
  printf(
      "\"%d\": {\"reserved\": %llu, \"allocated\": %llu, \"fragmentation\": %.17g, "
      "\"ooms\": %llu, \"remaps\": %llu}%s",
      device, (unsigned long long)s.reserved_bytes, (unsigned long long)s.allocated_bytes,
      s.fragmentation, (unsigned long long)s.ooms, (unsigned long long)s.unmaps, last ? "" : ", ");
}

int main(int argc, char** argv) {
  int wait = argc > 1 && strcmp(argv[1], "--wait") == 0;
  void* stream = (void*)0x10;
  void* a = anxin_alloc(8 << 20, 0, stream);
  void* b = anxin_alloc(8 << 20, 0, stream);
  void* c = anxin_alloc(24 << 20, 0, stream);
  void* d = anxin_alloc(4 << 20, 1, stream);
  if (!a || !b || !c || !d) {
    fprintf(stderr, "allocation failed: %s\n", anxin_alloc_last_error());
    return 1;
  }
  anxin_free(a, 8 << 20, 0, stream);
  void* e = anxin_alloc(12 << 20, 0, stream);
  if (!e) {
    fprintf(stderr, "allocation failed: %s\n", anxin_alloc_last_error());
    return 1;
  }
  if (anxin_alloc((ssize_t)1 << 40, 0, stream) != NULL) {
    fprintf(stderr, "1 TiB on a simulated 256 MiB device did not fail\n");
    return 1;
  }
  anxin_free(b, 8 << 20, 0, stream);
  void* sdk = dlopen("libanxin_sdk.so", RTLD_NOW | RTLD_NOLOAD);
  printf("{");
  print_device(0, 0);
  print_device(1, 0);
  printf("\"sdk_loaded\": %s}\n", sdk ? "true" : "false");
  fflush(stdout);
  while (wait) pause();
  return 0;
}
