# The ctest tests fuzz.<NAME> (fuzz/tests.cmake) run this script with
# cmake -P. It copies the seed corpus CORPUS to WORK_DIR, so that what the
# run adds to it stays out of the source tree, runs FUZZER on it for 30 s
# (or $ROCKSDCP_FUZZ_SECONDS) and prints how many inputs it executed. A
# crash, a sanitizer report, a leak or a slow input fails the test, with
# libFuzzer's report and the path of the saved input.

foreach(var NAME FUZZER CORPUS WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_fuzzer.cmake: pass -D${var}=...")
  endif()
endforeach()

set(seconds 30)
if(DEFINED ENV{ROCKSDCP_FUZZ_SECONDS})
  set(seconds $ENV{ROCKSDCP_FUZZ_SECONDS})
endif()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/corpus)
file(GLOB seeds ${CORPUS}/*)
file(COPY ${seeds} DESTINATION ${WORK_DIR}/corpus)

# -timeout: an input that takes seconds is a bug (a decoder's work must stay
# linear in its input). -rss_limit_mb: generous for a 2 GiB-capped decoder.
execute_process(
  COMMAND ${FUZZER} -max_total_time=${seconds} -print_final_stats=1
          -timeout=10 -rss_limit_mb=4096 -artifact_prefix=${WORK_DIR}/
          ${WORK_DIR}/corpus
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)

string(REGEX MATCH "stat::number_of_executed_units: *([0-9]+)" _ "${err}")
set(executions "${CMAKE_MATCH_1}")
string(REGEX MATCH "stat::peak_rss_mb: *([0-9]+)" _ "${err}")
set(rss "${CMAKE_MATCH_1}")
file(GLOB corpus_after ${WORK_DIR}/corpus/*)
list(LENGTH seeds seed_count)
list(LENGTH corpus_after corpus_count)

if(NOT rc EQUAL 0 OR executions STREQUAL "")
  # libFuzzer's report is at the end of its output.
  string(LENGTH "${err}" length)
  if(length GREATER 12000)
    math(EXPR start "${length} - 12000")
    string(SUBSTRING "${err}" ${start} -1 err)
  endif()
  message(FATAL_ERROR "fuzz ${NAME}: ${FUZZER} failed (exit ${rc}); "
    "the input it saved is in ${WORK_DIR}\n${err}")
endif()
message(STATUS "fuzz ${NAME}: ${executions} executions in ${seconds} s, "
  "corpus ${seed_count} -> ${corpus_count} inputs, peak RSS ${rss} MB")
