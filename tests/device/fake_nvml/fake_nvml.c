/* A stand-in for NVIDIA's libnvidia-ml.so.1, built as a library of that name,
 * so that the `nvml` backend is tested the way a user's machine loads the real
 * one (LD_LIBRARY_PATH). It exports the NVML functions the backend uses and
 * replays the scenario file named by ANXIN_FAKE_NVML_SCENARIO, read at
 * nvmlInit_v2:
 *
 *   # comment
 *   init 9                  # what nvmlInit_v2 returns (9: driver not loaded)
 *   gpu                     # a new GPU; the lines after it describe it
 *   name NVIDIA H200
 *   uuid GPU-5c1b...
 *   pci 0000:19:00.0
 *   memory_total 150754820096
 *   memory_used 1048576
 *   temperature 34          # C
 *   slowdown 87             # C
 *   power_mw 75000
 *   power_limit_mw 700000
 *   utilization 12          # percent
 *   sm_clock 1980           # MHz
 *   mem_clock 3201
 *   throttle_reasons 0x40
 *   ecc_corrected 0
 *   ecc_uncorrected 0
 *   nvlinks 18              # links 0..17, all up unless nvlink_down names them
 *   nvlink_down 3
 *   processes 2             # compute processes running
 *   lost                    # every call on this GPU answers NVML_ERROR_GPU_IS_LOST
 *   xid 79                  # an XID event on this GPU (delivered in file order)
 *
 * A value written "unsupported", or a reading not given at all, answers
 * NVML_ERROR_NOT_SUPPORTED. Values and codes follow NVIDIA's nvml.h
 * documentation; the types are declared here, not copied.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../fake_scenario.h"

#define EXPORT __attribute__((visibility("default")))

enum {
  OK = 0,
  ERR_UNINITIALIZED = 1,
  ERR_INVALID_ARGUMENT = 2,
  ERR_NOT_SUPPORTED = 3,
  ERR_INSUFFICIENT_SIZE = 7,
  ERR_DRIVER_NOT_LOADED = 9,
  ERR_TIMEOUT = 10,
  ERR_GPU_IS_LOST = 15,
  ERR_UNKNOWN = 999,
};

typedef struct {
  int given; /* 1: value is valid; 0: not supported */
  unsigned long long value;
} reading;

enum {
  R_MEMORY_TOTAL,
  R_MEMORY_USED,
  R_TEMPERATURE,
  R_SLOWDOWN,
  R_POWER,
  R_POWER_LIMIT,
  R_UTILIZATION,
  R_SM_CLOCK,
  R_MEM_CLOCK,
  R_THROTTLE,
  R_ECC_CORRECTED,
  R_ECC_UNCORRECTED,
  R_NVLINKS,
  R_PROCESSES,
  R_COUNT
};
static const char* const kReadingNames[R_COUNT] = {
    "memory_total",   "memory_used",     "temperature", "slowdown",  "power_mw",
    "power_limit_mw", "utilization",     "sm_clock",    "mem_clock", "throttle_reasons",
    "ecc_corrected",  "ecc_uncorrected", "nvlinks",     "processes"};

#define MAX_GPUS 64
#define MAX_EVENTS 256

typedef struct gpu {
  char name[96];
  char uuid[96];
  unsigned int domain, bus, device;
  int lost;
  reading r[R_COUNT];
  unsigned long long links_down; /* bit per link */
  int registered;
} gpu;

static gpu g_gpus[MAX_GPUS];
static int g_count;
static int g_init_rc;
static int g_initialized;
static struct {
  int gpu;
  unsigned long long xid;
} g_events[MAX_EVENTS];
static int g_event_count;
static int g_event_next;

