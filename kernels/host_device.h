// OCTO_HD marks a function both backends run: nvcc compiles it for the host
// and the device, the host compiler sees a plain function. The block
// decoders (kernels/block_decode.h) use it, so the CPU tests check the very
// code the CUDA kernels run.
#pragma once

#if defined(__CUDACC__)
#define OCTO_HD __host__ __device__
#else
#define OCTO_HD
#endif
