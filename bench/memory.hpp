// The benchmarks' one way to measure memory: the resident set and its peak from /proc/self/status.
#pragma once

#include <malloc.h>

#include <cstdio>
#include <string>

namespace xgrad::bench {

// A line of /proc/self/status in MiB: "VmRSS" (the resident set now) or "VmHWM" (its peak); -1
// if it is not there.
inline double status_mib(const char* key) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  double kib = -1024;
  const std::string prefix = std::string(key) + ": %lf kB";
  while (f && std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, prefix.c_str(), &kib) == 1) break;
  }
  if (f) std::fclose(f);
  return kib / 1024;
}

// Returns freed heap to the system and restarts the peak (VmHWM) from the resident set now
// (/proc/self/clear_refs, Linux 4.0 and later), so that the peak measured from here is what
// follows. False if the peak could not be reset.
inline bool restart_peak() {
  malloc_trim(0);
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool written = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && written;
}

}  // namespace xgrad::bench
