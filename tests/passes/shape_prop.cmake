# ShapeProp on imported torchvision models (tests/passes/shape_prop_test.cpp,
# suite ShapePropModels): resnet18 and mobilenet_v2 exported by the fixtures
# of tests/import/tests.cmake (groups 0 and 2 of FX_MODEL_GROUPS). In the
# plain gtest run those tests skip when the files are missing; this entry
# runs them after the export.
add_test(NAME shape_prop_models COMMAND test_passes --gtest_filter=ShapePropModels.*)
set_tests_properties(shape_prop_models PROPERTIES FIXTURES_REQUIRED "fx_models_0;fx_models_2" TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1" FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
