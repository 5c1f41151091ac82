# test_distributed (the GoogleTest program of this folder) runs the fxcpp
# command line as child processes (launch, pipeline, data-parallel,
# pipeline-plan, pingpong): build it first. Its real-model tests read the
# exports of tests/import/tests.cmake (resnet18: group 0; the scripted
# transformer encoder: family group 4); the plain program skips them when
# the files are missing, these entries make sure they exist.
add_dependencies(test_distributed fxcpp_cli)
add_test(NAME distributed_models_resnet18 COMMAND test_distributed --gtest_filter=DistributedModels.resnet18)
set_tests_properties(distributed_models_resnet18 PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME distributed_models_transformer_encoder
         COMMAND test_distributed --gtest_filter=DistributedModels.transformer_encoder)
set_tests_properties(distributed_models_transformer_encoder PROPERTIES FIXTURES_REQUIRED fx_families_4 TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
# The training commands (train-dp, train-pipeline) under `fxcpp launch`, on a
# torch.jit.script model and data written by plain torch.save (Debian's python3).
add_test(NAME distributed.training_cli
         COMMAND /usr/bin/python3 ${FX_SRC}/tests/distributed/check_training_cli.py ${FX_CLI} ${FX_BIN}/training_cli)
set_tests_properties(distributed.training_cli PROPERTIES TIMEOUT 300 PASS_REGULAR_EXPRESSION "training command line: ok")
# --steps is the run's total: 3 steps with --checkpoint, then the same command with --steps 6 --resume runs
# steps 4-6, and once more does nothing and says so (train-dp, train-pipeline; 2 ranks each).
add_test(NAME distributed.training_steps_total
         COMMAND /usr/bin/python3 ${FX_SRC}/tests/distributed/check_training_steps.py ${FX_CLI} ${FX_BIN}/training_steps)
set_tests_properties(distributed.training_steps_total PROPERTIES TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "training steps are the run's total: ok")
# Labels outside the model's classes are refused when the data loads: one line naming the file, the first bad
# row and the number of classes, exit status 2 (make_training_data.py's bad_labels.pt: label 100 in row 37).
add_test(NAME distributed.training_data COMMAND /usr/bin/python3 ${FX_SRC}/tests/distributed/make_training_data.py
                                                 ${FX_BIN}/training_data)
set_tests_properties(distributed.training_data PROPERTIES FIXTURES_SETUP fx_training_data TIMEOUT 120)
foreach(command train-dp train-pipeline)
  add_test(NAME distributed.${command}_bad_labels
           COMMAND sh -c "out=$(\"$0\" launch --nproc 2 -- fxcpp $1 \"$2/net.pt\" --data \"$2/bad_labels.pt\" --batch 16 2>&1); s=$?; printf '%s\\n' \"$out\"; [ $s -eq 2 ] || echo fx-cli-bad"
                   ${FX_CLI} ${command} ${FX_BIN}/training_data)
  set_tests_properties(distributed.${command}_bad_labels PROPERTIES FIXTURES_REQUIRED fx_training_data TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "^fxcpp ${command}: [^\n]*/training_data/bad_labels.pt: row 37 has label 100, but the model has 10 classes \\(labels 0 to 9\\)\n$"
                       FAIL_REGULAR_EXPRESSION "fx-cli-bad")
endforeach()
# fxcpp launch --max-restarts N (torchrun's flag): a failed group is started again with the same command, one
# line per restart naming the rank, its exit and the count; the run's exit status is the last attempt's. (A
# semicolon would split a ctest regular expression: "." stands for it.)
add_test(NAME distributed.launch_max_restarts_last_status
         COMMAND sh -c "out=$(\"$0\" launch --nproc 2 --max-restarts 2 -- sh -c \"$1\" 2>&1); s=$?; printf '%s\\n' \"$out\"; [ $s -eq 3 ] || echo fx-cli-bad"
                 ${FX_CLI} "[ \"$RANK\" = 1 ] && exit 3; exec sleep 30")
set_tests_properties(distributed.launch_max_restarts_last_status PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION
                     "^fxcpp launch: rank 1 \\(pid [0-9]+\\) exited with status 3. restarting the group \\(restart 1 of 2\\)\nfxcpp launch: rank 1 \\(pid [0-9]+\\) exited with status 3. restarting the group \\(restart 2 of 2\\)\n$"
                     FAIL_REGULAR_EXPRESSION "fx-cli-bad")
# A run that loses a rank and is restarted (--max-restarts 1 --resume) ends with the same model, bit for bit, as
# one never interrupted: a CNN with batch norm and dropout, --steps 6 --save-every 2, rank 1 killed at step 6 and
# rank 0 killed while saving step 4 (its files written, the step file not yet); the checkpoint holds the
# parameters, the optimizer, the data position and every rank's random generator (check_training_restart.py).
foreach(config "train-dp" "train-pipeline_1f1b" "train-pipeline_gpipe")
  string(REPLACE "_" ";" config_args "${config}")
  add_test(NAME distributed.${config}_restart_same_model
           COMMAND /usr/bin/python3 ${FX_SRC}/tests/distributed/check_training_restart.py ${FX_CLI}
                   ${FX_BIN}/training_restart_${config} ${config_args})
  set_tests_properties(distributed.${config}_restart_same_model PROPERTIES TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "restarted: the same model bit for bit")
endforeach()
# train-dp with --save-every 1: rank 1 killed (SIGKILL) at the start of step 3 of the first attempt; the
# restarted group resumes from the checkpoint (step 1 or 2: rank 0 may be stopped while it writes step 2's)
# and ends at step 4, as --steps says, exit status 0.
add_test(NAME distributed.train-dp_restart_resumes
         COMMAND sh -c "rm -rf \"$2\" && \"$0\" launch --nproc 2 --max-restarts 1 -- fxcpp train-dp \"$1/net.pt\" --data \"$1/data.pt\" --batch 16 --steps 4 --checkpoint \"$2\" --save-every 1 --resume 2>&1; echo \"exit status $?, checkpoint at step $(cat \"$2/step\")\""
                 ${FX_CLI} ${FX_BIN}/training_data ${FX_BIN}/training_restart_checkpoint)
set_tests_properties(distributed.train-dp_restart_resumes PROPERTIES FIXTURES_REQUIRED fx_training_data TIMEOUT 60
                     ENVIRONMENT "FXCPP_TEST_KILL_RANK=1;FXCPP_TEST_KILL_AT=3;FXCPP_NO_PROGRESS=1" PASS_REGULAR_EXPRESSION
                     "\nstep 2: loss [^\n]*\n(fxcpp train-dp: rank 0: lost rank 1 [^\n]*\n)?fxcpp launch: rank 1 \\(pid [0-9]+\\) was killed by signal 9 \\(Killed\\). restarting the group \\(restart 1 of 1\\)\n(fxcpp train-dp: rank 0: lost rank 1 [^\n]*\n)?train-dp: [^\n]*, resumed after step [12]\n(step [234]: loss [^\n]*\n)+throughput: .*\ncheckpoint: [^\n]* \\(step 4\\)\nexit status 0, checkpoint at step 4\n$"
                     FAIL_REGULAR_EXPRESSION "restart 2|step 5")
