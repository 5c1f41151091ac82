# The Python package `fxcpp` (issues 28, 37): python/fxcpp_bridge.py installed as
# fxcpp.bridge, with fxcpp.save / fxcpp.load / fxcpp.__version__ (the
# library's version), the pure-Python parts python/fxcpp/*.py and the
# extension module fxcpp._C (cmake/python_module.cmake, which also decides
# FXCPP_PYTHON_DIR), where Debian's python3 finds them. Component `python`
# (the extension needs fxcpp's libraries too: a full install).
install(FILES ${FX_BIN}/python/fxcpp/__init__.py DESTINATION ${FXCPP_PYTHON_DIR}/fxcpp COMPONENT python)
install(FILES ${FX_SRC}/python/fxcpp_bridge.py DESTINATION ${FXCPP_PYTHON_DIR}/fxcpp RENAME bridge.py
        COMPONENT python)
install(FILES ${FX_PYTHON_SOURCES} DESTINATION ${FXCPP_PYTHON_DIR}/fxcpp COMPONENT python)
if(TARGET fxcpp_python)
  install(TARGETS fxcpp_python LIBRARY DESTINATION ${FXCPP_PYTHON_DIR}/fxcpp COMPONENT python)
endif()
if(FXCPP_BUILD_TESTS)
  # Installed (all of fxcpp: the extension links its libraries) into a temporary prefix,
  # imported by Debian's python3 from there.
  set(fx_prefix ${FX_BIN}/python-package-test)
  add_test(NAME serialize_bridge_python_package
           COMMAND sh -c "rm -rf \"$1\" && \"$0\" --install \"$2\" --prefix \"$1\" >/dev/null && PYTHONPATH=\"$1/$3\" exec /usr/bin/python3 \"$4\" python-package \"$1/$3\" \"$5\""
                   ${CMAKE_COMMAND} ${fx_prefix} ${FX_BIN} ${FXCPP_PYTHON_DIR}
                   ${FX_SRC}/python/test_fxcpp_bridge.py ${PROJECT_VERSION})
  set_tests_properties(serialize_bridge_python_package PROPERTIES PASS_REGULAR_EXPRESSION "OK"
                       FIXTURES_SETUP fx_python_installed)
  if(TARGET fxcpp_python)
    # A fresh shell (no inherited environment) with only the prefix on the path.
    add_test(NAME python.installed_version
             COMMAND env -i PATH=/usr/bin:/bin PYTHONPATH=${fx_prefix}/${FXCPP_PYTHON_DIR}
                     /usr/bin/python3 -c "import fxcpp; print(fxcpp.__version__)")
    set_tests_properties(python.installed_version PROPERTIES FIXTURES_REQUIRED fx_python_installed
                         PASS_REGULAR_EXPRESSION "^${PROJECT_VERSION}\n$")
  endif()
endif()
