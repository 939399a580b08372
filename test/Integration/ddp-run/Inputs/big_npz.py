# An .npz whose one array declares N float32 elements, every one zero: a
# small archive (deflate) that a reader must not inflate before it has
# compared the header's shape with what it expects (bounded-reads.test).
# With NAME "-", only the .npy header of such an array (to put before an
# endless stream).
import struct
import sys
import zipfile

path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % count
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
npy_header = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
if name == "-":
    with open(path, "wb") as f:
        f.write(npy_header)
    sys.exit(0)
with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1, allowZip64=True) as z:
    with z.open(name + ".npy", "w", force_zip64=True) as f:
        f.write(npy_header)
        chunk = bytes(1 << 24)
        left = 4 * count
        while left > 0:
            f.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
