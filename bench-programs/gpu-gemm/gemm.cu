// gpu-gemm: a tiled single-precision GEMM, C = A x B with N x N matrices, whose tiling is fixed
// at compile time: the knobs of kiln's gpu-gemm campaign.
//
//   nvcc -O3 -arch=native -DTILE=16 -DWORK=2 gemm.cu -o gemm
//   ./gemm [N] [REPS]        (N a multiple of TILE; defaults 2048 and 20)
//
// TILE: each thread block computes a TILE x TILE tile of C, staging TILE x TILE tiles of A and B
//       through shared memory (8, 16 or 32).
// WORK: each thread computes WORK outputs of its column (register blocking), so a block has
//       TILE x TILE / WORK threads (1, 2, 4 or 8; at most TILE).
//
// The entries of A and B are small integers, so every product and sum is exact in float: C is
// the same for every tiling and is checked exactly — its total against sum_k colsum(A)_k
// rowsum(B)_k, and sampled entries against a host computation. The run prints the total, which
// kiln compares with the baseline's output.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#ifndef TILE
#define TILE 16
#endif
#ifndef WORK
#define WORK 1
#endif

static_assert(TILE % WORK == 0, "WORK must divide TILE");
static_assert(TILE * TILE / WORK <= 1024, "too many threads per block");

#define CHECK(call)                                                              \
    do {                                                                         \
        cudaError_t err_ = (call);                                               \
        if (err_ != cudaSuccess) {                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
                    cudaGetErrorString(err_));                                   \
            return 1;                                                            \
        }                                                                        \
    } while (0)

constexpr int ROWS = TILE / WORK;  // thread rows per block

__global__ void gemm(int n, const float *__restrict__ a, const float *__restrict__ b,
                     float *__restrict__ c) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    const int tx = threadIdx.x;  // column within the tile
    const int ty = threadIdx.y;  // first row within the tile; rows ty, ty + ROWS, ...
    const int col = blockIdx.x * TILE + tx;
    const int row0 = blockIdx.y * TILE + ty;
    float acc[WORK];
#pragma unroll
    for (int w = 0; w < WORK; w++) acc[w] = 0.0f;

    for (int k0 = 0; k0 < n; k0 += TILE) {
#pragma unroll
        for (int w = 0; w < WORK; w++) {
            const int r = ty + w * ROWS;
            as[r][tx] = a[(size_t)(blockIdx.y * TILE + r) * n + k0 + tx];
            bs[r][tx] = b[(size_t)(k0 + r) * n + col];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; k++) {
            const float bv = bs[k][tx];
#pragma unroll
            for (int w = 0; w < WORK; w++) acc[w] += as[ty + w * ROWS][k] * bv;
        }
        __syncthreads();
    }
#pragma unroll
    for (int w = 0; w < WORK; w++) c[(size_t)(row0 + w * ROWS) * n + col] = acc[w];
}

// Deterministic small integers in [-2, 2].
static float entry(uint64_t i, uint64_t seed) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ULL ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 29;
    return (float)((int)(x % 5) - 2);
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 2048;
    const int reps = argc > 2 ? atoi(argv[2]) : 20;
    if (n <= 0 || n % TILE != 0 || reps <= 0) {
        fprintf(stderr, "N must be a positive multiple of TILE=%d, REPS positive\n", TILE);
        return 2;
    }
    const size_t count = (size_t)n * n;
    std::vector<float> a(count), b(count), c(count);
    for (size_t i = 0; i < count; i++) {
        a[i] = entry(i, 1);
        b[i] = entry(i, 2);
    }

    float *da, *db, *dc;
    CHECK(cudaMalloc(&da, count * sizeof(float)));
    CHECK(cudaMalloc(&db, count * sizeof(float)));
    CHECK(cudaMalloc(&dc, count * sizeof(float)));
    CHECK(cudaMemcpy(da, a.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), count * sizeof(float), cudaMemcpyHostToDevice));

    const dim3 block(TILE, ROWS);
    const dim3 grid(n / TILE, n / TILE);
    for (int r = 0; r < reps; r++) gemm<<<grid, block>>>(n, da, db, dc);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(c.data(), dc, count * sizeof(float), cudaMemcpyDeviceToHost));

    // The total of C, exactly: sum_ij sum_k a_ik b_kj = sum_k colsum(A)_k rowsum(B)_k.
    long long total = 0;
    for (size_t i = 0; i < count; i++) total += (long long)c[i];
    long long expected = 0;
    for (int k = 0; k < n; k++) {
        long long col_a = 0, row_b = 0;
        for (int i = 0; i < n; i++) col_a += (long long)a[(size_t)i * n + k];
        for (int j = 0; j < n; j++) row_b += (long long)b[(size_t)k * n + j];
        expected += col_a * row_b;
    }
    if (total != expected) {
        fprintf(stderr, "wrong result: total %lld, expected %lld\n", total, expected);
        return 1;
    }
    for (int s = 0; s < 256; s++) {
        const int i = (int)((s * 7919LL) % n), j = (int)((s * 104729LL + 13) % n);
        long long want = 0;
        for (int k = 0; k < n; k++)
            want += (long long)a[(size_t)i * n + k] * (long long)b[(size_t)k * n + j];
        if ((long long)c[(size_t)i * n + j] != want) {
            fprintf(stderr, "wrong result: C[%d][%d] = %g, expected %lld\n", i, j,
                    c[(size_t)i * n + j], want);
            return 1;
        }
    }
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    printf("gemm n=%d checksum=%lld\n", n, total);
    return 0;
}
