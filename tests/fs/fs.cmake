# ctests fs.<fs>.<suite> (issue #38, "Other file systems"): the crash,
# power-loss, I/O-fault, disk-full, permission, storage-contract and
# O_DIRECT tests again, each on a file system made for it by run_on_fs.sh:
# XFS on a loop device (Debian's xfsprogs), and tmpfs. The other tests run
# on whatever holds TMPDIR (ext4 in CI). Label `other_fs` (ctest -L
# other_fs runs them alone, -LE other_fs leaves them out); they skip (exit
# 77) where the file system can't be made: not root, no loop device, no
# mkfs.xfs.
#
# Sized to add under 5 minutes of wall time to a ctest -j2 on 2 cores: all
# of them took 109 s (213 s of test time) with -j2 beside another build
# (load 4-6); each, the power-loss sweeps 25-35 s, I/O faults 23-29 s,
# disk full 38 s, the 60 kills 5-17 s, the rest under 2 s. A store that
# preallocates on tmpfs (RocksDB's fallocate of 64 MiB for the WAL, 4 MiB
# for the MANIFEST, which take and zero memory there) makes tmpfs's
# power-loss and I/O-fault runs 2-4 times as long: 142-208 s in all. The
# 200 kills stay with the ext4 run of the crash test.
# The disk-full sweep mounts a 16 MiB tmpfs of its own (disk_full_test.cc)
# under the file system's TMPDIR: what it adds here is that nesting, not a
# full XFS.
#
# Included from tests/CMakeLists.txt, after the test binaries.

set(fs_script ${CMAKE_CURRENT_LIST_DIR}/run_on_fs.sh)
# The crash harness's kills per file system (3 episodes of 20; the default
# on ext4 is 200). Sanitized builds run several times slower.
set(fs_crash_kills 60)
if(ROCKSDCP_SANITIZE)
  set(fs_crash_kills 20)
endif()
# run_on_fs.sh stops the test itself a minute before ctest would: ctest's
# SIGKILL leaves no chance to unmount and free the loop device.
set(fs_timeout 900)
math(EXPR fs_script_timeout "${fs_timeout} - 60")

# rocksdcp_fs_test(<suite> <target> <gtest filter> [COST <s>]
#                  [ENV <var=value>...]):
# fs.xfs.<suite> and fs.tmpfs.<suite>, each running <target>'s tests that
# <gtest filter> selects. COST, about its seconds in CI, starts the long
# ones early in a fresh tree (registered last, they would start last).
function(rocksdcp_fs_test suite target filter)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "COST" "ENV")
  if(NOT arg_COST)
    set(arg_COST 0)
  endif()
  set(env RUN_ON_FS_TIMEOUT=${fs_script_timeout} ${arg_ENV})
  foreach(fs xfs tmpfs)
    set(name fs.${fs}.${suite})
    # A cross build's binary runs under its emulator, which ctest adds only
    # to a COMMAND that is a target.
    add_test(NAME ${name}
      COMMAND ${fs_script} ${fs} ${CMAKE_CROSSCOMPILING_EMULATOR}
              $<TARGET_FILE:${target}> --gtest_filter=${filter})
    set_tests_properties(${name} PROPERTIES
      LABELS other_fs SKIP_RETURN_CODE 77 TIMEOUT ${fs_timeout}
      COST ${arg_COST} ENVIRONMENT "${env}")
  endforeach()
endfunction()

rocksdcp_fs_test(crash rocksdcp_crash_stress_tests "CrashHarnessTest.*"
  COST 25 ENV ROCKSDCP_CRASH_KILLS=${fs_crash_kills})
rocksdcp_fs_test(power_loss rocksdcp_fault_tests
  "FaultFsTest.*:PowerLossTest.*:CompressedPowerLossTest.*" COST 55)
rocksdcp_fs_test(io_fault rocksdcp_fault_tests
  "IoFaultTest.*:IoFaultReferencedTest.*:DirectReadFallbackTest.*" COST 50)
rocksdcp_fs_test(disk_full rocksdcp_fault_tests "DiskFullTest.*" COST 50)
rocksdcp_fs_test(permissions rocksdcp_fault_tests "PermissionsTest.*")
rocksdcp_fs_test(contract rocksdcp_rocksdb_tests "StorageContract/RocksDB.*")
# O_DIRECT: XFS takes it; tmpfs takes it from Linux 6.6, but its files live
# in memory, so loads read them from there; before 6.6 it refuses it (EINVAL),
# as ramfs still does.
rocksdcp_fs_test(direct_io rocksdcp_rocksdb_tests
  "ReaderTest.*ODirect*:ReaderTest.DirectReads*:WriterTest.DirectWrites*")
