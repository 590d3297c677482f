# `cmake --install build --prefix P` installs the headers, the library, the `xgrad` tool and a CMake
# package, so a consumer writes find_package(xgrad CONFIG REQUIRED) and links xgrad::xgrad (and
# xgrad::xgrad_onnx for the ONNX importer).
include(CMakePackageConfigHelpers)

# The headers keep their layout (ops/kernels/ included); ops/elementwise.def is the table of
# elementwise ops that ops/elementwise.hpp includes.
install(DIRECTORY graph ops lib
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/xgrad
  FILES_MATCHING PATTERN "*.hpp" PATTERN "*.def" PATTERN "xgrad.hpp" EXCLUDE)
install(FILES lib/xgrad.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/xgrad)

install(TARGETS xgrad xgrad_onnx EXPORT xgradTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS xgrad_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(XGRAD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/xgrad)
install(EXPORT xgradTargets NAMESPACE xgrad:: DESTINATION ${XGRAD_CMAKE_DIR})
configure_package_config_file(cmake/xgradConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/xgradConfig.cmake
  INSTALL_DESTINATION ${XGRAD_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/xgradConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/xgradConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/xgradConfigVersion.cmake
  DESTINATION ${XGRAD_CMAKE_DIR})
