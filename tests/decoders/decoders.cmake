# `fxcpp generate` on a random LLaMA checkpoint folder (tests/decoders/make_llama_fixture.py, Debian's python3 with
# torch): greedy tokens equal to Hugging Face's arithmetic, streaming, --json, and bad input (exit 2, one line).
add_test(NAME decoders.cli_fixture
         COMMAND /usr/bin/python3 ${FX_SRC}/tests/decoders/make_llama_fixture.py ${FX_BIN}/decoders_fixtures/cli)
set_tests_properties(decoders.cli_fixture PROPERTIES FIXTURES_SETUP fx_llama_cli TIMEOUT 300)
add_test(NAME decoders.cli_generate
         COMMAND /usr/bin/python3 ${FX_SRC}/tests/decoders/check_generate_cli.py $<TARGET_FILE:fxcpp_cli>
                 ${FX_BIN}/decoders_fixtures/cli)
set_tests_properties(decoders.cli_generate PROPERTIES FIXTURES_REQUIRED fx_llama_cli TIMEOUT 300
                     ENVIRONMENT "OMP_NUM_THREADS=1" PASS_REGULAR_EXPRESSION " passed, 0 failed")
