#!/usr/bin/env bash
# Packs this machine's `perf` with the libraries it needs beyond the C and C++ runtimes into a tarball, for GPU hosts
# that have no perf (the device tool's machines): carry it, then there
#   tar -C /tmp -xJf perfkit.tar.xz && P="env LD_LIBRARY_PATH=/tmp/perfkit/lib /tmp/perfkit/perf"
#   $P record -e cpu-clock -F 1999 --call-graph dwarf,16384 -o /tmp/p.data -- .bundle/bin/kvshard replay ...
#   $P script -i /tmp/p.data -F tid,ip,sym > /tmp/p.txt && python3 /tmp/perfkit/perf_threads.py /tmp/p.txt
# (docs/PERFORMANCE.md, issue 27's seventeenth round).
#   tools/bench/perf_kit.sh OUT.tar.xz
set -euo pipefail
out=${1:?usage: tools/bench/perf_kit.sh OUT.tar.xz}
perf=$(command -v perf) || { echo "kvshard: error: no perf here (Debian: linux-perf)" >&2; exit 2; }
kit=$(mktemp -d)/perfkit
mkdir -p "$kit/lib"
cp "$(readlink -f "$perf")" "$kit/perf"
for lib in $(ldd "$kit/perf" | awk '$3 ~ /^\// {print $3}'); do
  case $(basename "$lib") in
    libc.so.* | libm.so.* | libstdc++.so.* | libgcc_s.so.*) ;;  # the host's own, newer ones
    *) cp -L "$lib" "$kit/lib/" ;;
  esac
done
cp "$(dirname "$0")/perf_threads.py" "$kit/"
LD_LIBRARY_PATH="$kit/lib" "$kit/perf" --version >&2
tar -C "$(dirname "$kit")" -cJf "$out" perfkit
rm -rf "$(dirname "$kit")"
echo "packed: $out ($(du -h "$out" | cut -f1))" >&2