static int load_scenario(void) {
  memset(g_gpus, 0, sizeof g_gpus);
  g_count = 0;
  g_init_rc = OK;
  g_event_count = 0;
  g_event_next = 0;
  const char* path = getenv("ANXIN_FAKE_NVML_SCENARIO");
  if (path == NULL) return OK; /* a machine with no GPUs */
  FILE* f = fopen(path, "r");
  if (f == NULL) return ERR_UNKNOWN;
  char line[512];
  gpu* cur = NULL;
  while (fgets(line, sizeof line, f)) {
    char *s, *value;
    if (!scenario_split(line, &s, &value)) continue;
    if (strcmp(s, "init") == 0) {
      g_init_rc = atoi(value);
    } else if (strcmp(s, "gpu") == 0) {
      if (g_count == MAX_GPUS) break;
      cur = &g_gpus[g_count++];
    } else if (cur == NULL) {
      continue;
    } else if (strcmp(s, "name") == 0) {
      snprintf(cur->name, sizeof cur->name, "%s", value);
    } else if (strcmp(s, "uuid") == 0) {
      snprintf(cur->uuid, sizeof cur->uuid, "%s", value);
    } else if (strcmp(s, "pci") == 0) {
      sscanf(value, "%x:%x:%x", &cur->domain, &cur->bus, &cur->device);
    } else if (strcmp(s, "lost") == 0) {
      cur->lost = 1;
    } else if (strcmp(s, "nvlink_down") == 0) {
      cur->links_down |= 1ULL << atoi(value);
    } else if (strcmp(s, "xid") == 0) {
      if (g_event_count < MAX_EVENTS) {
        g_events[g_event_count].gpu = (int)(cur - g_gpus);
        g_events[g_event_count].xid = strtoull(value, NULL, 0);
        ++g_event_count;
      }
    } else {
      for (int i = 0; i < R_COUNT; ++i) {
        if (strcmp(s, kReadingNames[i]) == 0) {
          if (strcmp(value, "unsupported") != 0) {
            cur->r[i].given = 1;
            cur->r[i].value = strtoull(value, NULL, 0);
          }
        }
      }
    }
  }
  fclose(f);
  return OK;
}

static int check(const gpu* g) {
  if (!g_initialized) return ERR_UNINITIALIZED;
  if (g == NULL) return ERR_INVALID_ARGUMENT;
  if (g->lost) return ERR_GPU_IS_LOST;
  return OK;
}

static int get(const gpu* g, int which, unsigned long long* out) {
  int rc = check(g);
  if (rc != OK) return rc;
  if (out == NULL) return ERR_INVALID_ARGUMENT;
  if (!g->r[which].given) return ERR_NOT_SUPPORTED;
  *out = g->r[which].value;
  return OK;
}

static int get_uint(const gpu* g, int which, unsigned int* out) {
  unsigned long long v = 0;
  int rc = get(g, which, &v);
  if (rc == OK) *out = (unsigned int)v;
  return rc;
}

EXPORT int nvmlInit_v2(void) {
  int rc = load_scenario();
  if (rc != OK) return rc;
  if (g_init_rc != OK) return g_init_rc;
  g_initialized = 1;
  return OK;
}

EXPORT int nvmlShutdown(void) {
  if (!g_initialized) return ERR_UNINITIALIZED;
  g_initialized = 0;
  return OK;
}

EXPORT const char* nvmlErrorString(int rc) {
  switch (rc) {
    case OK:
      return "Success";
    case ERR_UNINITIALIZED:
      return "Uninitialized";
    case ERR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case ERR_NOT_SUPPORTED:
      return "Not Supported";
    case ERR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case ERR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case ERR_TIMEOUT:
      return "Timeout";
    case ERR_GPU_IS_LOST:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

EXPORT int nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!g_initialized) return ERR_UNINITIALIZED;
  *count = (unsigned int)g_count;
  return OK;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, gpu** device) {
  if (!g_initialized) return ERR_UNINITIALIZED;
  if (index >= (unsigned int)g_count) return ERR_INVALID_ARGUMENT;
  *device = &g_gpus[index];
  return g_gpus[index].lost ? ERR_GPU_IS_LOST : OK;
}

EXPORT int nvmlDeviceGetName(gpu* g, char* name, unsigned int length) {
  int rc = check(g);
  if (rc != OK) return rc;
  if (strlen(g->name) + 1 > length) return ERR_INSUFFICIENT_SIZE;
  strcpy(name, g->name);
  return OK;
}

EXPORT int nvmlDeviceGetUUID(gpu* g, char* uuid, unsigned int length) {
  int rc = check(g);
  if (rc != OK) return rc;
  if (strlen(g->uuid) + 1 > length) return ERR_INSUFFICIENT_SIZE;
  strcpy(uuid, g->uuid);
  return OK;
}

typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} pci_info;

EXPORT int nvmlDeviceGetPciInfo_v3(gpu* g, pci_info* pci) {
  int rc = check(g);
  if (rc != OK) return rc;
  memset(pci, 0, sizeof *pci);
  pci->domain = g->domain;
  pci->bus = g->bus;
  pci->device = g->device;
  snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", g->domain, g->bus, g->device);
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", g->domain & 0xffff,
           g->bus & 0xff, g->device & 0xff);
  return OK;
}

typedef struct {
  unsigned long long total, free, used;
} memory_info;

EXPORT int nvmlDeviceGetMemoryInfo(gpu* g, memory_info* m) {
  unsigned long long total = 0, used = 0;
  int rc = get(g, R_MEMORY_TOTAL, &total);
  if (rc == OK) rc = get(g, R_MEMORY_USED, &used);
  if (rc != OK) return rc;
  m->total = total;
  m->used = used;
  m->free = total - used;
  return OK;
}

