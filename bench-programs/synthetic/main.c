/* synthetic: a program with a known cost function, for testing knob search.
 *
 * Usage: ./bench x0 x1 ... x9 N     (each xi is 0 or 1, N >= 1)
 *
 * Runs exactly  cost = N * (BASE + sum_i W[i]*x[i] + C01*x0*x1)
 * iterations of a loop the optimiser cannot remove.  The x0*x1 term makes
 * x0 and x1 individually harmful but jointly helpful, so a search that only
 * flips one knob at a time from all-zeros gets stuck (see README.md).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NKNOBS 10
#define BASE 200
#define C01 (-45)

static const long W[NKNOBS] = {10, 12, -25, 15, -10, 40, -5, 20, -18, 8};

/* Strict parsing: a typo in a substituted knob must not pass silently. */
static long parse(const char *s, long lo, long hi, const char *what) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < lo || v > hi) {
        fprintf(stderr, "bad %s: '%s' (want %ld..%ld)\n", what, s, lo, hi);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv) {
    if (argc != NKNOBS + 2) {
        fprintf(stderr, "usage: %s x0 x1 ... x9 N   (xi in {0,1})\n", argv[0]);
        return 2;
    }
    long x[NKNOBS];
    long per = BASE;
    for (int i = 0; i < NKNOBS; i++) {
        x[i] = parse(argv[1 + i], 0, 1, "knob");
        per += W[i] * x[i];
    }
    per += C01 * x[0] * x[1];
    long n = parse(argv[NKNOBS + 1], 1, 100000000, "N");
    long cost = n * per;

    /* The volatile accumulator forces a load and store every iteration. */
    volatile uint64_t acc = 0x243F6A8885A308D3ull;
    for (long i = 0; i < cost; i++)
        acc = acc * 6364136223846793005ull + 1442695040888963407ull;

    printf("cost: %ld\n", cost);
    printf("checksum: %016llx\n", (unsigned long long)acc);
    return 0;
}
