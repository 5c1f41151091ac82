# Constant folding and normalization on a real model: resnet50 exported by
# tests/import/tests.cmake's fixture (group 1: "resnet50 vgg11"). The plain
# test_passes program skips this test when the model file is missing.
add_test(NAME passes_foldnorm_models COMMAND test_passes --gtest_filter=FoldNormModels.*)
set_tests_properties(passes_foldnorm_models PROPERTIES FIXTURES_REQUIRED fx_models_1 TIMEOUT 600
                     ENVIRONMENT "OMP_NUM_THREADS=1")
