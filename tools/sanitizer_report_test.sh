#!/usr/bin/env bash
# tools/sanitizer_report.py on compute-sanitizer logs: only NCCL's kernel-image probes are suppressed; kvshard's
# kernels and API calls, another error inside NCCL, and a crash without an error all fail the binary's case.
set -u
R="${TEST_SRCDIR}/kvshard/tools/sanitizer_report.py"
T="${TEST_TMPDIR:-/tmp}"
pass=0; fail=0
probe='========= Program hit cudaErrorNoKernelImageForDevice (error 209) due to "no kernel image is available for execution on the device" on CUDA API call to cudaFuncGetAttributes.
=========     Saved host backtrace up to driver entry point at error
=========     Host Frame: [0x333] in /lib/x86_64-linux-gnu/libcuda.so.1
=========     Host Frame:ncclInitKernelsForDevice [0x1] in /usr/lib/x86_64-linux-gnu/libnccl.so.2
========='
case_() {  # name, want-rc, want-in-output, exit-code, log text
  local name=$1 want_rc=$2 want=$3 code=$4 text=$5 out rc
  printf '%s\n' "[==========] 1 test" "========= COMPUTE-SANITIZER" "$text" "[  PASSED  ] 1 test." > "$T/$name.log"
  out=$(python3 "$R" "$name" "$T/$name.log" "$code" "$T/$name.xml" 2>&1); rc=$?
  if [[ $rc -ne $want_rc || "$out" != *"$want"* ]] || { ((want_rc)) && ! grep -q '<failure' "$T/$name.xml"; }; then
    echo "FAIL $name: rc=$rc (want $want_rc) output: $out"; fail=$((fail+1))
  else
    pass=$((pass+1))
  fi
}
case_ probes_only 0 "0 errors, 4 suppressed (NCCL's kernel-image probes)" 1 "$probe
$probe
$probe
$probe
========= ERROR SUMMARY: 4 errors"
case_ own_kernel 1 "first: Invalid __global__ read of size 4 bytes" 1 "$probe
========= Invalid __global__ read of size 4 bytes
=========     at OwnerWriteKernel+0x70 in gpu/owner_write.cu:40
=========     Host Frame:cudaLaunchKernel [0x1] in /bundle/bin/gpu_owner_write_test
=========
========= ERROR SUMMARY: 2 errors"
case_ own_api_call 1 "1 compute-sanitizer error(s)" 1 "========= Program hit cudaErrorNoKernelImageForDevice (error 209) due to \"no kernel image\" on CUDA API call to cudaLaunchKernel.
=========     Host Frame: [0x333] in /lib/x86_64-linux-gnu/libcuda.so.1
=========     Host Frame:kvshard::gpu::LaunchGatherRows [0x1] in /bundle/bin/gpu_gather_test
=========
========= ERROR SUMMARY: 1 error"
case_ other_nccl_error 1 "cudaErrorInvalidValue" 1 "========= Program hit cudaErrorInvalidValue (error 1) due to \"invalid argument\" on CUDA API call to cudaMemcpyAsync.
=========     Host Frame:ncclSend [0x1] in /usr/lib/x86_64-linux-gnu/libnccl.so.2
=========
========= ERROR SUMMARY: 1 error"
case_ crash 1 "exited 139 with no failed test and no sanitizer error" 139 "========= ERROR SUMMARY: 0 errors"
case_ clean 0 "0 errors" 0 "========= ERROR SUMMARY: 0 errors"
echo "sanitizer_report_test: $pass passed, $fail failed"
((fail == 0))
