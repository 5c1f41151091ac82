"""--steps is a training run's total (as max_steps in the trainers users
know), so the same command relaunched after a crash ends at the same step:
for fxcpp train-dp and train-pipeline (1F1B) under `fxcpp launch --nproc 2`,

- 3 steps with --checkpoint print steps 1-3, the checkpoint at step 3;
- the same with --steps 6 --resume prints exactly steps 4-6, the checkpoint
  at step 6;
- that command again does nothing and says so in one line, exit status 0.

usage: python3 check_training_steps.py FXCPP OUT_DIR
"""
import re
import shutil
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
import make_training_data  # noqa: E402
from check_training_cli import run  # noqa: E402


def steps(text):
    return [int(s) for s in re.findall(r"^step (\d+): loss ", text, re.M)]


def checkpoint_step(ck):
    with open(ck + "/step") as f:
        return int(f.read())


def main():
    fxcpp, out = sys.argv[1], sys.argv[2]
    shutil.rmtree(out, ignore_errors=True)
    make_training_data.write(out)
    for command in ("train-dp", "train-pipeline"):
        ck = "%s/%s_checkpoint" % (out, command)
        same = [fxcpp, "launch", "--nproc", "2", "--", "fxcpp", command, out + "/net.pt", "--data", out + "/data.pt",
                "--batch", "16", "--checkpoint", ck, "--steps"]
        text = run(same + ["3"])
        if steps(text) != [1, 2, 3] or checkpoint_step(ck) != 3:
            sys.exit("%s --steps 3: steps %s, checkpoint at %d\n%s" % (command, steps(text), checkpoint_step(ck), text))
        text = run(same + ["6", "--resume"])
        if "resumed after step 3" not in text or steps(text) != [4, 5, 6] or checkpoint_step(ck) != 6:
            sys.exit("%s --steps 6 --resume: steps %s, checkpoint at %d\n%s" % (command, steps(text), checkpoint_step(ck), text))
        text = run(same + ["6", "--resume"])
        want = "%s: nothing to do: %s holds step 6 and --steps 6 is the run's total\n" % (command, ck)
        if text != want or checkpoint_step(ck) != 6:
            sys.exit("%s relaunched when finished:\n%s\nexpected:\n%s" % (command, text, want))
    print("training steps are the run's total: ok")


if __name__ == "__main__":
    main()
