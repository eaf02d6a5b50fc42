# Cross-build for aarch64-linux-gnu on a Debian x86-64 host, with
# Debian's cross compiler (crossbuild-essential-arm64) and the arm64
# dependency packages unpacked with `dpkg -x` into one directory
# (ROCKSDCP_ARM64_SYSROOT, default build-arm64-sysroot in the repository,
# where scripts/arm64-sysroot.sh unpacks them by default): see issue #16.
#
# The compiler keeps its own libc (/usr/aarch64-linux-gnu), so the unpacked
# tree is not passed as --sysroot (CMAKE_SYSROOT): it is a find root, plus
# include, link and rpath-link directories. scripts/arm64-sysroot.sh makes
# it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

get_filename_component(_default_dep_root
  "${CMAKE_CURRENT_LIST_DIR}/../../build-arm64-sysroot" ABSOLUTE)
set(ROCKSDCP_ARM64_SYSROOT "${_default_dep_root}" CACHE PATH
  "Where the arm64 .debs were unpacked (dpkg -x)")
# try_compile projects re-read this file: pass them the same directory.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ROCKSDCP_ARM64_SYSROOT)
set(_dep_root "${ROCKSDCP_ARM64_SYSROOT}")
set(_triple aarch64-linux-gnu)

set(CMAKE_C_COMPILER   ${_triple}-gcc)
set(CMAKE_CXX_COMPILER ${_triple}-g++)

set(CMAKE_FIND_ROOT_PATH "${_dep_root}" "/usr/${_triple}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)   # flatc runs on the host
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Debian's multiarch layout: usr/lib/aarch64-linux-gnu/cmake/<pkg>.
set(CMAKE_LIBRARY_ARCHITECTURE ${_triple})

# Headers and libraries of the unpacked packages (after the compiler's own),
# and -rpath-link so that the linker resolves librocksdb.so's own NEEDED
# libraries (gflags, snappy, lz4, zstd, bz2, z) from the same tree.
set(_libdirs "${_dep_root}/usr/lib/${_triple}" "${_dep_root}/lib/${_triple}")
set(CMAKE_C_FLAGS_INIT   "-idirafter ${_dep_root}/usr/include")
set(CMAKE_CXX_FLAGS_INIT "-idirafter ${_dep_root}/usr/include")
set(_link "")
foreach(d ${_libdirs})
  string(APPEND _link " -L${d} -Wl,-rpath-link,${d}")
endforeach()
set(CMAKE_EXE_LINKER_FLAGS_INIT    "${_link}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_link}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${_link}")

# pkg-config (xxHash, zstd): only the arm64 tree's .pc files, paths prefixed.
set(ENV{PKG_CONFIG_LIBDIR} "${_dep_root}/usr/lib/${_triple}/pkgconfig:${_dep_root}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${_dep_root}")

# ctest, and gtest_discover_tests at build time, run aarch64 binaries
# through qemu: -L /usr/aarch64-linux-gnu gives it the cross toolchain's
# loader, libc and libstdc++; LD_LIBRARY_PATH (set in the guest, -E) the
# unpacked dependency libraries. Test children that a test binary execs
# itself (rocksdcp_test_child, the CLI) run only where binfmt_misc hands
# aarch64 ELF files to qemu (qemu-user-static's registration): without it
# their exec fails (exit 127), as in a container.
set(CMAKE_CROSSCOMPILING_EMULATOR
  qemu-aarch64-static -L /usr/${_triple}
  -E "LD_LIBRARY_PATH=${_dep_root}/usr/lib/${_triple}:${_dep_root}/lib/${_triple}")
