/* A stand-in for Huawei's libdcmi.so, built as a library of that name, so that
 * the ascend backend's DCMI source is tested the way a node loads the real
 * one (LD_LIBRARY_PATH). It exports the DCMI functions the backend uses and
 * replays the scenario file named by ANXIN_FAKE_DCMI_SCENARIO, read at
 * dcmi_init:
 *
 *   init -8005              # what dcmi_init returns
 *   card 3                  # a card (its id); the chips after it are on it
 *   chip                    # a chip on the current card; the lines after it describe it
 *   name 910B2C
 *   pci 0000:66:00.0
 *   health 0                # 0 OK, 1 minor, 2 major, 3 critical
 *   errorcode 0x80E01801    # repeatable
 *   temperature 35          # C
 *   power 868               # in 0.1 W
 *   hbm_total 65536         # MB
 *   hbm_used 59356          # MB
 *   hbm_freq 1600           # MHz
 *   aicore 40               # percent
 *   network 0               # dcmi_get_device_network_health: 0 OK, 6 not
 *                           # initialised, others a fault (3 unreachable, 5 fault)
 *   not_ready               # every call on this chip returns -8012
 *
 * A reading written "unsupported", or not given, returns -8255. Codes and
 * structures follow the DCMI API reference; they are declared here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fake_scenario.h"

#define EXPORT __attribute__((visibility("default")))

enum { OK = 0, ERR_INVALID = -8001, ERR_NOT_READY = -8012, ERR_NOT_SUPPORTED = -8255 };

enum {
  R_HEALTH,
  R_TEMPERATURE,
  R_POWER,
  R_HBM_TOTAL,
  R_HBM_USED,
  R_HBM_FREQ,
  R_AICORE,
  R_NETWORK,
  R_COUNT
};
static const char* const kNames[R_COUNT] = {"health",   "temperature", "power",  "hbm_total",
                                            "hbm_used", "hbm_freq",    "aicore", "network"};

typedef struct {
  int given;
  long long value;
} reading;

#define MAX_CHIPS 64
#define MAX_CODES 16

typedef struct {
  int card;
  int device; /* index on its card */
  char name[32];
  unsigned int domain, bus, dev, func;
  int not_ready;
  reading r[R_COUNT];
  unsigned int codes[MAX_CODES];
  int code_count;
} chip;

static chip g_chips[MAX_CHIPS];
static int g_count;
static int g_init_rc;

static void load(void) {
  memset(g_chips, 0, sizeof g_chips);
  g_count = 0;
  g_init_rc = OK;
  const char* path = getenv("ANXIN_FAKE_DCMI_SCENARIO");
  if (path == NULL) return;
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    g_init_rc = ERR_INVALID;
    return;
  }
  char line[256];
  int card = 0, next_device = 0;
  chip* cur = NULL;
  while (fgets(line, sizeof line, f)) {
    char *s, *value;
    if (!scenario_split(line, &s, &value)) continue;
    if (strcmp(s, "init") == 0) {
      g_init_rc = atoi(value);
    } else if (strcmp(s, "card") == 0) {
      card = atoi(value);
      next_device = 0;
      cur = NULL;
    } else if (strcmp(s, "chip") == 0) {
      if (g_count == MAX_CHIPS) break;
      cur = &g_chips[g_count++];
      cur->card = card;
      cur->device = next_device++;
    } else if (cur == NULL) {
      continue;
    } else if (strcmp(s, "name") == 0) {
      snprintf(cur->name, sizeof cur->name, "%s", value);
    } else if (strcmp(s, "pci") == 0) {
      sscanf(value, "%x:%x:%x.%x", &cur->domain, &cur->bus, &cur->dev, &cur->func);
    } else if (strcmp(s, "not_ready") == 0) {
      cur->not_ready = 1;
    } else if (strcmp(s, "errorcode") == 0) {
      if (cur->code_count < MAX_CODES) {
        cur->codes[cur->code_count++] = (unsigned int)strtoul(value, NULL, 0);
      }
    } else {
      for (int i = 0; i < R_COUNT; ++i) {
        if (strcmp(s, kNames[i]) == 0 && strcmp(value, "unsupported") != 0) {
          cur->r[i].given = 1;
          cur->r[i].value = strtoll(value, NULL, 0);
        }
      }
    }
  }
  fclose(f);
}

static chip* find(int card, int device, int* rc) {
  for (int i = 0; i < g_count; ++i) {
    if (g_chips[i].card == card && g_chips[i].device == device) {
      *rc = g_chips[i].not_ready ? ERR_NOT_READY : OK;
      return &g_chips[i];
    }
  }
  *rc = ERR_INVALID;
  return NULL;
}

static int get(int card, int device, int which, long long* out) {
  int rc = OK;
  chip* c = find(card, device, &rc);
  if (rc != OK) return rc;
  if (!c->r[which].given) return ERR_NOT_SUPPORTED;
  *out = c->r[which].value;
  return OK;
}

EXPORT int dcmi_init(void) {
  load();
  return g_init_rc;
}

