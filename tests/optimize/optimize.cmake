# optimize_for_inference on torchvision models exported by
# tests/import/tests.cmake's fixtures (groups: 0 resnet18, 1 resnet50,
# 2 mobilenet_v2 / mobilenet_v3_small, 4 efficientnet_b0, 5 vit_b_16).
# The plain test_optimize program skips these tests when the files are missing.
foreach(pair "resnet18 0" "resnet50 1" "mobilenet_v2 2" "mobilenet_v3_small 2" "efficientnet_b0 4" "vit_b_16 5")
  separate_arguments(p UNIX_COMMAND "${pair}")
  list(GET p 0 model)
  list(GET p 1 group)
  add_test(NAME optimize_models_${model} COMMAND test_optimize --gtest_filter=OptimizeModels.${model})
  set_tests_properties(optimize_models_${model} PROPERTIES FIXTURES_REQUIRED fx_models_${group} TIMEOUT 600
                       ENVIRONMENT "OMP_NUM_THREADS=1")
endforeach()
