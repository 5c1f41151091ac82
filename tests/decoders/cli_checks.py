"""The counting the decoders' command-line checks share (check_generate_cli.py, check_gguf_llama_cpp.py,
check_weight_only_cli.py): check(cond, what) counts, and prints what failed; finish() prints ctest's
"N passed, M failed" line and exits 1 if anything failed."""
import sys

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAILED:", what)


def finish():
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)
