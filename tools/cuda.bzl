"""cuda_library: nvcc-compiled .cu files wrapped in a cc_library (no rules_cuda offline).

Each .cu becomes one genrule running nvcc (C++20, -lineinfo) into a fat binary: SASS for every SM of
CUDA_ARCHS (default sm_80, sm_86, sm_89, sm_90) plus PTX of the highest, for later GPUs; narrow it with
--repo_env=KVSHARD_CUDA_ARCHS=90 (third_party/cuda/cuda_configure.bzl). Host code without kernels is .cc in a
cuda_cc_library (the C++ toolchain, cudart). Without a CUDA toolkit, both macros define nothing, packages guard
other GPU targets with if_cuda() and the tool reports "GPU support not built".
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

def cuda_cc_library(name, deps = [], **kwargs):
    """Host code that calls the CUDA runtime: a cc_library whose .cc sources the normal C++ toolchain compiles
    (not nvcc, and once, not once per architecture), with the toolkit's headers and the static cudart.

    Code with no kernel belongs here, not in a .cu; a kernel stays in a cuda_library, reached through a
    CUDA-free LaunchFoo(..., stream) header. Skipped without a toolkit, like cuda_library. linkstatic, as
    cuda_library: cudart is linked once into each binary, never into a per-target shared library of a test.
    """
    if not CUDA_AVAILABLE:
        return
    native.cc_library(
        name = name,
        deps = deps + ["@local_cuda//:cudart"],
        linkstatic = True,
        **kwargs
    )

def if_cuda(if_true, if_false = []):
    """Returns `if_true` when the CUDA toolkit was found at configure time, else `if_false`."""
    return if_true if CUDA_AVAILABLE else if_false
