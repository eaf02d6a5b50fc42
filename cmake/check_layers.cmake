# The layers of src/, bottom to top, and what each may include: ctest
# `layers.includes` runs this script over the source tree.
#
#   cmake -DROOT=<source dir> -P cmake/check_layers.cmake
#
#   model   include/rocksdcp/{status,tensor,metadata,state_dict}.h, built
#           from src/core/{status,tensor,metadata}.cc: on its own public
#           headers alone, no src/ directory (util/ is above it)
#   util    src/util      helpers over the model types
#   keys    src/keys      the key grammar
#   codec   src/codec     byte-plane compression
#   format  src/format    the values' FlatBuffers codecs (schema/)
#   driver  src/core      planners, Save / Load, collectives, async saves
#   backend src/rocksdb   the RocksDB store, with its own values' codecs
#   mpi, torch, python, tools: on the public headers (and util)
#   testing src/testing   the installed contract suite: on the public
#                         headers alone, as a backend outside rocksdcp is
#
# A layer includes its own headers, those of the layers below it that it
# names, and the public headers it names: lower layers see only the model's.
# The public headers are the only interface between the backend and the
# driver: src/rocksdb includes nothing of src/core. Every violation is
# listed with its file and line.

cmake_minimum_required(VERSION 3.20)

if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source dir> -P check_layers.cmake")
endif()

set(model_headers status tensor metadata state_dict)
# The model's files: its public headers, and its sources in src/core, as
# the build lists them (rocksdcp_layer(model SOURCES ...) in CMakeLists.txt).
list(TRANSFORM model_headers APPEND .h OUTPUT_VARIABLE model_public)
list(TRANSFORM model_public PREPEND include/rocksdcp/)
file(READ ${ROOT}/CMakeLists.txt cmakelists)
if(NOT cmakelists MATCHES "rocksdcp_layer\\(model[ \n]+SOURCES([^)]+)\\)")
  message(FATAL_ERROR "CMakeLists.txt has no rocksdcp_layer(model SOURCES ...)")
endif()
string(REGEX REPLACE "[ \n]+" ";" model_sources "${CMAKE_MATCH_1}")
list(REMOVE_ITEM model_sources "")
set(driver_headers ${model_headers} storage planner checkpoint collective
    async_checkpoint)
set(store_headers store store_options store_reports diff rocksdb_store)
set(all_headers ${driver_headers} ${store_headers} device_profile
    mpi_collective torch rocksdcp)

set(problems "")

# check(<name> <glob dir> [ONLY <files>] [EXCEPT <files>]
#       DIRS <src dirs it may include> HEADERS <public headers it may include>)
# checks the .h and .cc files of <glob dir> but the EXCEPT ones, or only
# the ONLY ones (files relative to the source dir).
function(check name dir)
  cmake_parse_arguments(ARG "" "" "ONLY;EXCEPT;DIRS;HEADERS" ${ARGN})
  if(ARG_ONLY)
    set(files ${ARG_ONLY})
  else()
    file(GLOB files RELATIVE ${ROOT} ${ROOT}/${dir}/*.h ${ROOT}/${dir}/*.cc)
  endif()
  list(REMOVE_ITEM files ${ARG_EXCEPT} "")
  set(found "")
  foreach(rel IN LISTS files)
    if(NOT EXISTS ${ROOT}/${rel})
      list(APPEND found "${rel}: in ${name}, but not there\n")
      continue()
    endif()
    file(STRINGS ${ROOT}/${rel} lines)
    set(n 0)
    foreach(line IN LISTS lines)
      math(EXPR n "${n} + 1")
      if(NOT line MATCHES "^#include \"([^\"]+)\"")
        continue()
      endif()
      set(inc ${CMAKE_MATCH_1})
      if(inc MATCHES "^rocksdcp/([a-z_]+)\\.h$")
        if(NOT CMAKE_MATCH_1 IN_LIST ARG_HEADERS)
          list(APPEND found "${rel}:${n}: ${name} may not include public "
               "header ${inc}\n")
        endif()
      elseif(inc MATCHES "^([a-z_]+)/")
        if(NOT CMAKE_MATCH_1 IN_LIST ARG_DIRS)
          list(APPEND found "${rel}:${n}: ${name} may not include ${inc}\n")
        endif()
      endif()
    endforeach()
  endforeach()
  set(problems "${problems}${found}" PARENT_SCOPE)
endfunction()

check("the model's headers" include/rocksdcp ONLY ${model_public}
      HEADERS ${model_headers})
check("the public headers" include/rocksdcp EXCEPT ${model_public}
      DIRS rocksdcp HEADERS ${all_headers})
check("the testing headers" include/rocksdcp/testing DIRS rocksdcp
      HEADERS ${driver_headers})
check(model src/core ONLY ${model_sources} HEADERS ${model_headers})
check(util src/util DIRS util HEADERS ${model_headers})
check(keys src/keys DIRS keys util HEADERS ${model_headers})
check(codec src/codec DIRS codec util HEADERS ${model_headers})
check(format src/format DIRS format codec keys util schema
      HEADERS ${model_headers})
check(driver src/core EXCEPT ${model_sources} DIRS core format codec keys util
      HEADERS ${driver_headers})
check(backend src/rocksdb DIRS rocksdb format codec keys util schema
      HEADERS ${driver_headers} ${store_headers} device_profile)
check(mpi src/mpi DIRS mpi util HEADERS ${driver_headers} mpi_collective)
check(torch src/torch DIRS torch util HEADERS ${all_headers})
check(python python DIRS util HEADERS ${all_headers})
check(tools tools DIRS util HEADERS ${all_headers})
check(testing src/testing DIRS rocksdcp HEADERS ${driver_headers})

if(problems)
  string(REPLACE ";" "" problems "${problems}")
  message(FATAL_ERROR "includes across layers (cmake/check_layers.cmake):\n"
          "${problems}")
endif()
message(STATUS "layers: every include follows the layer order")
