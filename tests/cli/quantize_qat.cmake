# fxcpp quantize --qat (issue 35) on the digits CNN of python/digits_fixture.py (fixture
# fx_digits): quantization-aware training on its training split (torch.save((inputs,
# labels))), one line per epoch, the per-node report of the int8 model, OUT.fx written and
# run by `fxcpp run`; the traced export trains too; refused inputs one line, exit 2.
set(FX_QAT_CLI_DIR ${FX_BIN}/cli_quantize_qat)
add_test(NAME cli.quantize_qat_digits
         COMMAND sh -c "mkdir -p \"$2\" && exec \"$0\" quantize \"$1/digits.script.pt\" --qat --train \"$1/digits.train_data.pt\" --epochs 2 --freeze-bn-after 1 --lr 0.001 -o \"$2/digits.qat.fx\" --report"
                 ${FX_CLI} ${FX_MODELS_DIR}/digits ${FX_QAT_CLI_DIR})
set_tests_properties(cli.quantize_qat_digits PROPERTIES FIXTURES_REQUIRED fx_digits FIXTURES_SETUP fx_digits_qat
                     TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION
                     "^quantization-aware training: 2 fused layers, 6 fake quantizers; 2 epochs of 1297 samples, batch 32, sgd \\(lr 0.001, momentum 0.9\\)\nepoch 1/2: loss [0-9.]+, train top-1 [0-9.]+%, [0-9]+ ms\nepoch 2/2: loss [0-9.]+, train top-1 [0-9.]+%, [0-9]+ ms \\(batch norm frozen\\)\nconv1  conv1  quantized  int8 oneDNN convolution \\(relu\\)\nconv2  conv2  quantized  int8 oneDNN convolution \\(relu\\)\n[^\n]*\n[^\n]*\nfc  fc  quantized  int8 oneDNN linear\n5 of 5 nodes quantized, 3 int8 kernels, quantization-aware training: 2 epochs \\(2594 samples\\)\n(note: int8 without VNNI[^\n]*\n)?wrote [^\n]*digits.qat.fx \\([0-9]+ bytes, [0-9]+ nodes, [0-9]+ storages\\)\n$")
add_test(NAME cli.quantize_qat_file_runs
         COMMAND ${FX_CLI} run ${FX_QAT_CLI_DIR}/digits.qat.fx --input ${FX_MODELS_DIR}/digits/digits.input.pt)
set_tests_properties(cli.quantize_qat_file_runs PROPERTIES FIXTURES_REQUIRED "fx_digits;fx_digits_qat" TIMEOUT 60
                     ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION "^tensor \\[64, 10\\] Float")
add_test(NAME cli.quantize_qat_traced
         COMMAND ${FX_CLI} quantize ${FX_MODELS_DIR}/digits/digits.trace.pt --qat --train
                 ${FX_MODELS_DIR}/digits/digits.train_data.pt --optimizer adam --lr 0.0001 --batch 64)
set_tests_properties(cli.quantize_qat_traced PROPERTIES FIXTURES_REQUIRED fx_digits TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION
                     "1 epoch of 1297 samples, batch 64, adam \\(lr 0.0001\\)\nepoch 1/1: [^\n]*\n5 of 5 nodes quantized, 3 int8 kernels, quantization-aware training: 1 epoch \\(1297 samples\\)\n")
fx_cli_quantize_refuses(quantize_qat_no_train "^fxcpp quantize: --qat needs --train DATA.pt: the \\(inputs, labels\\) to train on\n$"
                        quantize ${FX_MODELS_DIR}/digits/digits.script.pt --qat)
fx_cli_quantize_refuses(quantize_train_without_qat "^fxcpp quantize: --train is for quantization-aware training: add --qat\n$"
                        quantize ${FX_MODELS_DIR}/digits/digits.script.pt --train ${FX_MODELS_DIR}/digits/digits.train_data.pt)
fx_cli_quantize_refuses(quantize_qat_with_calibration
                        "^fxcpp quantize: --calibration is for post-training quantization: --qat measures ranges while it trains on --train\n$"
                        quantize ${FX_MODELS_DIR}/digits/digits.script.pt --qat --train ${FX_MODELS_DIR}/digits/digits.train_data.pt
                        --calibration ${FX_MODELS_DIR}/digits/digits.calib.pt)
fx_cli_quantize_refuses(quantize_qat_bad_data
                        "^fxcpp quantize: [^\n]*/digits.calib.pt does not hold \\(inputs, labels\\), two tensors \\(write it with torch.save\\(\\(inputs, labels\\)\\)\\)\n$"
                        quantize ${FX_MODELS_DIR}/digits/digits.script.pt --qat --train ${FX_MODELS_DIR}/digits/digits.calib.pt)
fx_cli_quantize_refuses(quantize_qat_already_quantized
                        "^fxcpp quantize: prepare_qat: the model is already quantized \\(node 'quantize_per_tensor' calls fxcpp::onednn_quantize\\)\n$"
                        quantize ${FX_BIN}/cli_quantize/digits.int8.fx --qat --train ${FX_MODELS_DIR}/digits/digits.train_data.pt)
set_tests_properties(cli.quantize_qat_already_quantized PROPERTIES FIXTURES_REQUIRED "fx_digits;fx_digits_int8")
# Held at AVX2 (no int8 dot products): the int8 model timed against the float model optimised.
add_test(NAME cli.quantize_qat_digits_on_avx2
         COMMAND ${FX_CLI} quantize ${FX_MODELS_DIR}/digits/digits.script.pt --qat --train
                 ${FX_MODELS_DIR}/digits/digits.train_data.pt --batch 64)
set_tests_properties(cli.quantize_qat_digits_on_avx2 PROPERTIES FIXTURES_REQUIRED fx_digits TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1;ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2" PASS_REGULAR_EXPRESSION
                     "\nnote: int8 without VNNI: oneDNN ISA avx2 has no int8 dot products, and its 16-bit int8 sums would saturate with 8-bit weights: 3 of 3 int8 kernels compute in float32, [^\n]*\nnote: int8 against float32 here: [0-9.]+ ms against [0-9.]+ ms per forward of the first training batch \\(float32 optimised by fxcpp\\): int8 is [0-9.]+x (slower|faster)\n$")
# --weight-bits 7 with --qat: the fake quantizers train 7-bit weights, and held at AVX2 all
# three kernels run on oneDNN's int8 kernels.
add_test(NAME cli.quantize_qat_7bit_on_avx2
         COMMAND ${FX_CLI} quantize ${FX_MODELS_DIR}/digits/digits.script.pt --qat --train
                 ${FX_MODELS_DIR}/digits/digits.train_data.pt --batch 64 --weight-bits 7)
set_tests_properties(cli.quantize_qat_7bit_on_avx2 PROPERTIES FIXTURES_REQUIRED fx_digits TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1;ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2" PASS_REGULAR_EXPRESSION
                     "\nnote: int8 without VNNI: oneDNN ISA avx2 has no int8 dot products: all 3 int8 kernels run on oneDNN's int8 kernels \\(7-bit weights or depthwise convolutions: their 16-bit sums cannot saturate\\)\nnote: int8 against float32 here: [0-9.]+ ms against [0-9.]+ ms per forward of the first training batch \\(float32 optimised by fxcpp\\): int8 is [0-9.]+x (slower|faster)\n$")
