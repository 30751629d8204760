# `cmake --install build --prefix P`: the public headers, libtandem.a and libtandem.so, the
# `tandem` CLI, a CMake package (find_package(tandem) -> tandem::tandem, and with
# COMPONENTS static tandem::tandem_static), pkg-config files (tandem.pc: shared; tandem-static.pc) and the Python
# binding. Every installed file finds the others relative to itself, so the tree can move.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS tandem_core tandem_shared
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS tandem RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/tandem/tandem.h ${CMAKE_SOURCE_DIR}/include/tandem/tandem_c.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tandem)

set(TANDEM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tandem)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/tandemConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/install/tandemConfig.cmake
                              INSTALL_DESTINATION ${TANDEM_CMAKE_DIR}
                              PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/install/tandemConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/install/tandemConfig.cmake ${CMAKE_BINARY_DIR}/install/tandemConfigVersion.cmake
        DESTINATION ${TANDEM_CMAKE_DIR})

# pkg-config: the prefix is found from the .pc file's own place (${pcfiledir}).
file(RELATIVE_PATH TANDEM_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" TANDEM_PC_TO_PREFIX "${TANDEM_PC_TO_PREFIX}")
# tandem.pc links the shared library; tandem-static.pc libtandem.a (pkg-config --static cannot
# switch the library file, only add private dependencies). Both list what libtandem.a uses.
set(TANDEM_PC_REQUIRES "fmt libpcre2-8")
set(TANDEM_PC_LIBS "-lstdc++ -lm -pthread")
foreach(pc tandem tandem-static)
  configure_file(${CMAKE_SOURCE_DIR}/cmake/${pc}.pc.in ${CMAKE_BINARY_DIR}/install/${pc}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/install/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

# The ctypes binding: `import tandem` with PYTHONPATH=P/lib/python3/dist-packages (on the
# path already for P=/usr); it finds libtandem.so from there.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/tandem DESTINATION lib/python3/dist-packages
        PATTERN __pycache__ EXCLUDE)
