"""Up-to-date stamps of the files the test exporters write (export_models.py,
export_families.py): a stamp counts when it is newer than the scripts that
wrote it and was written under the same CPU kernel settings. The reference
outputs saved beside a model depend on the CPU's kernels, so files exported
with oneDNN held at AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 make test) are exported
again for a plain run, and the other way round."""
import os

ENV_VARS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")


def cpu_env():
    """The kernel settings of this process, as one line."""
    return ";".join("%s=%s" % (v, os.environ.get(v, "")) for v in ENV_VARS)


def up_to_date(stamp, *sources):
    """Whether `stamp` is newer than every file of `sources` and was marked under this cpu_env()."""
    if not os.path.exists(stamp) or not os.path.exists(stamp + ".env"):
        return False
    if os.path.getmtime(stamp) <= max(os.path.getmtime(s) for s in sources):
        return False
    with open(stamp + ".env") as f:
        return f.read() == cpu_env()


def mark(stamp):
    """Records this cpu_env() beside `stamp` (after the export wrote it)."""
    with open(stamp + ".env", "w") as f:
        f.write(cpu_env())
