# The multi-rank tests (tests/dist/mpi/): one GoogleTest program with its own main (it
# initialises MPI), run by ctest under mpirun as two ranks on this machine. Included when
# TANDEM_WITH_MPI. --oversubscribe: CI's machine may have fewer cores than ranks;
# --allow-run-as-root: CI runs as root, which OpenMPI refuses otherwise. The ranks talk over
# shared memory only (pml ob1, btl self,vader): they share one machine, and this keeps the
# test off the network interfaces and UCX transports a container may or may not have; vader's
# single-copy mechanism off (plain copies through shared memory), because its default, Linux
# CMA, needs ptrace rights that containers often withhold (the ranks then fail reading each
# other's memory with "errno = 1").
# TIMEOUT: a rank whose peer failed can wait forever on it; ctest kills the run instead.
file(GLOB TANDEM_MPI_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/dist/mpi/*.cpp)
add_executable(test_dist_mpi ${TANDEM_MPI_TEST_SOURCES})
target_include_directories(test_dist_mpi PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_link_libraries(test_dist_mpi PRIVATE tandem_dist GTest::gtest)
target_compile_options(test_dist_mpi PRIVATE $<$<CONFIG:Release>:-O1>)
add_test(NAME DistMpi.TwoRanks
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe --allow-run-as-root
                 --mca pml ob1 --mca btl self,vader
                 --mca btl_vader_single_copy_mechanism none ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_dist_mpi>
                 ${MPIEXEC_POSTFLAGS})
# ASan's leak check off in the ranks: OpenMPI's own allocations outlive its unloaded plugins
# (tests/labels.cmake, TANDEM_MPI_TEST_ENVIRONMENT, says more).
set_tests_properties(DistMpi.TwoRanks PROPERTIES LABELS "dist;mpi;unit" TIMEOUT 60 ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")

# `tandem serve --pipeline 2` under mpirun against one process (tests/dist/pipeline_serve/):
# an ordinary program that starts both servers itself (mpirun among them), so ctest runs it
# directly. It reads ../shared (label model); each of its tests starts two servers.
add_executable(test_pipeline_serve ${CMAKE_SOURCE_DIR}/tests/dist/pipeline_serve/pipeline_serve_test.cpp)
target_link_libraries(test_pipeline_serve PRIVATE tandem_test_support PkgConfig::HTTPLIB)
target_compile_definitions(test_pipeline_serve PRIVATE TANDEM_MPIEXEC="${MPIEXEC_EXECUTABLE}")
# No shared precompiled header: its own define (the mpirun path) differs from the owner's.
target_compile_options(test_pipeline_serve PRIVATE $<$<CONFIG:Release>:-O1>)
add_dependencies(test_pipeline_serve tandem)
add_test(NAME PipelineServe.TokenIdenticalToOneProcess COMMAND test_pipeline_serve)
set_tests_properties(PipelineServe.TokenIdenticalToOneProcess PROPERTIES LABELS "dist;mpi;model" TIMEOUT 300 RUN_SERIAL TRUE
                                                                      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0"
                                                                      # its single process on the CPU, as the ranks are
                                                                      ENVIRONMENT_MODIFICATION "CUDA_VISIBLE_DEVICES=set:")

# `tandem serve --tensor-parallel 2` under mpirun against one process (tests/dist/tensor_parallel_serve/),
# as the pipeline's test above: it starts both servers itself.
add_executable(test_tensor_parallel_serve
               ${CMAKE_SOURCE_DIR}/tests/dist/tensor_parallel_serve/tensor_parallel_serve_test.cpp)
target_link_libraries(test_tensor_parallel_serve PRIVATE tandem_test_support PkgConfig::HTTPLIB)
target_compile_definitions(test_tensor_parallel_serve PRIVATE TANDEM_MPIEXEC="${MPIEXEC_EXECUTABLE}")
target_compile_options(test_tensor_parallel_serve PRIVATE $<$<CONFIG:Release>:-O1>)
add_dependencies(test_tensor_parallel_serve tandem)
add_test(NAME TensorParallelServe.TokenIdenticalToOneProcess COMMAND test_tensor_parallel_serve)
set_tests_properties(TensorParallelServe.TokenIdenticalToOneProcess PROPERTIES LABELS "dist;mpi;model" TIMEOUT 300
                                                                               RUN_SERIAL TRUE
                                                                               ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0"
                                                                               ENVIRONMENT_MODIFICATION
                                                                               "CUDA_VISIBLE_DEVICES=set:")

# The same servers across simulated hosts (tests/dist/simulated_hosts/, issue 36): network
# namespaces joined by a bridge, MPI over TCP between them. ctest runs simulated_hosts.sh, which
# makes the hosts, runs test_simulated_hosts inside host 0 and removes the hosts after; where
# namespaces cannot be made (not root, none in the kernel) it prints why and exits 77, a skip.
# Labels, RUN_SERIAL and the sanitizer's environment come from tests/labels.cmake (SimulatedHosts.*).
add_executable(test_simulated_hosts ${CMAKE_SOURCE_DIR}/tests/dist/simulated_hosts/simulated_hosts_test.cpp)
target_link_libraries(test_simulated_hosts PRIVATE tandem_test_support PkgConfig::HTTPLIB)
target_compile_options(test_simulated_hosts PRIVATE $<$<CONFIG:Release>:-O1>)
add_dependencies(test_simulated_hosts tandem)
set(TANDEM_SIMULATED_HOSTS_SCRIPT ${CMAKE_SOURCE_DIR}/tests/dist/simulated_hosts/simulated_hosts.sh)
# Four hosts: the killed-decode-rank job has four ranks; the others use the first two or three.
# Their steady clocks 1000 s apart (time namespaces), as separate machines' are: the jobs' clock
# offsets must find that, and nothing may compare one rank's clock with another's.
add_test(NAME SimulatedHosts.OverTcp COMMAND ${TANDEM_SIMULATED_HOSTS_SCRIPT} --hosts 4 --clock-step 1000 --
                                             $<TARGET_FILE:test_simulated_hosts>)
# A slower link (2 ms each way, 1 Gbit/s): the same outputs; the kill tests are left to the run above.
add_test(NAME SimulatedHosts.OverTcpWith2msDelay
         COMMAND ${TANDEM_SIMULATED_HOSTS_SCRIPT} --hosts 3 --delay 2ms --rate 1gbit -- $<TARGET_FILE:test_simulated_hosts>
                 --gtest_filter=*MatchesOneProcess)
set_tests_properties(SimulatedHosts.OverTcp SimulatedHosts.OverTcpWith2msDelay PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240
                     # the single process on the CPU, as in the other server tests
                     ENVIRONMENT_MODIFICATION "CUDA_VISIBLE_DEVICES=set:")
# Labelled here, as they are added: ctest reads tests/labels.cmake's calls before its own add_test lines.
include(${CMAKE_SOURCE_DIR}/tests/labels.cmake)
tandem_label_tests("SimulatedHosts.OverTcp;SimulatedHosts.OverTcpWith2msDelay")
