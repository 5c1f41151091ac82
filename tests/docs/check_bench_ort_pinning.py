#!/usr/bin/python3
"""scripts/bench_ort.py pins both processes of a 1-thread row to one CPU (--cpu; compare_layers_ort.py too):
the default is the first CPU this process may run on, -1 pins nothing; a child started with pin(c) runs on c
alone, with pin(None) where its parent may; the table says where a run pinned its processes, and a run saved
before the field says nothing."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from bench_ort import one_thread_cpu, pin, pinned_note  # noqa: E402

allowed = os.sched_getaffinity(0)
assert one_thread_cpu(None) == min(allowed), one_thread_cpu(None)
assert one_thread_cpu(-1) is None
assert one_thread_cpu(5) == 5


def child_cpus(cpu):
    out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                         capture_output=True, text=True, check=True, preexec_fn=pin(cpu)).stdout
    return out.strip()


last = max(allowed)
assert child_cpus(last) == str([last]), child_cpus(last)
assert child_cpus(None) == str(sorted(allowed)), child_cpus(None)
assert pinned_note({"one_thread_cpu": 1}) == (" (at 1 thread both pinned to CPU 1: two vCPUs can run at different "
                                              "speeds)")
assert pinned_note({"one_thread_cpu": None}) == "" and pinned_note({}) == ""
print("bench_ort_pinning ok")
