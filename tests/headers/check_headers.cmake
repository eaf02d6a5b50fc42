# Compiles a translation unit per public header (include/rocksdcp/**.h:
# each alone, so that one missing an #include fails) and one including them
# all, with -Wall -Wextra -Wpedantic -Werror -fsyntax-only. rocksdcp's
# headers come in with a plain -I, as a pkg-config user gets them, so that
# their warnings show. ctest `headers.strict` runs it (headers.cmake writes
# CONFIG):
#
#   cmake -DCONFIG=<build>/tests/headers/config.cmake -P check_headers.cmake
#
# Every failing header is named, after the compiler's output.

cmake_minimum_required(VERSION 3.20)

if(NOT CONFIG)
  message(FATAL_ERROR "usage: cmake -DCONFIG=<config.cmake> -P check_headers.cmake")
endif()
include(${CONFIG})
if(NOT JOBS)
  set(JOBS 1)
endif()

# -isystem on a directory the compiler searches anyway (/usr/include, or
# LibTorch's /usr/lib/../include) moves it ahead of the C++ library's own,
# whose #include_next then fails.
set(implicit "")
foreach(dir IN LISTS IMPLICIT_DIRS)
  cmake_path(NORMAL_PATH dir)
  list(APPEND implicit ${dir})
endforeach()
set(system_flags "")
foreach(dir IN LISTS SYSTEM_DIRS)
  cmake_path(NORMAL_PATH dir)
  if(NOT dir IN_LIST implicit AND NOT dir IN_LIST system_flags)
    list(APPEND system_flags -isystem ${dir})
  endif()
endforeach()

file(GLOB_RECURSE headers RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/rocksdcp/*.h)
list(SORT headers)
set(checked "")
set(skipped "")
foreach(header IN LISTS headers)
  set(keep TRUE)
  foreach(prefix IN LISTS SKIP)
    string(FIND "${header}" "${prefix}" at)
    if(at EQUAL 0)
      set(keep FALSE)
    endif()
  endforeach()
  if(keep)
    list(APPEND checked ${header})
  else()
    list(APPEND skipped ${header})
  endif()
endforeach()
if(NOT checked)
  message(FATAL_ERROR "no public headers under ${INCLUDE_DIR}/rocksdcp")
endif()

file(REMOVE_RECURSE ${WORK_DIR}/tu)
file(MAKE_DIRECTORY ${WORK_DIR}/tu)
set(all_includes "")
set(units "")
foreach(header IN LISTS checked)
  string(MAKE_C_IDENTIFIER ${header} name)
  file(WRITE ${WORK_DIR}/tu/${name}.cc "#include \"${header}\"\n")
  list(APPEND units ${name})
  set(label_${name} ${header})
  string(APPEND all_includes "#include \"${header}\"\n")
endforeach()
file(WRITE ${WORK_DIR}/tu/all_headers.cc "${all_includes}")
list(APPEND units all_headers)
set(label_all_headers "all headers together")

# JOBS compilers at a time: execute_process runs its COMMANDs concurrently
# (as a pipeline, but -fsyntax-only writes nothing to stdout). Their
# diagnostics interleave, so a unit that fails is compiled again alone for
# its own.
set(compile ${CXX} ${CXX_FLAGS} -Wall -Wextra -Wpedantic -Werror -fsyntax-only
            -I${INCLUDE_DIR} ${system_flags})
set(failed "")
list(LENGTH units n)
math(EXPR last "${n} - 1")
foreach(first RANGE 0 ${last} ${JOBS})
  list(SUBLIST units ${first} ${JOBS} batch)
  set(commands "")
  foreach(unit IN LISTS batch)
    list(APPEND commands COMMAND ${compile} ${WORK_DIR}/tu/${unit}.cc)
  endforeach()
  execute_process(${commands} RESULTS_VARIABLE results
                  OUTPUT_QUIET ERROR_VARIABLE out)
  foreach(unit rc IN ZIP_LISTS batch results)
    if(rc EQUAL 0)
      continue()
    endif()
    list(LENGTH batch size)
    if(size GREATER 1)
      execute_process(COMMAND ${compile} ${WORK_DIR}/tu/${unit}.cc
                      OUTPUT_VARIABLE out ERROR_VARIABLE out)
    endif()
    message("---- ${label_${unit}} (${WORK_DIR}/tu/${unit}.cc):\n${out}")
    list(APPEND failed "${label_${unit}}")
  endforeach()
endforeach()

if(skipped)
  list(JOIN skipped ", " skipped)
  message("left out (their part is not in this build): ${skipped}")
endif()
if(failed)
  list(JOIN failed ", " failed)
  message(FATAL_ERROR "headers not clean under -Wall -Wextra -Wpedantic "
                      "-Werror: ${failed}")
endif()
message("${n} translation units compiled cleanly (one per header, and all "
        "headers together)")
