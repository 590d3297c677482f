// Preloaded (LD_PRELOAD) by suite blas: OpenBLAS on a CPU it does not know. openblas_get_corename
// answers "Prescott", as Debian 12's OpenBLAS 0.3.21 does on Intel Xeon family 6 model 207, unless
// OPENBLAS_CORETYPE names a core, which it then answers, as OpenBLAS does.
#include <cstdlib>

extern "C" char* openblas_get_corename(void) {
  static char prescott[] = "Prescott";
  char* forced = std::getenv("OPENBLAS_CORETYPE");
  return forced && *forced ? forced : prescott;
}
