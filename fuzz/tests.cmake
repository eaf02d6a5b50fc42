# Registers the fuzzers (README.md) as ctest tests, labelled "fuzz", when a
# clang++ that links libFuzzer is found. Included from tests/CMakeLists.txt.
#
#   fuzz.build    configures and builds fuzz/ with clang into
#                 <build>/fuzz (a fixture: runs once, before the others;
#                 incremental after the first time)
#   fuzz.<name>   runs <name>_fuzzer on a copy of corpus/<name> for 30 s,
#                 or $ROCKSDCP_FUZZ_SECONDS (see run_fuzzer.cmake)
#
# `ctest -LE fuzz` leaves them out.

if(NOT ROCKSDCP_FUZZ_TESTS)
  return()
endif()

find_program(ROCKSDCP_FUZZ_CXX NAMES clang++ clang++-14
  DOC "The clang++ that builds the fuzzers (fuzz/)")
if(ROCKSDCP_FUZZ_CXX AND
   NOT ROCKSDCP_FUZZ_CXX_CHECKED STREQUAL ROCKSDCP_FUZZ_CXX)
  # clang without its runtime libraries (Debian's libclang-rt-14-dev) can't
  # link a fuzzer; one test program says whether this one can.
  set(probe_dir ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe)
  file(WRITE ${probe_dir}/probe.cc
    "#include <cstddef>\n#include <cstdint>\n"
    "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) "
    "{ return 0; }\n")
  execute_process(
    COMMAND ${ROCKSDCP_FUZZ_CXX} -fsanitize=fuzzer,address,undefined
            ${probe_dir}/probe.cc -o ${probe_dir}/probe
    RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
  if(probe_rc EQUAL 0)
    set(ok ON)
  else()
    set(ok OFF)
  endif()
  set(ROCKSDCP_FUZZ_CXX_WORKS ${ok} CACHE INTERNAL "")
  set(ROCKSDCP_FUZZ_CXX_CHECKED ${ROCKSDCP_FUZZ_CXX} CACHE INTERNAL "")
endif()
if(NOT ROCKSDCP_FUZZ_CXX OR NOT ROCKSDCP_FUZZ_CXX_WORKS)
  message(STATUS "rocksdcp: no clang++ with libFuzzer; fuzz tests not "
                 "registered (scripts/install-deps.sh installs them)")
  return()
endif()

set(fuzz_source_dir ${PROJECT_SOURCE_DIR}/fuzz)
set(fuzz_build_dir ${PROJECT_BINARY_DIR}/fuzz)

add_test(NAME fuzz.build
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${fuzz_source_dir}
          -DBUILD_DIR=${fuzz_build_dir} -DCXX=${ROCKSDCP_FUZZ_CXX}
          "-DGENERATOR=${CMAKE_GENERATOR}"
          -P ${fuzz_source_dir}/build_fuzzers.cmake)
# It builds with -j2 itself.
# COST: first in a fresh tree (the fuzzers wait for it).
set_tests_properties(fuzz.build PROPERTIES
  FIXTURES_SETUP rocksdcp_fuzzers LABELS fuzz PROCESSORS 2 TIMEOUT 1200
  COST 2000)

foreach(name piece metadata catalog keys safetensors store sst_vet)
  add_test(NAME fuzz.${name}
    COMMAND ${CMAKE_COMMAND} -DNAME=${name}
            -DFUZZER=${fuzz_build_dir}/${name}_fuzzer
            -DCORPUS=${fuzz_source_dir}/corpus/${name}
            -DWORK_DIR=${fuzz_build_dir}/run/${name}
            -P ${fuzz_source_dir}/run_fuzzer.cmake)
  # TIMEOUT: the run's own bound is ROCKSDCP_FUZZ_SECONDS; this one only
  # stops a fuzzer that hangs.
  set_tests_properties(fuzz.${name} PROPERTIES
    FIXTURES_REQUIRED rocksdcp_fuzzers LABELS fuzz TIMEOUT 3600 COST 32)
endforeach()
