"""cuda_library: nvcc-compiled .cu files wrapped in a cc_library (no rules_cuda offline).

Each .cu becomes one genrule running nvcc (C++20, -lineinfo) into a fat binary: SASS for every SM of
CUDA_ARCHS (default sm_80, sm_86, sm_89, sm_90) plus PTX of the highest, for later GPUs; narrow it with
--repo_env=KVSHARD_CUDA_ARCHS=90 (third_party/cuda/cuda_configure.bzl). Without a CUDA toolkit, packages guard
GPU targets with if_cuda() and the tool reports "GPU support not built".
"""

load("@local_cuda//:defs.bzl", "CUDA_ARCHS", "CUDA_AVAILABLE", "NVCC")

GENCODE_FLAGS = ["-gencode=arch=compute_{a},code=sm_{a}".format(a = a) for a in CUDA_ARCHS] + [
    "-gencode=arch=compute_{a},code=compute_{a}".format(a = CUDA_ARCHS[-1]),
]

NVCC_FLAGS = [
    "-std=c++20",
    "-O3",
    "-lineinfo",
] + GENCODE_FLAGS + [
    "-Xcompiler=-fPIC",
    "-Xcompiler=-Wall",
    "--expt-relaxed-constexpr",
    "-diag-suppress=2810",
    "-I.",
    "-I$(GENDIR)",
]

def cuda_library(name, srcs = [], hdrs = [], cuda_hdrs = [], deps = [], copts = [], **kwargs):
    """Compiles `srcs` (.cu) with nvcc; `cuda_hdrs` are .cuh visible to those sources only.

    The nvcc genrules read every core/ header through //core:all_headers, which is visible to //gpu only:
    calling cuda_library from another package needs that package added to its visibility. `visibility` and
    other kwargs go to the cc_library.
    """
    if not CUDA_AVAILABLE:
        return
    objs = []
    dep_hdrs = hdrs + cuda_hdrs
    for src in srcs:
        base = src.replace(".cu", "").replace("/", "_")
        obj = "_{}_{}.o".format(name, base)
        native.genrule(
            name = "_{}_{}_nvcc".format(name, base),
            srcs = [src] + dep_hdrs + ["//core:all_headers"],
            outs = [obj],
            cmd = "{nvcc} {flags} {copts} -c $(location {src}) -o $@".format(
                nvcc = NVCC,
                flags = " ".join(NVCC_FLAGS),
                copts = " ".join(copts),
                src = src,
            ),
            message = "nvcc " + src,
            # The object files are internal to the cc_library below, whatever the package's default visibility.
            visibility = ["//visibility:private"],
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        linkstatic = True,
        **kwargs
    )

def if_cuda(if_true, if_false = []):
    """Returns `if_true` when the CUDA toolkit was found at configure time, else `if_false`."""
    return if_true if CUDA_AVAILABLE else if_false
