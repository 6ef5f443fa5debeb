# Splits a command's wall time with tools/bench/exit_phases.c (LD_PRELOAD): start-up (exec and loading), until the
# last line of standard output (the work, with whatever the program tears down before it prints), the exit handlers
# (the CUDA runtime's among them), and the kernel's cleanup until the parent's wait returns. All CLOCK_MONOTONIC; a
# phase of -0.000 is the pipe's delay in handing over the last line. The command's last output line follows on a line
# of its own.
#   python3 tools/bench/exit_phases.py /tmp/exit_phases.so COMMAND...
import os, re, subprocess, sys, tempfile, time

shim, cmd = sys.argv[1], sys.argv[2:]
env = dict(os.environ, LD_PRELOAD=shim)
start = time.monotonic()
with tempfile.TemporaryFile(mode="w+") as err_file:  # a file, not a pipe: a command that writes much there never blocks
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err_file, env=env, text=True)
    last_line = start
    out = []
    for line in p.stdout:
        last_line = time.monotonic()
        out.append(line.rstrip())
    p.wait()
    done = time.monotonic()
    err_file.seek(0)
    err = err_file.read()
m = re.search(r"exit_phases: loaded ([0-9.]+) handlers_done ([0-9.]+)", err)
if not m:
    sys.exit(f"exit_phases: no times from the shim (exit {p.returncode}): {err.strip()[-300:]}")
loaded, handlers = float(m.group(1)), float(m.group(2))
print(f"exit {p.returncode}: wall {done - start:.3f} s = start-up {loaded - start:.3f} + until the last output line "
      f"{last_line - loaded:.3f} + exit handlers {handlers - last_line:.3f} + kernel cleanup {done - handlers:.3f}")
print(out[-1] if out else "(no output)")
