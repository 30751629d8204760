# Tests of libtandem.so from the outside (included from CMakeLists.txt within TANDEM_TESTS):
#   python   — python/tests with the system python3's unittest, through ctypes, against the
#              library just built (TANDEM_LIBRARY);
#   consumer — installs the build into a temporary prefix, then builds tests/consumer's C++
#              (find_package) and C (pkg-config) programs against that prefix alone, runs
#              them, and imports the installed Python package.
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(STATUS "python3 not found: the python and consumer tests are not registered")
  return()
endif()

add_test(NAME python
         COMMAND ${Python3_EXECUTABLE} -m unittest discover -v -s ${CMAKE_SOURCE_DIR}/python/tests)
# Without ../shared the test class is skipped as a whole: CTest then reports a skip, not a pass.
set_tests_properties(python PROPERTIES LABELS "python;model" SKIP_REGULAR_EXPRESSION "setUpClass.*skipped" ENVIRONMENT
  "TANDEM_LIBRARY=$<TARGET_FILE:tandem_shared>;PYTHONPATH=${CMAKE_SOURCE_DIR}/python;TANDEM_SHARED_DIR=${CMAKE_SOURCE_DIR}/../shared;PYTHONDONTWRITEBYTECODE=1")

add_test(NAME consumer
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/consumer/run_consumer_test.py
                 --build-dir ${CMAKE_BINARY_DIR} --source-dir ${CMAKE_SOURCE_DIR}/tests/consumer
                 --cmake ${CMAKE_COMMAND} --cxx ${CMAKE_CXX_COMPILER}
                 --shared-dir ${CMAKE_SOURCE_DIR}/../shared)
set_tests_properties(consumer PROPERTIES LABELS "consumer;model" TIMEOUT 300 SKIP_REGULAR_EXPRESSION "^SKIPPED:")