EXPORT int dcmi_get_card_num_list(int* card_num, int* card_list, int list_len) {
  int n = 0;
  for (int i = 0; i < g_count; ++i) {
    int seen = 0;
    for (int j = 0; j < n; ++j) seen |= card_list[j] == g_chips[i].card;
    if (!seen && n < list_len) card_list[n++] = g_chips[i].card;
  }
  *card_num = n;
  return OK;
}

EXPORT int dcmi_get_device_num_in_card(int card_id, int* device_num) {
  int n = 0;
  for (int i = 0; i < g_count; ++i) n += g_chips[i].card == card_id;
  if (n == 0) return ERR_INVALID;
  *device_num = n;
  return OK;
}

typedef struct {
  unsigned char chip_type[32];
  unsigned char chip_name[32];
  unsigned char chip_ver[32];
  unsigned int aicore_cnt;
} chip_info;

EXPORT int dcmi_get_device_chip_info(int card_id, int device_id, chip_info* info) {
  int rc = OK;
  chip* c = find(card_id, device_id, &rc);
  if (rc != OK) return rc;
  memset(info, 0, sizeof *info);
  snprintf((char*)info->chip_type, sizeof info->chip_type, "Ascend");
  snprintf((char*)info->chip_name, sizeof info->chip_name, "%s", c->name);
  snprintf((char*)info->chip_ver, sizeof info->chip_ver, "V1");
  info->aicore_cnt = 24;
  return OK;
}

typedef struct {
  unsigned int venderid, subvenderid, deviceid, subdeviceid;
  int domain;
  unsigned int bdf_busid, bdf_deviceid, bdf_funcid;
  unsigned char reserve[32];
} pcie_info;

EXPORT int dcmi_get_device_pcie_info(int card_id, int device_id, pcie_info* pci) {
  int rc = OK;
  chip* c = find(card_id, device_id, &rc);
  if (rc != OK) return rc;
  memset(pci, 0, sizeof *pci);
  pci->venderid = 0x19e5;
  pci->domain = (int)c->domain;
  pci->bdf_busid = c->bus;
  pci->bdf_deviceid = c->dev;
  pci->bdf_funcid = c->func;
  return OK;
}

EXPORT int dcmi_get_device_logic_id(int* logic_id, int card_id, int device_id) {
  for (int i = 0; i < g_count; ++i) {
    if (g_chips[i].card == card_id && g_chips[i].device == device_id) {
      *logic_id = i;
      return OK;
    }
  }
  return ERR_INVALID;
}

EXPORT int dcmi_get_device_health(int card_id, int device_id, unsigned int* health) {
  long long v = 0;
  int rc = get(card_id, device_id, R_HEALTH, &v);
  if (rc == OK) *health = (unsigned int)v;
  return rc;
}

EXPORT int dcmi_get_device_errorcode_v2(int card_id, int device_id, int* error_count,
                                        unsigned int* error_code_list, unsigned int list_len) {
  int rc = OK;
  chip* c = find(card_id, device_id, &rc);
  if (rc != OK) return rc;
  int n = 0;
  for (int i = 0; i < c->code_count && (unsigned int)i < list_len; ++i) {
    error_code_list[n++] = c->codes[i];
  }
  *error_count = n;
  return OK;
}

EXPORT int dcmi_get_device_temperature(int card_id, int device_id, int* temperature) {
  long long v = 0;
  int rc = get(card_id, device_id, R_TEMPERATURE, &v);
  if (rc == OK) *temperature = (int)v;
  return rc;
}

EXPORT int dcmi_get_device_power_info(int card_id, int device_id, int* power) {
  long long v = 0;
  int rc = get(card_id, device_id, R_POWER, &v);
  if (rc == OK) *power = (int)v;
  return rc;
}

typedef struct {
  unsigned long long memory_size;
  unsigned int freq;
  unsigned long long memory_usage;
  int temp;
  unsigned int bandwith_util_rate;
} hbm_info;

EXPORT int dcmi_get_device_hbm_info(int card_id, int device_id, hbm_info* hbm) {
  long long total = 0, used = 0, freq = 0;
  int rc = get(card_id, device_id, R_HBM_TOTAL, &total);
  if (rc == OK) rc = get(card_id, device_id, R_HBM_USED, &used);
  if (rc != OK) return rc;
  get(card_id, device_id, R_HBM_FREQ, &freq);
  memset(hbm, 0, sizeof *hbm);
  hbm->memory_size = (unsigned long long)total;
  hbm->memory_usage = (unsigned long long)used;
  hbm->freq = (unsigned int)freq;
  return OK;
}

EXPORT int dcmi_get_device_utilization_rate(int card_id, int device_id, int input_type,
                                            unsigned int* utilization_rate) {
  if (input_type != 2) return ERR_NOT_SUPPORTED; /* AI core only */
  long long v = 0;
  int rc = get(card_id, device_id, R_AICORE, &v);
  if (rc == OK) *utilization_rate = (unsigned int)v;
  return rc;
}

EXPORT int dcmi_get_device_network_health(int card_id, int device_id, int* result) {
  long long v = 0;
  int rc = get(card_id, device_id, R_NETWORK, &v);
  if (rc == OK) *result = (int)v;
  return rc;
}
