/* crt/host_config.h - the fallback for when CUDA's own is absent (pip's CUDA
 * headers lack crt/: see host_defines.h beside this file). cuda_runtime.h,
 * which PyTorch's c10 headers include, includes it first; CUDA's own sets
 * nothing for a host compiler (all of it is for nvcc, under __CUDACC__), so
 * neither does this one. Searched last (-idirafter): a real one always wins. */
