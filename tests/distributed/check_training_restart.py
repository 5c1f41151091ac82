"""A training run that loses a rank and is restarted ends with the same model,
bit for bit, as a run never interrupted: for one command (train-dp, or
train-pipeline with a --schedule) under `fxcpp launch --nproc 2`, on a CNN
with batch norm and dropout (make_training_data.py's net_dropout.pt), --steps
6 --save-every 2:

- the run never interrupted;
- rank 1 SIGKILLed at the start of step 6 (`--max-restarts 1 ... --resume`):
  the group restarts, resumes after step 4 and ends at step 6 (step 6, not
  5: rank 0 writes the step file of step 4 before it joins step 5's
  all-reduce, but the launcher could stop it before that when rank 1 died
  at step 5);
- rank 0 SIGKILLed while saving step 4, when every rank's files of step 4 are
  written but the step file still names step 2: the restart resumes after
  step 2 (never from a half-written checkpoint) and ends at step 6.

Each ends with DIR/step 6 and one set of files, DIR/step-6, and no temporary
file left; every tensor of the final model files (parameters and batch norm's
buffers; train-pipeline: each rank's stage) and of the optimizer state equals
the uninterrupted run's exactly (the optimizer's: the bytes of each of its
tensors), so do the printed losses of the steps run again.

usage: python3 check_training_restart.py FXCPP OUT_DIR train-dp|train-pipeline [1f1b|gpipe]
"""
import os
import re
import shutil
import subprocess
import sys
import zipfile

sys.dont_write_bytecode = True  # nothing written into the source tree
import make_training_data  # noqa: E402

import torch  # noqa: E402


def run(args, env_extra):
    env = dict(os.environ, OMP_NUM_THREADS="1", FXCPP_NO_PROGRESS="1", **env_extra)
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=120)
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(args), p.stdout))
    return p.stdout


def losses(text):
    return {int(s): l for s, l in re.findall(r"^step (\d+): loss ([0-9.]+),", text, re.M)}


def tensors(path):
    """The parameters and buffers of an fx::save file (a TorchScript archive), by name."""
    return dict(torch.jit.load(path).state_dict())


def blobs(path):
    """The bytes of every tensor of a torch::save archive (the optimizer's state), sorted: torch::save keys
    libtorch's optimizer state by the parameters' addresses, so two equal states list their tensors in
    another order."""
    with zipfile.ZipFile(path) as z:
        return sorted(z.read(n) for n in z.namelist() if re.search(r"/data/\d+$", n))


def equal(a, b, what):
    if sorted(a) != sorted(b):
        sys.exit("%s: tensors %s vs %s" % (what, sorted(a), sorted(b)))
    for name in a:
        x, y = a[name], b[name]
        if x.dtype != y.dtype or x.shape != y.shape or \
                not torch.equal(x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8)):  # the bits
            sys.exit("%s: '%s' differs (largest difference %g)" % (what, name, (x.double() - y.double()).abs().max()))


def main():
    fxcpp, out, command = sys.argv[1], sys.argv[2], sys.argv[3]
    schedule = sys.argv[4:] and ["--schedule", sys.argv[4]] or []
    shutil.rmtree(out, ignore_errors=True)
    make_training_data.write(out)
    files = ["model.fx", "optimizer.pt"] if command == "train-dp" else \
        ["model_0.fx", "model_1.fx", "optimizer_0.pt", "optimizer_1.pt"]

    def train(ck, env_extra):
        return run([fxcpp, "launch", "--nproc", "2", "--max-restarts", "1", "--", "fxcpp", command, out + "/net_dropout.pt",
                    "--data", out + "/data.pt", "--batch", "16", "--steps", "6", "--save-every", "2", "--checkpoint", ck,
                    "--resume"] + schedule, env_extra)

    straight_ck = out + "/straight"
    straight = train(straight_ck, {})
    if "restarting" in straight or sorted(losses(straight)) != [1, 2, 3, 4, 5, 6]:
        sys.exit("the uninterrupted run:\n" + straight)
    for name, env_extra, resumed_after in (
            ("rank 1 killed at step 6", {"FXCPP_TEST_KILL_RANK": "1", "FXCPP_TEST_KILL_AT": "6"}, 4),
            ("rank 0 killed saving step 4", {"FXCPP_TEST_KILL_RANK": "0", "FXCPP_TEST_KILL_SAVING": "4"}, 2)):
        ck = "%s/killed_%d" % (out, resumed_after)
        text = train(ck, env_extra)
        what = "%s %s, %s" % (command, " ".join(schedule), name)
        # (Only a restarted attempt finds a checkpoint to resume from; the launcher's line is not matched: the
        # ranks' and the launcher's stderr lines can interleave.)
        if "resumed after step %d" % resumed_after not in text:
            sys.exit("%s: no restart resumed after step %d:\n%s" % (what, resumed_after, text))
        with open(ck + "/step") as f:
            if f.read() != "6\n":
                sys.exit("%s: the checkpoint is not at step 6" % what)
        left = sorted(os.listdir(ck))
        if left != ["step", "step-6"] or any(f.endswith(".tmp") for f in os.listdir(ck + "/step-6")):
            sys.exit("%s: the checkpoint holds %s, %s" % (what, left, sorted(os.listdir(ck + "/step-6"))))
        again = losses(text)
        for step, loss in losses(straight).items():
            if step in again and again[step] != loss:
                sys.exit("%s: step %d's loss %s, uninterrupted %s\n%s" % (what, step, again[step], loss, text))
        for f in files:
            if f.endswith(".fx"):
                equal(tensors("%s/step-6/%s" % (ck, f)), tensors("%s/step-6/%s" % (straight_ck, f)), what + ": " + f)
            elif blobs("%s/step-6/%s" % (ck, f)) != blobs("%s/step-6/%s" % (straight_ck, f)):
                sys.exit("%s: %s's tensors differ from the uninterrupted run's" % (what, f))
    print("%s %s restarted: the same model bit for bit" % (command, " ".join(schedule)))


if __name__ == "__main__":
    main()
