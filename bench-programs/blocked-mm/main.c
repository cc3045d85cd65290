/* Blocked matrix multiply for kiln's `knobs` benchmarks: the block size and
 * the loop order are compile-time knobs (-DBLOCK=..., -DORDER_...), so each
 * decision set is a different binary. Integer arithmetic keeps the checksum
 * identical whatever the knobs. Usage: ./bench [N] (matrix size, default 256). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef BLOCK
#define BLOCK 32
#endif

static uint32_t state = 2463534242u;

static uint32_t next_random(void) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return state;
}

static void fill(int32_t *m, int n) {
    for (int i = 0; i < n * n; i++) m[i] = (int32_t)(next_random() % 17) - 8;
}

/* One block of C += A * B, in the loop order chosen at compile time. */
static void block(const int32_t *a, const int32_t *b, int32_t *c, int n, int i0, int j0, int k0) {
    int im = i0 + BLOCK < n ? i0 + BLOCK : n;
    int jm = j0 + BLOCK < n ? j0 + BLOCK : n;
    int km = k0 + BLOCK < n ? k0 + BLOCK : n;
#if defined(ORDER_IKJ)
    for (int i = i0; i < im; i++)
        for (int k = k0; k < km; k++)
            for (int j = j0; j < jm; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];
#elif defined(ORDER_JKI)
    for (int j = j0; j < jm; j++)
        for (int k = k0; k < km; k++)
            for (int i = i0; i < im; i++) c[i * n + j] += a[i * n + k] * b[k * n + j];
#else
    for (int i = i0; i < im; i++)
        for (int j = j0; j < jm; j++)
            for (int k = k0; k < km; k++) c[i * n + j] += a[i * n + k] * b[k * n + j];
#endif
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 256;
    if (n <= 0) {
        fprintf(stderr, "usage: %s [N > 0]\n", argv[0]);
        return 2;
    }
    int32_t *a = malloc(sizeof(int32_t) * n * n);
    int32_t *b = malloc(sizeof(int32_t) * n * n);
    int32_t *c = calloc((size_t)n * n, sizeof(int32_t));
    if (!a || !b || !c) return 1;
    fill(a, n);
    fill(b, n);
    for (int i0 = 0; i0 < n; i0 += BLOCK)
        for (int j0 = 0; j0 < n; j0 += BLOCK)
            for (int k0 = 0; k0 < n; k0 += BLOCK) block(a, b, c, n, i0, j0, k0);
    uint64_t sum = 1469598103934665603ull;
    for (int i = 0; i < n * n; i++) sum = (sum ^ (uint32_t)c[i]) * 1099511628211ull;
    printf("checksum: %016llx\n", (unsigned long long)sum);
    free(a);
    free(b);
    free(c);
    return 0;
}
