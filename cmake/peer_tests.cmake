# bench/agreement as a ctest test (labels peer, model, slow): Tandem against llama.cpp on the
# same generated files, its quick case set. It installs the peer from npm into
# ${TANDEM_BENCH_CACHE:-~/.cache/tandem}/peer when missing; without node, the vocabulary or the
# npm registry it exits 77, which ctest reports as a skip with the script's reason.
find_program(TANDEM_NODE node)
if(TANDEM_NODE)
  add_test(NAME peer_agreement COMMAND ${TANDEM_NODE} ${CMAKE_SOURCE_DIR}/bench/agreement --no-build)
else()
  add_test(NAME peer_agreement COMMAND sh -c "echo 'SKIPPED: node not found, so the llama.cpp peer cannot run'; exit 77")
endif()
# Its figures do not depend on load, so it needs no core to itself: the highest COST makes ctest
# start it first, beside the rest of the suite, rather than last and alone (4-5 minutes of a
# fresh clone's `make test`, where ctest has no recorded costs yet).
set_tests_properties(peer_agreement PROPERTIES LABELS "peer;model;slow" SKIP_RETURN_CODE 77 TIMEOUT 900 COST 10000
  ENVIRONMENT "TANDEM_BUILD_DIR=${CMAKE_BINARY_DIR};TANDEM_SHARED_DIR=${TANDEM_SHARED_DIR}"
  ENVIRONMENT_MODIFICATION "CUDA_VISIBLE_DEVICES=set:")  # the CPU against llama.cpp's CPU build
