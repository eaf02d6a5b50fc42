# The ctest test install.find_package_and_pkg_config (declared in
# tests/CMakeLists.txt) runs this script with cmake -P. It checks that an
# installed rocksdcp works for an outside project, the way a user gets it:
#
#   1. cmake --install ROCKSDCP_BUILD_DIR --prefix WORK_DIR/prefix
#   2. configure CONSUMER_SOURCE_DIR (find_package(rocksdcp CONFIG REQUIRED))
#      against that prefix only, in WORK_DIR/build
#   3. build it
#   4. run it: it saves a tiny state dict and loads it back
#   (the installed CLI, bin/rocksdcp, answers --help)
#      The consumer is configured with find_package(Torch) disabled: a
#      consumer that does not ask for rocksdcp::torch needs no LibTorch,
#      even from a package built with it.
#   5. build the same program with `c++ -std=c++20 main.cc
#      $(pkg-config --cflags --libs rocksdcp)` against the prefix's
#      rocksdcp.pc (when PKG_CONFIG is given), and run it
#
# When ROCKSDCP_BUILD_DIR was configured with -DBUILD_SHARED_LIBS=ON (CI's
# ASan + UBSan build is), the prefix must hold librocksdcp.so and no
# librocksdcp.a, the installed CLI must find the library from its own RPATH,
# and the pkg-config program runs with LD_LIBRARY_PATH, as its user would run
# it.
#
# With -DTORCH_CONSUMER_SOURCE_DIR=<dir> (when rocksdcp was built with
# LibTorch), it then configures, builds and runs that project too: it asks
# for find_package(rocksdcp COMPONENTS torch) and links rocksdcp::torch.
#
# With -DTESTING_CONSUMER_SOURCE_DIR=<dir> (when rocksdcp::testing was
# built), it configures, builds and runs that project too: it asks for
# find_package(rocksdcp COMPONENTS testing) and runs the storage contract
# suite against its own backend.
#
# With -DPYTHON=<interpreter> -DPYTHON_DIR=<dir under the prefix> (when the
# Python package was built), it then imports the installed package from
# <prefix>/<dir> and saves and loads a checkpoint through torch's DCP.
#
# Any failing step fails the test with that step's output.

foreach(var ROCKSDCP_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: pass -D${var}=...")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/build")

if(NOT EXISTS "${ROCKSDCP_BUILD_DIR}/rocksdcpConfig.cmake")
  message(FATAL_ERROR
    "install test: ${ROCKSDCP_BUILD_DIR} has no rocksdcpConfig.cmake; was it "
    "configured with -DROCKSDCP_INSTALL=OFF?")
endif()

# The consumer is built the way rocksdcp was, with the same generator and
# compiler: a rocksdcp built with clang++ is checked with clang++.
load_cache("${ROCKSDCP_BUILD_DIR}" READ_WITH_PREFIX parent_
  CMAKE_GENERATOR CMAKE_CXX_COMPILER BUILD_SHARED_LIBS)
set(shared OFF)
if(parent_BUILD_SHARED_LIBS)
  set(shared ON)
endif()

# A leftover prefix or consumer cache from an earlier run could hide a
# broken install.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(run_step name)
  # ARGN: the command; a step's output comes back in step_output.
  execute_process(
    COMMAND ${ARGN}
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR
      "install test: step '${name}' failed (exit ${rc})\n"
      "command: ${cmd}\n"
      "---- stdout ----\n${out}\n"
      "---- stderr ----\n${err}")
  endif()
  message(STATUS "install test: ${name}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step(install
  ${CMAKE_COMMAND} --install "${ROCKSDCP_BUILD_DIR}" --prefix "${prefix}")

# The library the user asked for, and only that one.
file(GLOB_RECURSE static_libs "${prefix}/*/librocksdcp.a")
file(GLOB_RECURSE shared_libs "${prefix}/*/librocksdcp.so")
if(shared AND (static_libs OR NOT shared_libs))
  message(FATAL_ERROR "install test: a shared build installed "
    "'${static_libs}' and '${shared_libs}'; expected librocksdcp.so only")
endif()
if(NOT shared AND NOT static_libs)
  message(FATAL_ERROR "install test: no librocksdcp.a under ${prefix}")
endif()

# The CLI comes with the library, when it is built.
if(EXISTS "${ROCKSDCP_BUILD_DIR}/tools")
  run_step(cli "${prefix}/bin/rocksdcp" --help)
endif()

# Only the fresh prefix may satisfy find_package: no package registry, so a
# build tree registered on this machine can't stand in for the install.
run_step(configure
  ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${consumer_build}"
    -G "${parent_CMAKE_GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${parent_CMAKE_CXX_COMPILER}"
    -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=${prefix}"
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON)

run_step(build ${CMAKE_COMMAND} --build "${consumer_build}")

run_step(run "${consumer_build}/app")
message(STATUS "install test: app says: ${step_output}")

