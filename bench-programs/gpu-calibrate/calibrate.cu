// gpu-calibrate: spends a known time on the CPU and a known time in GPU kernels, so that kiln's
// CPU and GPU figures can be checked against the truth (the IML end-to-end calibration idea).
//
//   ./calibrate CPU_MS GPU_MS [STREAMS]
//
// 1. Initialises CUDA with blocking synchronisation, so that waiting for the GPU costs no CPU.
// 2. Spins on the CPU until this thread has used CPU_MS ms of CPU time (CLOCK_THREAD_CPUTIME_ID:
//    exact however the scheduler interleaves it).
// 3. Runs kernels that spin on the GPU's %globaltimer for GPU_MS ms in all, in slices of at
//    most 50 ms; each slice is launched on STREAMS streams at once (default 1), so the GPU is
//    busy GPU_MS ms and the kernels add up to STREAMS x GPU_MS ms.
// 4. Checks every kernel ran and prints one line that is the same for every run (an output
//    check).
//
// CUDA's start-up costs CPU time too; the test (worker/tests/gpu.rs) takes it out by subtracting
// a run of `./calibrate 0 0`.

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(call)                                                              \
    do {                                                                         \
        cudaError_t err_ = (call);                                               \
        if (err_ != cudaSuccess) {                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
                    cudaGetErrorString(err_));                                   \
            return 1;                                                            \
        }                                                                        \
    } while (0)

static const long long SLICE_NS = 50LL * 1000 * 1000;

__device__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Spins for `ns` nanoseconds of GPU time, then counts itself.
__global__ void spin(unsigned long long ns, int *count) {
    unsigned long long start = globaltimer();
    while (globaltimer() - start < ns) {
    }
    if (threadIdx.x == 0) atomicAdd(count, 1);
}

static double thread_cpu_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Busy on the CPU until this thread has used `ms` of CPU time.
static unsigned long busy_cpu(double ms) {
    volatile unsigned long sink = 0;
    double until = thread_cpu_ms() + ms;
    while (thread_cpu_ms() < until) {
        for (int i = 0; i < 1000; i++) sink += i;
    }
    return sink;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s CPU_MS GPU_MS [STREAMS]\n", argv[0]);
        return 2;
    }
    double cpu_ms = atof(argv[1]);
    double gpu_ms = atof(argv[2]);
    int streams = argc > 3 ? atoi(argv[3]) : 1;
    if (cpu_ms < 0 || gpu_ms < 0 || streams < 1) {
        fprintf(stderr, "CPU_MS and GPU_MS must be >= 0, STREAMS >= 1\n");
        return 2;
    }

    CHECK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
    CHECK(cudaFree(0));  // creates the context now, before the CPU phase
    int *count = nullptr;
    CHECK(cudaMalloc(&count, sizeof(int)));
    CHECK(cudaMemset(count, 0, sizeof(int)));
    std::vector<cudaStream_t> s(streams);
    for (auto &stream : s) CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK(cudaDeviceSynchronize());

    busy_cpu(cpu_ms);

    long long remaining = (long long)(gpu_ms * 1e6);
    int launched = 0;
    while (remaining > 0) {
        long long slice = remaining < SLICE_NS ? remaining : SLICE_NS;
        for (auto &stream : s) {
            spin<<<1, 32, 0, stream>>>((unsigned long long)slice, count);
            launched++;
        }
        CHECK(cudaGetLastError());
        // One slice at a time: the streams overlap each other, never the next slice.
        CHECK(cudaDeviceSynchronize());
        remaining -= slice;
    }

    int counted = 0;
    CHECK(cudaMemcpy(&counted, count, sizeof counted, cudaMemcpyDeviceToHost));
    if (counted != launched) {
        fprintf(stderr, "launched %d kernels, %d ran\n", launched, counted);
        return 1;
    }
    for (auto &stream : s) CHECK(cudaStreamDestroy(stream));
    CHECK(cudaFree(count));
    printf("calibrate cpu_ms=%g gpu_ms=%g streams=%d kernels=%d ok\n", cpu_ms, gpu_ms, streams,
           launched);
    return 0;
}
