# Run-time control flow on the command line (issue 14): the files come from
# python/make_control_flow_cases.py into FX_BIN/control_flow_cases, shared
# with tests/import (the same flock and stamp as tests/import/cases.h).
set(FX_CF_CASES ${FX_BIN}/control_flow_cases)
fx_generated_cases(make_control_flow_cases make_control_flow_cases.py ${FX_CF_CASES} fx_cf_cases)

# Both branches of a data-dependent if, each equal to eager.
foreach(in input input2)
  add_test(NAME cli.run_data_if_${in}
           COMMAND sh -c "\"$0\" run \"$1/data_if.pt\" -i \"$1/data_if.$3.pt\" -o \"$1/data_if.$3.fxcpp.pt\" && /usr/bin/python3 \"$2\" \"$1/data_if.$4.pt\" \"$1/data_if.$3.fxcpp.pt\" 1e-5"
                   ${FX_CLI} ${FX_CF_CASES} ${FX_SRC}/tests/cli/compare_outputs.py ${in}
                   "$<IF:$<STREQUAL:${in},input>,output,output2>")
  set_tests_properties(cli.run_data_if_${in} PROPERTIES FIXTURES_REQUIRED fx_cf_cases
                       PASS_REGULAR_EXPRESSION "within tolerance")
endforeach()
# F.interpolate (torch's own rank checks; fxcpp run imports with its inputs as
# examples, so they fold) through the Interpreter.
add_test(NAME cli.run_interpolate_interpreter
         COMMAND sh -c "\"$0\" run \"$1/interpolate.pt\" -i \"$1/interpolate.input.pt\" --interpreter -o \"$1/interpolate.fxcpp.pt\" && /usr/bin/python3 \"$2\" \"$1/interpolate.output.pt\" \"$1/interpolate.fxcpp.pt\" 1e-5"
                 ${FX_CLI} ${FX_CF_CASES} ${FX_SRC}/tests/cli/compare_outputs.py)
set_tests_properties(cli.run_interpolate_interpreter PROPERTIES FIXTURES_REQUIRED fx_cf_cases
                     PASS_REGULAR_EXPRESSION "within tolerance")
# inspect shows each branch's table and code after the root's.
add_test(NAME cli.inspect_control_flow COMMAND ${FX_CLI} inspect ${FX_CF_CASES}/data_if.pt)
set_tests_properties(cli.inspect_control_flow PROPERTIES FIXTURES_REQUIRED fx_cf_cases
                     PASS_REGULAR_EXPRESSION "cond_0 = self.cond_0\\(bool_1, x\\).*\ncond_0.true_graph \\(true_graph_0\\), 4 nodes:\n.*call_module    lin .*\ncond_0.false_graph \\(false_graph_0\\), 3 nodes:\n.*aten::mul.Scalar")
# --specialize-shapes: the loop over x.size(0) unrolls for this input; same values.
add_test(NAME cli.run_specialize_shapes
         COMMAND sh -c "\"$0\" run \"$1/loop_over_length.pt\" -i \"$1/loop_over_length.input.pt\" --specialize-shapes -o \"$1/loop_over_length.specialized.pt\" && /usr/bin/python3 \"$2\" \"$1/loop_over_length.output.pt\" \"$1/loop_over_length.specialized.pt\" 1e-6"
                 ${FX_CLI} ${FX_CF_CASES} ${FX_SRC}/tests/cli/compare_outputs.py)
set_tests_properties(cli.run_specialize_shapes PROPERTIES FIXTURES_REQUIRED fx_cf_cases
                     PASS_REGULAR_EXPRESSION "within tolerance")
