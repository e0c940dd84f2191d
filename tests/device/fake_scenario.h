/* The scenario files of the fake vendor libraries (fake_nvml/, fake_dcmi/):
 * one "key value" a line, '#' starting a comment, blank lines ignored. Each
 * fake includes this header and reads its own keys:
 *
 *   char line[256], *key, *value;
 *   while (fgets(line, sizeof line, f)) {
 *     if (!scenario_split(line, &key, &value)) continue;  // blank or comment
 *     if (strcmp(key, "init") == 0) g_init_rc = atoi(value);
 *   }
 */
#ifndef ANXIN_TESTS_DEVICE_FAKE_SCENARIO_H_
#define ANXIN_TESTS_DEVICE_FAKE_SCENARIO_H_

#include <string.h>

/* s without leading blanks, without a '#' comment and without trailing
 * white space; cuts s in place. */
static char* scenario_trim(char* s) {
  while (*s == ' ' || *s == '\t') ++s;
  char* hash = strchr(s, '#');
  if (hash) *hash = '\0';
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
    s[--n] = '\0';
  return s;
}

/* Splits a line read with fgets (in place) into its first word and the
 * trimmed rest; 0 when the line holds nothing but white space or a comment. */
static int scenario_split(char* line, char** key, char** value) {
  char* s = scenario_trim(line);
  if (*s == '\0') return 0;
  char* rest = s + strcspn(s, " \t");
  if (*rest) *rest++ = '\0';
  *key = s;
  *value = scenario_trim(rest);
  return 1;
}

#endif /* ANXIN_TESTS_DEVICE_FAKE_SCENARIO_H_ */
