# Splits a command's wall time with tools/bench/exit_phases.c (LD_PRELOAD): start-up (exec and loading), until the
# last line of standard output (the work, with whatever the program tears down before it prints), the exit handlers
# (CUDA's context teardown), and the kernel's cleanup until the parent's wait returns. All CLOCK_MONOTONIC. The
# command's last output line follows on a line of its own.
#   python3 tools/bench/exit_phases.py /tmp/exit_phases.so COMMAND...
import os, re, subprocess, sys, time

shim, cmd = sys.argv[1], sys.argv[2:]
env = dict(os.environ, LD_PRELOAD=shim)
start = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
last_line = start
out = []
for line in p.stdout:
    last_line = time.monotonic()
    out.append(line.rstrip())
err = p.stderr.read()
p.wait()
done = time.monotonic()
m = re.search(r"exit_phases: loaded ([0-9.]+) handlers_done ([0-9.]+)", err)
if not m:
    sys.exit(f"exit_phases: no times from the shim (exit {p.returncode}): {err.strip()[-300:]}")
loaded, handlers = float(m.group(1)), float(m.group(2))
print(f"exit {p.returncode}: wall {done - start:.3f} s = start-up {loaded - start:.3f} + until the last output line "
      f"{last_line - loaded:.3f} + exit handlers {handlers - last_line:.3f} + kernel cleanup {done - handlers:.3f}")
print(out[-1] if out else "(no output)")
