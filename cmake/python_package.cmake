# The Python package `fxcpp` (issue 28): python/fxcpp_bridge.py installed as
# fxcpp.bridge, with fxcpp.save / fxcpp.load / fxcpp.__version__ (the
# library's version), where Debian's python3 finds it: <prefix>/lib/python3/
# dist-packages for the prefix /usr, <prefix>/lib/python3.X/dist-packages
# otherwise (X: /usr/bin/python3's minor version). Component `python`.
if(NOT DEFINED FXCPP_PYTHON_DIR)
  set(fx_python_version 3)
  if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr" AND EXISTS /usr/bin/python3)
    execute_process(COMMAND /usr/bin/python3 -c "import sys; print('%d.%d' % sys.version_info[:2])"
                    OUTPUT_VARIABLE fx_python_version OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      set(fx_python_version 3)
    endif()
  endif()
  set(FXCPP_PYTHON_DIR lib/python${fx_python_version}/dist-packages CACHE STRING
      "where the Python package fxcpp is installed, relative to the prefix")
endif()
configure_file(${FX_SRC}/python/fxcpp/__init__.py.in ${FX_BIN}/python/fxcpp/__init__.py @ONLY)
install(FILES ${FX_BIN}/python/fxcpp/__init__.py DESTINATION ${FXCPP_PYTHON_DIR}/fxcpp COMPONENT python)
install(FILES ${FX_SRC}/python/fxcpp_bridge.py DESTINATION ${FXCPP_PYTHON_DIR}/fxcpp RENAME bridge.py
        COMPONENT python)
if(FXCPP_BUILD_TESTS)
  # Installed into a temporary prefix, imported by Debian's python3 from there.
  set(fx_prefix ${FX_BIN}/python-package-test)
  add_test(NAME serialize_bridge_python_package
           COMMAND sh -c "rm -rf \"$1\" && \"$0\" --install \"$2\" --prefix \"$1\" --component python >/dev/null && PYTHONPATH=\"$1/$3\" exec /usr/bin/python3 \"$4\" python-package \"$1/$3\" \"$5\""
                   ${CMAKE_COMMAND} ${fx_prefix} ${FX_BIN} ${FXCPP_PYTHON_DIR}
                   ${FX_SRC}/python/test_fxcpp_bridge.py ${PROJECT_VERSION})
  set_tests_properties(serialize_bridge_python_package PROPERTIES PASS_REGULAR_EXPRESSION "OK")
endif()
