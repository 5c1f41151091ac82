# Seeing the graph (issue 11): `fxcpp draw` and `fxcpp inspect --summary` on
# zoo models exported by the fixtures of tests/import/tests.cmake.
#  - draw_browser: the interactive page of resnet18 opened in real headless
#    Chromium (python/draw_browser_test.py): node count, a click shows the
#    node's details, zoom, search, heat map; also the README screenshot
#    build/docs/graph.png. Skipped (exit 77) only when chromium is missing.
#  - draw_summary_resnet50: totals against the published figures of
#    torchvision's resnet50 at 224x224 (25,557,032 parameters, 4.09 GMAC).
#  - bad arguments: one line, exit status 2 (fx_cli_bad_input, tests/cli/tests.cmake).
# The folder the drawings go to, made here: draw_svg_resnet18 and draw_wrong_input
# write into it whichever test runs first (draw_browser made it, so a run of
# them alone, or before it, found no folder).
file(MAKE_DIRECTORY ${FX_BIN}/draw)
add_test(NAME draw_browser
         COMMAND /usr/bin/python3 ${FX_SRC}/python/draw_browser_test.py --fxcpp $<TARGET_FILE:fxcpp_cli>
                 --model ${FX_MODELS_DIR}/resnet18.pt --input ${FX_MODELS_DIR}/resnet18.input.pt
                 --out ${FX_BIN}/draw --screenshot ${FX_BIN}/docs/graph.png)
set_tests_properties(draw_browser PROPERTIES FIXTURES_REQUIRED fx_models_0 SKIP_RETURN_CODE 77 TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1")

add_test(NAME draw_summary_resnet50
         COMMAND $<TARGET_FILE:fxcpp_cli> inspect ${FX_MODELS_DIR}/resnet50.pt --summary --shape 1x3x224x224)
set_tests_properties(draw_summary_resnet50 PROPERTIES FIXTURES_REQUIRED fx_models_1 TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "layer4_2_conv3 +Conv2d +\\[1, 2048, 7, 7\\] +1048576 +51380224 +102760448\n.*Total params: 25557032 \\(25.56 M\\)\nTrainable params: 25557032\nTotal MACs: 4089184256 \\(4.09 GMAC\\)")

add_test(NAME draw_svg_resnet18 COMMAND $<TARGET_FILE:fxcpp_cli> draw ${FX_MODELS_DIR}/resnet18.pt
         -o ${FX_BIN}/draw/resnet18.svg)
set_tests_properties(draw_svg_resnet18 PROPERTIES FIXTURES_REQUIRED fx_models_0 TIMEOUT 120
                     PASS_REGULAR_EXPRESSION "^wrote [^\n]*/draw/resnet18.svg: [0-9]+ nodes, [0-9]+ edges\n$")

fx_cli_bad_input(draw_unknown_format "fxcpp draw: out.png: unknown drawing format \\(expected .dot, .gv, .svg, .html or .htm\\)\n$"
                 draw ${FX_SRC}/README.md -o out.png)
fx_cli_bad_input(draw_missing_directory "fxcpp draw: /no/such/dir/g.svg: no such directory '/no/such/dir'\n$"
                 draw ${FX_SRC}/README.md -o /no/such/dir/g.svg)
fx_cli_bad_input(draw_no_value "fxcpp draw: -o needs a value\n$" draw ${FX_SRC}/README.md -o)
fx_cli_bad_input(draw_bad_runs "--runs expects a positive integer, got 'many'"
                 draw ${FX_SRC}/README.md --runs many)
fx_cli_run_fails(draw_wrong_input "fxcpp draw: [^\n]*resnet18.pt failed on [^\n]*alexnet.output.pt at node conv1 \\(call_module\\[target=conv1\\]\\): Expected 3D"
                 draw ${FX_MODELS_DIR}/resnet18.pt -o ${FX_BIN}/draw/wrong.svg
                 --input ${FX_MODELS_DIR}/alexnet.output.pt)
set_tests_properties(cli.draw_wrong_input PROPERTIES FIXTURES_REQUIRED fx_models_0)
# Without shapes: the parameters (as torchinfo without input_size).
add_test(NAME cli.summary_without_shapes_resnet18 COMMAND ${FX_CLI} inspect ${FX_MODELS_DIR}/resnet18.pt --summary)
set_tests_properties(cli.summary_without_shapes_resnet18 PROPERTIES FIXTURES_REQUIRED fx_models_0
                     PASS_REGULAR_EXPRESSION "\nfc +Linear +513000\n-+\nTotal params: 11689512 \\(11.69 M\\)\n")
fx_cli_bad_input(summary_bad_shape "fxcpp inspect: --shape expects sizes like 1x3x224x224, got '1x3xq'\n$"
                 inspect ${FX_MODELS_DIR}/resnet18.pt --summary --shape 1x3xq)
set_tests_properties(cli.summary_bad_shape PROPERTIES FIXTURES_REQUIRED fx_models_0)

# draw_kernel_browser: a fused kernel's C++ one click away in the page (issue 68), in headless Chromium
# (python/draw_kernel_browser_test.py); skipped (exit 77) without chromium or a C++ compiler.
if(TARGET fxcpp_python)
  add_test(NAME draw_kernel_browser
           COMMAND /usr/bin/python3 ${FX_SRC}/python/draw_kernel_browser_test.py --fxcpp $<TARGET_FILE:fxcpp_cli>
                   --python ${FX_BIN}/python --out ${FX_BIN}/draw)
  set_tests_properties(draw_kernel_browser PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")
endif()
