# ctest `headers.strict`: every public header compiles on its own, and all
# of them together, with no warning under -Wall -Wextra -Wpedantic -Werror.
# rocksdcp's own targets build with -Wno-unused-parameter, but a program
# that finds the headers with a plain -I (pkg-config's Cflags) sees their
# warnings as its own. check_headers.cmake runs the compiler; this file
# tells it which one, with which standard, and where the third-party
# headers are.

# The standard the library's users compile with (rocksdcp's PUBLIC
# cxx_std_NN), in its non-extension form: rocksdcp builds with
# CXX_EXTENSIONS OFF.
get_target_property(headers_features rocksdcp INTERFACE_COMPILE_FEATURES)
list(FILTER headers_features INCLUDE REGEX "^cxx_std_[0-9]+$")
if(NOT headers_features MATCHES "^cxx_std_([0-9]+)$")
  message(FATAL_ERROR "headers.strict: rocksdcp has no single cxx_std_NN "
                      "compile feature (${headers_features})")
endif()
set(headers_std ${CMAKE_MATCH_1})
# CMAKE_CXX_FLAGS holds what the toolchain needs to compile at all (the
# aarch64 toolchain's -idirafter for its sysroot's headers).
separate_arguments(headers_flags UNIX_COMMAND "${CMAKE_CXX_FLAGS}")
list(PREPEND headers_flags ${CMAKE_CXX${headers_std}_STANDARD_COMPILE_OPTION})
if(CMAKE_CXX_COMPILER_TARGET)
  list(APPEND headers_flags
       "${CMAKE_CXX_COMPILE_OPTIONS_TARGET}${CMAKE_CXX_COMPILER_TARGET}")
endif()
if(CMAKE_SYSROOT)
  list(APPEND headers_flags "${CMAKE_CXX_COMPILE_OPTIONS_SYSROOT}${CMAKE_SYSROOT}")
endif()

# Third-party headers come in with -isystem: their warnings are not ours.
# A header whose part this build leaves out is left out here too, as the
# install leaves it out.
set(headers_system_dirs
    "$<TARGET_PROPERTY:dlpack::dlpack,INTERFACE_INCLUDE_DIRECTORIES>")
set(headers_skip "")
if(TARGET rocksdcp_torch)
  list(APPEND headers_system_dirs
       "$<TARGET_PROPERTY:torch,INTERFACE_INCLUDE_DIRECTORIES>")
else()
  list(APPEND headers_skip rocksdcp/torch.h)
endif()
if(TARGET rocksdcp_mpi)
  list(APPEND headers_system_dirs
       "$<TARGET_PROPERTY:MPI::MPI_CXX,INTERFACE_INCLUDE_DIRECTORIES>")
else()
  list(APPEND headers_skip rocksdcp/mpi_collective.h)
endif()
if(TARGET rocksdcp_testing)
  list(APPEND headers_system_dirs
       "$<TARGET_PROPERTY:GTest::gmock,INTERFACE_INCLUDE_DIRECTORIES>")
else()
  list(APPEND headers_skip rocksdcp/testing/)
endif()

# Compilers run concurrently, up to 2: ctest reserves that many processors
# for the test (PROCESSORS), so that with -j it does not overload them.
cmake_host_system_information(RESULT headers_jobs QUERY NUMBER_OF_LOGICAL_CORES)
if(headers_jobs GREATER 2)
  set(headers_jobs 2)
elseif(headers_jobs LESS 1)
  set(headers_jobs 1)
endif()

# The include directories are known only at generate time (generator
# expressions), so the script reads them from a generated file.
file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/headers/config.cmake
  CONTENT "set(CXX \"${CMAKE_CXX_COMPILER}\")
set(CXX_FLAGS \"${headers_flags}\")
set(INCLUDE_DIR \"${PROJECT_SOURCE_DIR}/include\")
set(SYSTEM_DIRS \"${headers_system_dirs}\")
set(IMPLICIT_DIRS \"${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES}\")
set(SKIP \"${headers_skip}\")
set(WORK_DIR \"${CMAKE_CURRENT_BINARY_DIR}/headers\")
set(JOBS ${headers_jobs})
")

add_test(NAME headers.strict
  COMMAND ${CMAKE_COMMAND}
          -DCONFIG=${CMAKE_CURRENT_BINARY_DIR}/headers/config.cmake
          -P ${CMAKE_CURRENT_LIST_DIR}/check_headers.cmake)
set_tests_properties(headers.strict PROPERTIES
  LABELS headers PROCESSORS ${headers_jobs} TIMEOUT 300 COST 25)
