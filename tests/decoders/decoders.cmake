# `fxcpp generate` on a random LLaMA checkpoint folder (tests/decoders/make_llama_fixture.py, Debian's python3 with
# torch): greedy tokens equal to Hugging Face's arithmetic, streaming, --json, and bad input (exit 2, one line).
add_test(NAME decoders.cli_fixture
         COMMAND /usr/bin/python3 ${FX_SRC}/tests/decoders/make_llama_fixture.py ${FX_BIN}/decoders_fixtures/cli)
set_tests_properties(decoders.cli_fixture PROPERTIES FIXTURES_SETUP fx_llama_cli TIMEOUT 300)
# Its own folder with a tokenizer.model (--tokenizer: spm_train's, Debian's sentencepiece) for text prompts, the
# streamed text (spm_decode's) and the end-of-sequence stop.
add_test(NAME decoders.cli_text_fixture
         COMMAND /usr/bin/python3 ${FX_SRC}/tests/decoders/make_llama_fixture.py ${FX_BIN}/decoders_fixtures/cli_text
                 --tokenizer)
set_tests_properties(decoders.cli_text_fixture PROPERTIES FIXTURES_SETUP fx_llama_cli_text TIMEOUT 300)
add_test(NAME decoders.cli_generate
         COMMAND /usr/bin/python3 ${FX_SRC}/tests/decoders/check_generate_cli.py $<TARGET_FILE:fxcpp_cli>
                 ${FX_BIN}/decoders_fixtures/cli_text)
set_tests_properties(decoders.cli_generate PROPERTIES FIXTURES_REQUIRED fx_llama_cli_text TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION " passed, 0 failed")
# GGUF files of the LLaMA fixture (scripts/gguf_writer.py) in llama.cpp (node-llama-cpp, bench/llama_cpp/llama_bench.js):
# F32's greedy tokens equal fxcpp generate's, Q8_0 / Q4_0 load and agree; skipped (exit 77) without
# build/llama_cpp (bash scripts/setup_llama_cpp.sh installs it). The Q8_0 / Q4_0 quantizers against hand-made blocks.
add_test(NAME decoders.gguf_quantizers COMMAND /usr/bin/python3 ${FX_SRC}/scripts/gguf_writer.py --self-test)
set_tests_properties(decoders.gguf_quantizers PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION " passed, 0 failed")
add_test(NAME decoders.gguf_llama_cpp
         COMMAND /usr/bin/python3 ${FX_SRC}/tests/decoders/check_gguf_llama_cpp.py $<TARGET_FILE:fxcpp_cli>
                 ${FX_BIN}/decoders_fixtures/cli ${FX_BIN}/llama_cpp)
set_tests_properties(decoders.gguf_llama_cpp PROPERTIES FIXTURES_REQUIRED fx_llama_cli TIMEOUT 300
                     SKIP_RETURN_CODE 77 ENVIRONMENT "OMP_NUM_THREADS=1")
# fxcpp generate --engine eager|fxcpp [--quantize int8|int4] and fxcpp quantize --weight-only on the same fixture:
# greedy tokens of both engines equal the reference's, a saved int4 .fx decodes as --quantize int4, bad input exit 2.
add_test(NAME decoders.cli_weight_only
         COMMAND /usr/bin/python3 ${FX_SRC}/tests/decoders/check_weight_only_cli.py $<TARGET_FILE:fxcpp_cli>
                 ${FX_BIN}/decoders_fixtures/cli ${FX_BIN}/decoders_fixtures/cli_weight_only)
set_tests_properties(decoders.cli_weight_only PROPERTIES FIXTURES_REQUIRED fx_llama_cli TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION " passed, 0 failed")