# 5. pkg-config, as a Makefile user would.
if(DEFINED PKG_CONFIG AND NOT PKG_CONFIG STREQUAL "")
  file(GLOB_RECURSE pc_files "${prefix}/*/rocksdcp.pc")
  list(LENGTH pc_files found)
  if(NOT found EQUAL 1)
    message(FATAL_ERROR "install test: expected one rocksdcp.pc under "
                        "${prefix}, found: ${pc_files}")
  endif()
  get_filename_component(pc_dir "${pc_files}" DIRECTORY)
  run_step(pkg-config
    ${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${pc_dir}"
    ${PKG_CONFIG} --cflags --libs rocksdcp)
  string(STRIP "${step_output}" pc_flags)
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  run_step(pkg-config-build
    "${parent_CMAKE_CXX_COMPILER}" -std=c++20
    "${CONSUMER_SOURCE_DIR}/main.cc" ${pc_flags} -o "${WORK_DIR}/app-pc")
  set(lib_path)
  if(shared)
    get_filename_component(lib_dir "${shared_libs}" DIRECTORY)
    set(lib_path "LD_LIBRARY_PATH=${lib_dir}")
  endif()
  run_step(pkg-config-run ${CMAKE_COMMAND} -E env ${lib_path}
    "${WORK_DIR}/app-pc")
  message(STATUS "install test: pkg-config app says: ${step_output}")
endif()

# A consumer project of its own: configures `source` against the prefix
# only (ARGN: more cache entries), builds it, and runs its `program` with
# the env entries in ENV; the output comes back in step_output.
function(build_and_run name source program)
  cmake_parse_arguments(ARG "" "" "ENV;DEFINES" ${ARGN})
  set(dir "${WORK_DIR}/${name}-build")
  run_step(${name}-configure
    ${CMAKE_COMMAND} -S "${source}" -B "${dir}"
      -G "${parent_CMAKE_GENERATOR}"
      "-DCMAKE_CXX_COMPILER=${parent_CMAKE_CXX_COMPILER}"
      -DCMAKE_BUILD_TYPE=Release
      "-DCMAKE_PREFIX_PATH=${prefix}"
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
      ${ARG_DEFINES})
  run_step(${name}-build ${CMAKE_COMMAND} --build "${dir}")
  run_step(${name}-run ${CMAKE_COMMAND} -E env ${ARG_ENV} "${dir}/${program}")
  set(step_output "${step_output}" PARENT_SCOPE)
endfunction()

# 6. rocksdcp::torch, through find_package(rocksdcp COMPONENTS torch).
if(DEFINED TORCH_CONSUMER_SOURCE_DIR AND NOT TORCH_CONSUMER_SOURCE_DIR STREQUAL "")
  build_and_run(torch "${TORCH_CONSUMER_SOURCE_DIR}" app)
  message(STATUS "install test: torch app says: ${step_output}")
endif()

# 7. rocksdcp::testing, through find_package(rocksdcp COMPONENTS testing):
#    the storage contract suite on a backend of the consumer's own.
if(DEFINED TESTING_CONSUMER_SOURCE_DIR AND NOT TESTING_CONSUMER_SOURCE_DIR STREQUAL "")
  build_and_run(testing "${TESTING_CONSUMER_SOURCE_DIR}" contract
    DEFINES -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON
    ENV "TEST_TMPDIR=${WORK_DIR}/")
  string(REGEX MATCH "contract: [^\n]*" said "${step_output}")
  message(STATUS "install test: testing app says: ${said}")
endif()

# 8. The Python package, from where `cmake --install` put it.
if(DEFINED PYTHON AND NOT PYTHON STREQUAL "" AND NOT shared)
  set(site "${prefix}/${PYTHON_DIR}")
  if(NOT EXISTS "${site}/rocksdcp/__init__.py")
    message(FATAL_ERROR "install test: no rocksdcp package in ${site}")
  endif()
  run_step(python
    ${CMAKE_COMMAND} -E env "PYTHONPATH=${site}" PYTHONDONTWRITEBYTECODE=1
    ${PYTHON} -c "
import os, sys, tempfile, torch
import rocksdcp, rocksdcp.torch as rt
assert rocksdcp.__file__.startswith(sys.argv[1]), rocksdcp.__file__
d = tempfile.mkdtemp()
sd = {'w': torch.arange(6.0)}
rt.dcp.save_state_dict(sd, no_dist=True, storage_writer=rt.StorageWriter(d, 'c'))
out = {'w': torch.zeros(6)}
rt.dcp.load_state_dict(out, no_dist=True, storage_reader=rt.StorageReader(d, 'c'))
assert torch.equal(out['w'], sd['w'])
print('python: saved and loaded c through the installed package, from', os.path.dirname(rocksdcp.__file__))
" "${site}")
  message(STATUS "install test: ${step_output}")
endif()
