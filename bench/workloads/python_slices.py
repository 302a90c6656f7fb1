"""A CPython target for the judge bench and udamon's judge_live test: sums a 100 MiB slice of a
512 MiB bytearray over and over (every byte, at a few hundred MiB/s), moving to the next slice
every SWITCH seconds.

usage: python_slices.py SECONDS [SWITCH]  (SWITCH defaults to 10)
  prints "ready" once the whole bytearray is resident, then runs for SECONDS and exits.
"""

import sys
import time

MiB = 1 << 20
SIZE, SLICE = 512 * MiB, 100 * MiB

seconds = float(sys.argv[1])
switch = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
buf = bytearray(SIZE)
# A write to every page, so that all of it is resident before the slices are read.
buf[:: 4096] = b"\x01" * (SIZE // 4096)
view = memoryview(buf)
print("ready", flush=True)
start = time.monotonic()
total = 0
while time.monotonic() - start < seconds:
    # Slices 0..4 cover the first 500 MiB, in turn.
    off = int((time.monotonic() - start) // switch) % 5 * SLICE
    total += sum(view[off : off + SLICE])
print("end", total)
