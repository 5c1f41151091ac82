# fxcpp optimize --aot (issue 68): the file carries its generated kernels'
# compiled objects, and the deployment example runs them without a compiler
# (check_kernel_objects.py says what is checked).
add_test(NAME cli.kernel_objects
         COMMAND /usr/bin/python3 ${FX_SRC}/tests/cli/check_kernel_objects.py ${FX_CLI} $<TARGET_FILE:example_deploy>
                 ${FX_BIN}/cli_kernel_objects)
set_tests_properties(cli.kernel_objects PROPERTIES TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION
  "^wrote tail.aot.fx \\([0-9]+ bytes, 7 nodes, 0 storages, 1 kernel object for CPUs with [a-z0-9_ ]+\\)
aot file: \\[\\] True
same bytes as fxcpp run: True
plain file: \\['fxcpp::fused_kernel: no C\\+\\+ compiler \\(/nonexistent/g\\+\\+ does not run\\): fused kernels run as ATen operators'\\]
group-writable aot file: \\['tail.aot.fx: 1 kernel object not loaded \\(writable by its group \\(mode 0660\\)\\); kernels are made from their programs instead', 'fxcpp::fused_kernel: no C\\+\\+ compiler \\(/nonexistent/g\\+\\+ does not run\\): fused kernels run as ATen operators'\\]
plain.out.pt within 1e-5: True
shared.out.pt within 1e-5: True
cache entries: 0
$")
