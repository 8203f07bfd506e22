"""The machine's floor for bench/pipelines.sh: ecCodes decoding every GRIB message of a file into
doubles, nothing else (the C API through ctypes; one buffer reused). Prints the message count.

Usage: python decode.py LIBECCODES FILE.grib
"""

import ctypes
import mmap
import sys

import numpy as np


def main():
    ec = ctypes.CDLL(sys.argv[1])
    ec.codes_handle_new_from_message.restype = ctypes.c_void_p
    ec.codes_handle_new_from_message.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    ec.codes_get_size.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)]
    ec.codes_get_double_array.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    ec.codes_handle_delete.argtypes = [ctypes.c_void_p]
    with open(sys.argv[2], "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    buf = np.frombuffer(m, dtype=np.uint8)
    addr = buf.ctypes.data
    pos, count, out = 0, 0, None
    while True:
        pos = m.find(b"GRIB", pos)
        if pos < 0:
            break
        length = int.from_bytes(m[pos + 8:pos + 16], "big")  # GRIB2 section 0
        h = ec.codes_handle_new_from_message(None, addr + pos, length)
        if not h:
            sys.exit("ecCodes: cannot read the message at %d" % pos)
        n = ctypes.c_size_t()
        ec.codes_get_size(h, b"values", ctypes.byref(n))
        if out is None or out.size != n.value:
            out = np.empty(n.value, dtype=np.float64)
        if ec.codes_get_double_array(h, b"values", out.ctypes.data, ctypes.byref(n)) != 0:
            sys.exit("ecCodes: cannot decode the message at %d" % pos)
        ec.codes_handle_delete(h)
        count += 1
        pos += length
    del buf
    print(count)


if __name__ == "__main__":
    main()
