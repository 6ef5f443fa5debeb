# The CUDA driver's start-up steps (what `replay --backend gpu|diff` pays before its first device step), through
# the driver API with ctypes: python3 tools/bench/cuda_start_costs.py (docs/PERFORMANCE.md).
import ctypes, time
t0 = time.time()
cuda = ctypes.CDLL("libcuda.so.1")
t1 = time.time()
assert cuda.cuInit(0) == 0
t2 = time.time()
dev = ctypes.c_int()
assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
ctx = ctypes.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
free, total = ctypes.c_size_t(), ctypes.c_size_t()
assert cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
t3 = time.time()
p = ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(256 << 20)) == 0
t4 = time.time()
h = ctypes.c_void_p()
assert cuda.cuMemHostAlloc(ctypes.byref(h), ctypes.c_size_t(8 << 20), 0) == 0
t5 = time.time()
print(f"dlopen {1e3*(t1-t0):.1f} ms, cuInit {1e3*(t2-t1):.1f} ms, primary context {1e3*(t3-t2):.1f} ms, "
      f"256 MiB cuMemAlloc {1e3*(t4-t3):.2f} ms, 8 MiB cuMemHostAlloc {1e3*(t5-t4):.2f} ms")
