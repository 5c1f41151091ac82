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
