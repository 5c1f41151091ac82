"""The training commands end to end, on files a PyTorch user writes (a
torch.jit.script model, data saved with plain torch.save((inputs, labels))):

- fxcpp train-dp under `fxcpp launch --nproc 2`: every step's loss equals one
  process training on the whole batch (1e-5); a run stopped after 2 steps with
  --checkpoint and resumed with --steps 4 --resume prints the same losses for steps 3
  and 4 as the run that never stopped;
- fxcpp train-pipeline, 2 stages 1F1B and 3 stages GPipe: every step's loss
  equals one process accumulating the same microbatches (1e-5); 2 stages
  stopped after 2 steps with --checkpoint (each rank its stage) and resumed
  print the same losses for steps 3 and 4 as the run that never stopped.

usage: python3 check_training_cli.py FXCPP OUT_DIR
"""
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
import make_training_data  # noqa: E402


def run(args):
    env = dict(os.environ, OMP_NUM_THREADS="1", FXCPP_NO_PROGRESS="1")
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=120)
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(args), p.stdout))
    return p.stdout


def losses(text):
    found = {int(s): float(l) for s, l in re.findall(r"^step (\d+): loss ([0-9.]+), [0-9.e+-]+ samples/s$", text, re.M)}
    if not found:
        sys.exit("no loss lines in:\n" + text)
    return found


def same(a, b, what, tol=1e-5):
    if sorted(a) != sorted(b):
        sys.exit("%s: steps %s vs %s" % (what, sorted(a), sorted(b)))
    for s in a:
        if abs(a[s] - b[s]) > tol * max(1.0, abs(b[s])):
            sys.exit("%s: step %d loss %.6f vs %.6f" % (what, s, a[s], b[s]))


def main():
    fxcpp, out = sys.argv[1], sys.argv[2]
    shutil.rmtree(out, ignore_errors=True)
    make_training_data.write(out)
    model, data = out + "/net.pt", out + "/data.pt"
    common = ["--data", data, "--batch", "16", "--steps", "4"]

    one = run([fxcpp, "train-dp", model] + common)
    two = run([fxcpp, "launch", "--nproc", "2", "--", "fxcpp", "train-dp", model] + common)
    if "train-dp: %s on 2 ranks, batch 16 (8 per rank), sgd (lr 0.01, momentum 0.9), 1 gradient bucket\n" % model not in two:
        sys.exit("no heading:\n" + two)
    if not re.search(r"^gradient all-reduce: [0-9.e+-]+ ms per step, [0-9.e+-]+ ms of it while backward ran", two, re.M):
        sys.exit("no all-reduce line:\n" + two)
    same(losses(two), losses(one), "train-dp on 2 ranks vs 1 process")

    ck = out + "/checkpoint"
    first = run([fxcpp, "launch", "--nproc", "2", "--", "fxcpp", "train-dp", model, "--data", data, "--batch", "16",
                 "--steps", "2", "--checkpoint", ck])
    resumed = run([fxcpp, "launch", "--nproc", "2", "--", "fxcpp", "train-dp", model, "--data", data, "--batch", "16",
                   "--steps", "4", "--checkpoint", ck, "--resume"])
    if "resumed after step 2" not in resumed:
        sys.exit("not resumed:\n" + resumed)
    straight = losses(two)
    if losses(first) != {1: straight[1], 2: straight[2]} or losses(resumed) != {3: straight[3], 4: straight[4]}:
        sys.exit("the resumed run left the loss curve:\n%s\n%s\n%s" % (two, first, resumed))

    pipeline = ["--microbatches", "4"] + common
    alone = losses(run([fxcpp, "train-pipeline", model] + pipeline))
    piped = {}
    for stages, schedule in (("2", "1f1b"), ("3", "gpipe")):
        text = run([fxcpp, "launch", "--nproc", stages, "--", "fxcpp", "train-pipeline", model, "--schedule", schedule]
                   + pipeline)
        if not re.search(r"^throughput: [0-9.]+ samples/s over 3 steps after the first", text, re.M):
            sys.exit("no throughput line:\n" + text)
        same(losses(text), alone, "train-pipeline %s stages %s vs 1 process" % (stages, schedule))
        piped[stages] = losses(text)

    ck = out + "/pipeline_checkpoint"
    until = ["launch", "--nproc", "2", "--", "fxcpp", "train-pipeline", model, "--microbatches", "4", "--data", data,
             "--batch", "16", "--checkpoint", ck, "--steps"]
    first = run([fxcpp] + until + ["2"])
    resumed = run([fxcpp] + until + ["4", "--resume"])
    if "resumed after step 2" not in resumed or not os.path.exists(ck + "/step-4/model_1.fx"):
        sys.exit("not resumed:\n" + resumed)
    straight = piped["2"]
    if losses(first) != {1: straight[1], 2: straight[2]} or losses(resumed) != {3: straight[3], 4: straight[4]}:
        sys.exit("the resumed pipeline left the loss curve:\n%s\n%s" % (first, resumed))
    print("training command line: ok")


if __name__ == "__main__":
    main()
