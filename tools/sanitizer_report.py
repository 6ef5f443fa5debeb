#!/usr/bin/env python3
"""Reads one test binary's compute-sanitizer log (run_all.sh under KVSHARD_SANITIZE) and decides whether the run
failed on the sanitizer's account; writes a JUnit XML case for the verdict, so a sanitizer failure counts as a failed
test in run_all.sh's summary (it used to print "0 failed" while exiting 1).

  sanitizer_report.py NAME LOG EXIT_CODE OUT_XML

Every error block of the log ("========= <error line>" up to its blank "=========" line) is an error, except the
one documented suppression below; the verdict fails when any error is left, or when the binary exited nonzero
without a test failure or a sanitizer error to explain it (a crash). Prints one line: the errors, the suppressed
ones and why.

The suppression (narrow on purpose: kvshard's own kernels and API calls are never suppressed):
  NCCL probes which of its kernels the device can run: at init it calls cudaFuncGetAttributes on kernels of
  architectures the GPU lacks, and the runtime answers cudaErrorNoKernelImageForDevice, which NCCL expects and
  handles. An error block is suppressed only when its error is cudaErrorNoKernelImageForDevice on an API call AND
  the first host frame outside the CUDA runtime is inside libnccl.
"""
import re
import sys
from xml.sax.saxutils import escape

ERROR_START = re.compile(
    r"^========= (?!\s*$)(?!ERROR SUMMARY)(?!COMPUTE-SANITIZER)(?!Target application returned)(?!\s+)(.*)$")
SUMMARY = re.compile(r"^========= ERROR SUMMARY: (\d+) errors?")
HOST_FRAME = re.compile(r"^=========\s+Host Frame:(.*)$")
RUNTIME_LIBS = ("libcudart", "libcuda.so", "cudart", "cudaFuncGetAttributes")


def blocks(lines):
    """The error blocks: (first line, [frame lines])."""
    current = None
    for line in lines:
        line = line.rstrip("\n")
        if SUMMARY.match(line):
            break
        if current is not None:
            if line.strip() == "=========":
                yield current
                current = None
            elif line.startswith("========="):
                current[1].append(line)
            continue
        m = ERROR_START.match(line)
        if m:
            current = (m.group(1), [])
    if current is not None:
        yield current


def suppressed(head, frames):
    if "cudaErrorNoKernelImageForDevice" not in head or "API call" not in head:
        return False
    for f in frames:
        m = HOST_FRAME.match(f)
        if not m:
            continue
        where = m.group(1)
        if any(lib in where for lib in RUNTIME_LIBS):
            continue
        return "libnccl" in where
    return False


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    name, log, exit_code, out_xml = argv[1], argv[2], int(argv[3]), argv[4]
    with open(log, errors="replace") as f:
        lines = f.readlines()
    found = list(blocks(lines))
    kept = [b for b in found if not suppressed(*b)]
    summary = next((int(m.group(1)) for m in map(SUMMARY.match, lines) if m), None)
    test_failed = any(re.match(r"^\[ *FAILED *\]", l) for l in lines)
    why = ""
    if kept:
        why = f"{len(kept)} compute-sanitizer error(s), first: {kept[0][0].strip()}"
    elif exit_code != 0 and not test_failed and len(found) == 0:
        why = f"exited {exit_code} with no failed test and no sanitizer error (a crash?)"
    note = f"{len(found) - len(kept)} suppressed (NCCL's kernel-image probes)" if len(found) > len(kept) else ""
    print(f"sanitizer: {name}: {len(kept)} errors" + (f", {note}" if note else "") +
          (f" (ERROR SUMMARY {summary})" if summary is not None else "") + (f": FAILED: {why}" if why else ""))
    with open(out_xml, "w") as f:
        f.write('<testsuites><testsuite name="Sanitizer">')
        case = f'<testcase classname="Sanitizer" name="{escape(name)}"'
        f.write(f'{case}><failure message="{escape(why, {chr(34): "&quot;"})}"/></testcase>' if why else f"{case}/>")
        f.write("</testsuite></testsuites>\n")
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
