/* async_leak.c - a stream-ordered allocation that is never freed.
 *
 * cudaMallocAsync hands out memory from the device's pool; a request whose
 * early-exit path skips cudaFreeAsync keeps its block forever. The report
 * shows the stream_ordered blocks at handle_request(), with their stream.
 *
 *   LD_PRELOAD=build/libcumemtrace.so ./build/examples/async_leak
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

static int __attribute__((noinline)) handle_request(cudaStream_t stream, int request)
{
    void *buffer;
    if (cudaMallocAsync(&buffer, 1 << 20, stream) != cudaSuccess)
        return -1;
    cudaMemset(buffer, 0, 1 << 20);
    if (request % 3 == 0)
        return 0; /* early exit: the free below is skipped */
    cudaFreeAsync(buffer, stream);
    return 1;
}

int main(int argc, char **argv)
{
    int requests = argc > 1 ? atoi(argv[1]) : 30;
    cudaStream_t stream;
    if (cudaStreamCreate(&stream) != cudaSuccess)
        return 1;
    int served = 0;
    for (int request = 0; request < requests; request++)
        served += handle_request(stream, request) >= 0;
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
    printf("async_leak: %d requests served\n", served);
    return 0;
}
