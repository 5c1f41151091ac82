#!/usr/bin/python3
"""flip_record_byte.py IN OUT: writes OUT, a copy of the zip archive IN (an
fxcpp .fx or a TorchScript .pt) with one byte changed in the middle of its
largest stored tensor record (extra/fxdata/N or data/N); prints that record's
name. The zip directory, and so the record's CRC-32, is left as it was: what a
bit flip on disk or in transfer does."""
import sys
import zipfile

src, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as z:
    tensors = [i for i in z.infolist()
               if i.compress_type == zipfile.ZIP_STORED and ("/fxdata/" in i.filename or "/data/" in i.filename)]
record = max(tensors, key=lambda i: i.file_size)
data = bytearray(open(src, "rb").read())
h = record.header_offset
name_len = int.from_bytes(data[h + 26:h + 28], "little")
extra_len = int.from_bytes(data[h + 28:h + 30], "little")
data[h + 30 + name_len + extra_len + record.file_size // 2] ^= 0x01
open(dst, "wb").write(bytes(data))
print(record.filename)
