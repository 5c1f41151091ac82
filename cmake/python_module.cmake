# `import fxcpp` (issue 37): the Python package fxcpp as a pybind11 extension
# module fxcpp._C (src/python/) over the C++ API, plus its pure-Python parts
# (python/fxcpp/*.py, and python/fxcpp_bridge.py as fxcpp.bridge).
#
# Built when Debian's python3 (with its headers) and pybind11-dev are found,
# into ${FX_BIN}/python/fxcpp, where the tests import it from
# (PYTHONPATH=${FX_BIN}/python); the .py files there are links to the
# sources, so editing them needs no rebuild. Tensors cross with torch's own
# type casters (torch/extension.h, libtorch_python.so: the library Debian's
# python3-torch loads), so they are shared with Python torch, not copied.
# cmake/python_package.cmake installs the package.
if(NOT DEFINED FXCPP_PYTHON_DIR)
  # Where Debian's python3 finds the package: <prefix>/lib/python3/dist-packages for
  # the prefix /usr, <prefix>/lib/python3.X/dist-packages otherwise (X: /usr/bin/python3's minor version).
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

set(FX_PYTHON_PACKAGE_DIR ${FX_BIN}/python/fxcpp)
configure_file(${FX_SRC}/python/fxcpp/__init__.py.in ${FX_PYTHON_PACKAGE_DIR}/__init__.py @ONLY)
file(GLOB FX_PYTHON_SOURCES CONFIGURE_DEPENDS ${FX_SRC}/python/fxcpp/*.py)
foreach(py ${FX_PYTHON_SOURCES} ${FX_SRC}/python/fxcpp_bridge.py)
  get_filename_component(name ${py} NAME)
  if(name STREQUAL "fxcpp_bridge.py")
    set(name bridge.py)
  endif()
  file(CREATE_LINK ${py} ${FX_PYTHON_PACKAGE_DIR}/${name} SYMBOLIC)
endforeach()

# Debian's python3, not the first python3 on PATH (a pyenv one has no torch).
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
find_package(pybind11 CONFIG QUIET)
find_library(FX_TORCH_PYTHON_LIBRARY torch_python HINTS ${TORCH_INSTALL_PREFIX}/lib)
if(NOT Python3_FOUND OR NOT pybind11_FOUND OR NOT FX_TORCH_PYTHON_LIBRARY)
  message(STATUS "fxcpp Python module: not built (needs python3-dev, pybind11-dev and libtorch_python)")
  return()
endif()
execute_process(COMMAND ${Python3_EXECUTABLE} -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"
                OUTPUT_VARIABLE FX_PYTHON_EXT_SUFFIX OUTPUT_STRIP_TRAILING_WHITESPACE)

file(GLOB FX_PYTHON_MODULE_SOURCES CONFIGURE_DEPENDS ${FX_SRC}/src/python/*.cpp)
add_library(fxcpp_python MODULE ${FX_PYTHON_MODULE_SOURCES})
target_include_directories(fxcpp_python PRIVATE ${FX_SRC}/src)
target_include_directories(fxcpp_python SYSTEM PRIVATE ${Python3_INCLUDE_DIRS} ${pybind11_INCLUDE_DIRS})
target_link_libraries(fxcpp_python PRIVATE fxcpp ${FX_TORCH_PYTHON_LIBRARY})
target_compile_options(fxcpp_python PRIVATE ${FX_WARNINGS} -fvisibility=hidden)
# Its few hundred lines take seconds; parsing torch/extension.h and pybind11 takes
# ~15 s per file: one unity translation unit pays that once (AMD EPYC Zen 5, 2 cores: 78 s -> 28 s).
set_target_properties(fxcpp_python PROPERTIES UNITY_BUILD ${FXCPP_UNITY_BUILD} UNITY_BUILD_BATCH_SIZE 16)
# torch/extension.h's casters name the module TORCH_EXTENSION_NAME in messages.
target_compile_definitions(fxcpp_python PRIVATE TORCH_EXTENSION_NAME=_C FXCPP_VERSION="${PROJECT_VERSION}")
# Installed at <prefix>/${FXCPP_PYTHON_DIR}/fxcpp: fxcpp's libraries are found relative to it.
file(RELATIVE_PATH fx_python_to_lib /fx/${FXCPP_PYTHON_DIR}/fxcpp /fx/${CMAKE_INSTALL_LIBDIR})
set_target_properties(fxcpp_python PROPERTIES PREFIX "" OUTPUT_NAME _C SUFFIX ${FX_PYTHON_EXT_SUFFIX}
                      LIBRARY_OUTPUT_DIRECTORY ${FX_PYTHON_PACKAGE_DIR}
                      INSTALL_RPATH "$ORIGIN/${fx_python_to_lib}")
