/* scripts/bench-verify's benchmark: a binary carrying MIB MiB of initialised data (mib.h,
 * written beside it by the script, defines MIB). The loop reads a page of it per pass, so the
 * run costs CPU time, not a read of the whole file. Usage: bench N (passes). */
#include <stdio.h>
#include <stdlib.h>
#include "mib.h"
#define BYTES ((size_t)MIB << 20)
static unsigned char data[BYTES] = {1};
int main(int argc, char **argv) {
    unsigned long n = strtoul(argv[1], 0, 10), s = 0;
    for (unsigned long i = 0; i < n; i++) s += data[(i * 4096) % BYTES] + (i ^ s);
    printf("%lu\n", s);
    return 0;
}
