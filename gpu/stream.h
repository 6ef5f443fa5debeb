// CUDA-free spelling of cudaStream_t, so launch declarations can live in host-safe headers.
#ifndef KVSHARD_GPU_STREAM_H_
#define KVSHARD_GPU_STREAM_H_

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;  // identical to the CUDA runtime's typedef

#endif  // KVSHARD_GPU_STREAM_H_