EXPORT int nvmlDeviceGetTemperature(gpu* g, int sensor, unsigned int* temp) {
  if (sensor != 0) return ERR_INVALID_ARGUMENT;
  return get_uint(g, R_TEMPERATURE, temp);
}

EXPORT int nvmlDeviceGetTemperatureThreshold(gpu* g, int type, unsigned int* temp) {
  if (type != 1) return ERR_NOT_SUPPORTED; /* only the slowdown threshold */
  return get_uint(g, R_SLOWDOWN, temp);
}

EXPORT int nvmlDeviceGetPowerUsage(gpu* g, unsigned int* mw) { return get_uint(g, R_POWER, mw); }

EXPORT int nvmlDeviceGetEnforcedPowerLimit(gpu* g, unsigned int* mw) {
  return get_uint(g, R_POWER_LIMIT, mw);
}

typedef struct {
  unsigned int gpu, memory;
} utilization;

EXPORT int nvmlDeviceGetUtilizationRates(gpu* g, utilization* u) {
  unsigned int v = 0;
  int rc = get_uint(g, R_UTILIZATION, &v);
  if (rc == OK) {
    u->gpu = v;
    u->memory = 0;
  }
  return rc;
}

EXPORT int nvmlDeviceGetClockInfo(gpu* g, int type, unsigned int* mhz) {
  if (type == 0 || type == 1) return get_uint(g, R_SM_CLOCK, mhz); /* graphics, SM */
  if (type == 2) return get_uint(g, R_MEM_CLOCK, mhz);
  return ERR_INVALID_ARGUMENT;
}

EXPORT int nvmlDeviceGetCurrentClocksThrottleReasons(gpu* g, unsigned long long* reasons) {
  return get(g, R_THROTTLE, reasons);
}

EXPORT int nvmlDeviceGetTotalEccErrors(gpu* g, int error_type, int counter_type,
                                       unsigned long long* count) {
  if (counter_type != 0 && counter_type != 1) return ERR_INVALID_ARGUMENT;
  if (error_type == 0) return get(g, R_ECC_CORRECTED, count);
  if (error_type == 1) return get(g, R_ECC_UNCORRECTED, count);
  return ERR_INVALID_ARGUMENT;
}

EXPORT int nvmlDeviceGetNvLinkState(gpu* g, unsigned int link, int* active) {
  unsigned long long links = 0;
  int rc = get(g, R_NVLINKS, &links);
  if (rc != OK) return rc;
  if (link >= links) return ERR_INVALID_ARGUMENT;
  *active = (g->links_down >> link) & 1 ? 0 : 1;
  return OK;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(gpu* g, unsigned int* count, void* infos) {
  unsigned int n = 0;
  int rc = get_uint(g, R_PROCESSES, &n);
  if (rc != OK) return rc;
  if (n > *count || (n > 0 && infos == NULL)) {
    *count = n;
    return ERR_INSUFFICIENT_SIZE;
  }
  *count = n;
  return OK;
}

/* Event sets: one set is all this fake keeps; events go to registered GPUs. */
typedef struct {
  int unused;
} event_set;
static event_set g_set;

typedef struct {
  gpu* device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} event_data;

EXPORT int nvmlEventSetCreate(event_set** set) {
  if (!g_initialized) return ERR_UNINITIALIZED;
  *set = &g_set;
  return OK;
}

EXPORT int nvmlDeviceRegisterEvents(gpu* g, unsigned long long types, event_set* set) {
  int rc = check(g);
  if (rc != OK) return rc;
  if (set != &g_set) return ERR_INVALID_ARGUMENT;
  if ((types & 0x8) == 0) return ERR_NOT_SUPPORTED; /* XID events only */
  g->registered = 1;
  return OK;
}

EXPORT int nvmlEventSetWait_v2(event_set* set, event_data* data, unsigned int timeout_ms) {
  if (set != &g_set) return ERR_INVALID_ARGUMENT;
  while (g_event_next < g_event_count) {
    int i = g_event_next++;
    gpu* g = &g_gpus[g_events[i].gpu];
    if (!g->registered) continue;
    memset(data, 0, sizeof *data);
    data->device = g;
    data->eventType = 0x8;
    data->eventData = g_events[i].xid;
    return OK;
  }
  struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  return ERR_TIMEOUT;
}

EXPORT int nvmlEventSetFree(event_set* set) { return set == &g_set ? OK : ERR_INVALID_ARGUMENT; }
