# Every example checks its own results (exit status 1 on a wrong value), so
# each one runs as a test, and so does `fxcpp demo`.
foreach(src ${FX_EXAMPLES})
  get_filename_component(name ${src} NAME_WE)
  add_test(NAME example.${name} COMMAND example_${name})
  set_tests_properties(example.${name} PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120)
endforeach()
add_test(NAME tool.demo COMMAND fxcpp_cli demo)
set_tests_properties(tool.demo PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1" TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "all results match eager libtorch")
