# fxcpp as a package (issue #11): installed into a temporary prefix and found
# with find_package (and pkg-config), and built from source with
# add_subdirectory; both build examples/consumer and run it on resnet18.
set(FX_PACKAGE_DIR ${FX_BIN}/package-test)
add_test(NAME package.install
         COMMAND ${CMAKE_COMMAND} -DFX_BIN=${FX_BIN} -DPREFIX=${FX_PACKAGE_DIR}/prefix -DMODE=install
                 -P ${FX_SRC}/tests/package/scripts/consumer.cmake)
set_tests_properties(package.install PROPERTIES FIXTURES_SETUP fx_package TIMEOUT 300)
foreach(mode find_package add_subdirectory)
  add_test(NAME package.${mode}
           COMMAND ${CMAKE_COMMAND} -DFX_SRC=${FX_SRC} -DFX_BIN=${FX_BIN} -DPREFIX=${FX_PACKAGE_DIR}/prefix
                   -DWORK=${FX_PACKAGE_DIR}/${mode} -DMODE=${mode} -DMODELS=${FX_MODELS_DIR}
                   -P ${FX_SRC}/tests/package/scripts/consumer.cmake)
  set_tests_properties(package.${mode} PROPERTIES FIXTURES_REQUIRED "fx_package;fx_models_0" TIMEOUT 1800
                       PASS_REGULAR_EXPRESSION "rewrote [1-9][0-9]* ReLU calls; outputs equal")
endforeach()
