# Extra ctest entries of tests/import: torchvision models exported by Python
# (python/export_models.py, Debian's python3 with torch and torchvision) and
# checked by tests/import/models/check_models.cpp against torch.fx and eager
# PyTorch. A few models per entry so they run in parallel; each group's
# export is a fixture of its check.
set(FX_PYTHON /usr/bin/python3)

fx_executable(check_models SOURCES ${FX_SRC}/tests/import/models/check_models.cpp LIBS fxcpp_import)
set_target_properties(check_models PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${FX_BIN}/tests)

set(FX_MODEL_GROUPS
  "resnet18 fx_resnet18 alexnet"
  "resnet50 vgg11"
  "mobilenet_v2 mobilenet_v3_small squeezenet1_0"
  "densenet121"
  "efficientnet_b0 shufflenet_v2_x1_0"
  "vit_b_16")
set(FX_MODEL_ROWS)
set(i 0)
foreach(group ${FX_MODEL_GROUPS})
  separate_arguments(models UNIX_COMMAND "${group}")
  add_test(NAME import_models_export_${i}
           COMMAND ${FX_PYTHON} ${FX_SRC}/python/export_models.py --out ${FX_MODELS_DIR} ${models})
  set_tests_properties(import_models_export_${i} PROPERTIES FIXTURES_SETUP fx_models_${i} TIMEOUT 900
                       ENVIRONMENT "OMP_NUM_THREADS=1")
  add_test(NAME import_models_${i} COMMAND check_models ${FX_MODELS_DIR} ${models})
  set_tests_properties(import_models_${i} PROPERTIES FIXTURES_REQUIRED fx_models_${i} TIMEOUT 900
                       ENVIRONMENT "OMP_NUM_THREADS=1")
  list(APPEND FX_MODEL_TESTS import_models_${i})
  math(EXPR i "${i} + 1")
endforeach()
# The coverage table of all models, in one piece (rows written by the checks).
add_test(NAME import_models_table
         COMMAND ${FX_PYTHON} ${FX_SRC}/python/export_models.py --table --out ${FX_MODELS_DIR})
set_tests_properties(import_models_table PROPERTIES DEPENDS "${FX_MODEL_TESTS}")

# Model families of issue 14 (segmentation, detection, video, quantized int8,
# sequence models, classifiers with auxiliary outputs, scripted control flow
# and structures), exported by python/export_families.py with their inputs and
# eager outputs, imported and compared whole by
# tests/import/families/check_families.cpp. Each case's outcome today (pass,
# or the error text) is in tests/import/families/expected.txt; a check fails
# when an outcome differs from it. `ctest -R families` runs them.
fx_executable(check_families SOURCES ${FX_SRC}/tests/import/families/check_families.cpp LIBS fxcpp_import)
set_target_properties(check_families PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${FX_BIN}/tests)
set(FX_FAMILIES_DIR ${FX_BIN}/families)
set(FX_FAMILY_GROUPS
  "fcn_resnet50 deeplabv3_mobilenet_v3_large lraspp_mobilenet_v3_large"
  "fasterrcnn_mobilenet_v3_large_320_fpn retinanet_resnet50_fpn ssdlite320_mobilenet_v3_large"
  "r3d_18 mc3_18 quantized_resnet18 quantized_mobilenet_v2 raft_small"
  "googlenet inception_v3 swin_t"
  "lstm gru transformer_encoder multihead_attention gpt_block embedding_bag loop_over_length loop_to_list
   early_return structures list_input optional_args optional_default")
set(FX_FAMILY_TESTS)
set(i 0)
foreach(group ${FX_FAMILY_GROUPS})
  separate_arguments(cases UNIX_COMMAND "${group}")
  add_test(NAME import_families_export_${i}
           COMMAND ${FX_PYTHON} ${FX_SRC}/python/export_families.py --out ${FX_FAMILIES_DIR} ${cases})
  set_tests_properties(import_families_export_${i} PROPERTIES FIXTURES_SETUP fx_families_${i} TIMEOUT 600
                       ENVIRONMENT "OMP_NUM_THREADS=1" LABELS families)
  add_test(NAME import_families_${i}
           COMMAND check_families ${FX_SRC}/tests/import/families/expected.txt ${FX_FAMILIES_DIR} ${cases})
  set_tests_properties(import_families_${i} PROPERTIES FIXTURES_REQUIRED fx_families_${i} TIMEOUT 600
                       ENVIRONMENT "OMP_NUM_THREADS=1" LABELS families)
  list(APPEND FX_FAMILY_TESTS import_families_${i})
  math(EXPR i "${i} + 1")
endforeach()
# The coverage table of all families, in one piece (rows written by the checks).
add_test(NAME import_families_table
         COMMAND ${FX_PYTHON} ${FX_SRC}/python/export_families.py --table --out ${FX_FAMILIES_DIR})
set_tests_properties(import_families_table PROPERTIES DEPENDS "${FX_FAMILY_TESTS}" LABELS families)
# Faster R-CNN optimised on the command line: its control flow depends on the
# data (how many boxes nms keeps), so shapes come from one real run instead
# of meta tensors; the detections equal eager's.
add_test(NAME import_families_detection_optimized
         COMMAND sh -c "L=$(sed -n 's/^library //p' \"$1.case.txt\") && \"$0\" run \"$1.pt\" -i \"$1.input.pt\" --load-library \"$L\" --optimize -o \"$1.optimized.pt\" >/dev/null 2>&1 && ${FX_PYTHON} \"$2\" \"$1.output.pt\" \"$1.optimized.pt\" 1e-4"
                 $<TARGET_FILE:fxcpp_cli> ${FX_FAMILIES_DIR}/fasterrcnn_mobilenet_v3_large_320_fpn.script
                 ${FX_SRC}/tests/cli/compare_outputs.py)
set_tests_properties(import_families_detection_optimized PROPERTIES FIXTURES_REQUIRED fx_families_1 TIMEOUT 600
                     ENVIRONMENT "OMP_NUM_THREADS=1" LABELS families PASS_REGULAR_EXPRESSION "within tolerance")

# torch.nn's transformer layers written out by the importer (issue 68):
# tests/import/transformers/make_transformers.py scripts and traces them
# (seeded, with inputs and eager outputs); check_transformers imports each,
# asserts no transformer call_module is left, compares with eager (eval,
# optimize_for_inference with oneDNN linears, train mode) within 1e-5, and
# that an int key padding mask fails with one line naming the module.
fx_executable(check_transformers SOURCES ${FX_SRC}/tests/import/transformers/check_transformers.cpp LIBS fxcpp)
set_target_properties(check_transformers PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${FX_BIN}/tests)
set(FX_TRANSFORMER_CASES encoder_script encoder_trace encoder_trace_fast encoder_padding_script layer_norm_first_script
    mha_masks_script mha_seq_first_script mha_unbatched_script decoder_layer_script decoder_layer_trace_fast decoder_script
    error_int_padding_script)
add_test(NAME import_transformers_export
         COMMAND ${FX_PYTHON} ${FX_SRC}/tests/import/transformers/make_transformers.py --out ${FX_BIN}/transformers)
set_tests_properties(import_transformers_export PROPERTIES FIXTURES_SETUP fx_transformers TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
add_test(NAME import_transformers COMMAND check_transformers ${FX_BIN}/transformers ${FX_TRANSFORMER_CASES})
set_tests_properties(import_transformers PROPERTIES FIXTURES_REQUIRED fx_transformers TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")
