# split_module on an exported torchvision resnet50: needs the model export
# fixture of tests/import/tests.cmake (group 1 exports resnet50). In the plain
# test_passes run the test skips itself when the model is absent.
add_test(NAME split_module_resnet50
         COMMAND test_passes --gtest_filter=SplitModuleModels.*)
set_tests_properties(split_module_resnet50 PROPERTIES FIXTURES_REQUIRED fx_models_1 TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
