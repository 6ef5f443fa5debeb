#!/usr/bin/env python3
"""Lists the CUDA architectures embedded in an ELF file's .nv_fatbin section, one per line ("sm_90 elf",
"sm_90 ptx"), sorted and unique; exit 1 when the file has no fatbin. For hosts without cuobjdump; the fatbin
container is read by its public layout (16-byte container header, then entries with a kind and an arch)."""
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
KINDS = {1: "ptx", 2: "elf"}


def section(data, name):
    """Returns the bytes of section `name` of a 64-bit little-endian ELF file, or None."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not a 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(i):
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
    names_off = header(shstrndx)[4]
    for i in range(shnum):
        h = header(i)
        end = data.index(b"\0", names_off + h[0])
        if data[names_off + h[0]:end].decode() == name:
            return data[h[4]:h[4] + h[5]]
    return None


def archs(fatbin):
    """Yields (kind, arch) for every entry of every fatbin container in the section."""
    pos = 0
    while pos + 16 <= len(fatbin):
        magic, _, hsize, fsize = struct.unpack_from("<IHHQ", fatbin, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # containers are 8-byte aligned; skip padding
            continue
        entry, end = pos + hsize, pos + hsize + fsize
        while entry + 32 <= end:
            kind, _, ehsize, size = struct.unpack_from("<HHIQ", fatbin, entry)
            arch, = struct.unpack_from("<I", fatbin, entry + 28)
            yield KINDS.get(kind, "kind%d" % kind), arch
            entry += ehsize + size
        pos = end


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: cuda_archs.py ELF_FILE")
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    fatbin = section(data, ".nv_fatbin")
    if not fatbin:
        print("cuda_archs: no .nv_fatbin section in " + sys.argv[1], file=sys.stderr)
        sys.exit(1)
    for kind, arch in sorted(set(archs(fatbin)), key=lambda ka: (ka[1], ka[0])):
        print("sm_%d %s" % (arch, kind))


if __name__ == "__main__":
    main()
