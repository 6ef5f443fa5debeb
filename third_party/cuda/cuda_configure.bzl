"""Finds the local CUDA toolkit (nvcc, cudart_static, NCCL) and exposes it as @local_cuda.

Without a toolkit, @local_cuda still exists with CUDA_AVAILABLE = False so CPU targets build and test.
"""

def _find_nccl(ctx, cuda):
    for d in [cuda + "/lib", cuda + "/lib64", "/usr/lib/x86_64-linux-gnu"]:
        if ctx.path(d + "/libnccl.so").exists or ctx.path(d + "/libnccl.so.2").exists:
            return d
    return None

def _cuda_configure_impl(ctx):
    cuda = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = ctx.path(cuda + "/bin/nvcc")
    nccl_dir = _find_nccl(ctx, cuda)
    available = nvcc.exists and ctx.path(cuda + "/lib64/libcudart_static.a").exists and nccl_dir != None
    if available:
        real = ctx.path(cuda).realpath
        ctx.symlink(str(real) + "/include", "include")
        ctx.symlink(str(real) + "/lib64/libcudart_static.a", "lib/libcudart_static.a")
        nccl_lib = nccl_dir + ("/libnccl.so" if ctx.path(nccl_dir + "/libnccl.so").exists else "/libnccl.so.2")
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh", "include/**/*.inl"]),
    includes = ["include"],
)
cc_library(
    name = "cudart",
    srcs = ["lib/libcudart_static.a"],
    deps = [":cuda_headers"],
    linkopts = ["-ldl", "-lrt", "-lpthread"],
    linkstatic = True,
)
cc_library(
    name = "nccl",
    deps = [":cuda_headers"],
    linkopts = ["-L{nccl_dir}", "-Wl,-rpath,{nccl_dir}", "-l:libnccl.so.2"],
)
""".format(nccl_dir = nccl_dir))
    else:
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
cc_library(name = "cuda_headers")
cc_library(name = "cudart")
cc_library(name = "nccl")
""")
    ctx.file("defs.bzl", "CUDA_AVAILABLE = {}\nNVCC = \"{}\"\nCUDA_PATH = \"{}\"\n".format(
        "True" if available else "False",
        str(nvcc) if available else "",
        cuda,
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
