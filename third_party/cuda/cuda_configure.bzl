"""Finds the local CUDA toolkit (nvcc, cudart_static, nccl.h) and exposes it as @local_cuda.

Without a toolkit, @local_cuda still exists with CUDA_AVAILABLE = False so CPU targets build and test. NCCL is
headers only here: the binaries dlopen libnccl.so.2 on first use (gpu/nccl_api.h); NCCL_DIR (where libnccl was
found at build time, or "") is the loader's last fallback. CUDA_ARCHS is the SASS list (PTX for the highest):
KVSHARD_CUDA_ARCHS, e.g. --repo_env=KVSHARD_CUDA_ARCHS=90, narrows the default 80,86,89,90.
"""

DEFAULT_ARCHS = "80,86,89,90"

def _archs(ctx):
    spec = ctx.os.environ.get("KVSHARD_CUDA_ARCHS", "") or DEFAULT_ARCHS
    archs = []
    for a in spec.split(","):
        a = a.strip().replace("sm_", "")
        if not a.isdigit() or len(a) < 2:
            fail("KVSHARD_CUDA_ARCHS: expected a comma list of SM numbers like 80,90, got '{}'".format(spec))
        archs.append(int(a))
    return sorted({a: True for a in archs}.keys())

def _find_nccl(ctx, cuda):
    for d in [cuda + "/lib", cuda + "/lib64", "/usr/lib/x86_64-linux-gnu"]:
        if ctx.path(d + "/libnccl.so").exists or ctx.path(d + "/libnccl.so.2").exists:
            return d
    return None

def _cuda_configure_impl(ctx):
    cuda = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = ctx.path(cuda + "/bin/nvcc")
    nccl_dir = _find_nccl(ctx, cuda)
    available = (nvcc.exists and ctx.path(cuda + "/lib64/libcudart_static.a").exists and
                 ctx.path(cuda + "/include/nccl.h").exists)
    archs = _archs(ctx)
    if available:
        real = ctx.path(cuda).realpath
        ctx.symlink(str(real) + "/include", "include")
        ctx.symlink(str(real) + "/lib64/libcudart_static.a", "lib/libcudart_static.a")
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "cuda_headers",
    # include/nv/: the extensionless <nv/target> that cuda_fp16.h (via nccl.h) includes in host code too.
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh", "include/**/*.inl", "include/nv/**"]),
    includes = ["include"],
)
cc_library(
    name = "cudart",
    srcs = ["lib/libcudart_static.a"],
    deps = [":cuda_headers"],
    linkopts = ["-ldl", "-lrt", "-lpthread"],
    linkstatic = True,
)
# NCCL's types only (nccl.h): libnccl.so.2 is dlopen'ed at run time, never linked.
cc_library(
    name = "nccl",
    deps = [":cuda_headers"],
)
""")
    else:
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
cc_library(name = "cuda_headers")
cc_library(name = "cudart")
cc_library(name = "nccl")
""")
    ctx.file("defs.bzl", "CUDA_AVAILABLE = {}\nNVCC = \"{}\"\nCUDA_PATH = \"{}\"\nNCCL_DIR = \"{}\"\nCUDA_ARCHS = {}\n".format(
        "True" if available else "False",
        str(nvcc) if available else "",
        cuda,
        nccl_dir or "",
        archs,
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "KVSHARD_CUDA_ARCHS"],
    local = True,
)
