#!/bin/bash
# run_on_fs.sh <xfs|tmpfs> <command> [args...]: runs a test binary with its
# temporary directories (TMPDIR, and TEST_TMPDIR, which GoogleTest's
# testing::TempDir() reads first) on a file system made for the run: XFS on
# a 2 GiB sparse loop image, or a 2 GiB tmpfs. The file system, the loop
# device and the image are removed on exit, whatever the test did; the exit
# status is the test's.
#
# Where the file system cannot be made (not root, no loop device, no
# mkfs.xfs, a kernel without XFS) it says why on stderr and exits 77, which
# ctest's SKIP_RETURN_CODE (tests/fs/fs.cmake) reports as a skip.
#
# Environment:
#   RUN_ON_FS_DIR      where the image and the mount point go (default:
#                      TMPDIR, else /tmp). The image is sparse: it takes
#                      what the test writes, not 2 GiB.
#   RUN_ON_FS_TIMEOUT  seconds after which the test is stopped (TERM, then
#                      KILL 10 s later) and the file system removed; set it
#                      below ctest's TIMEOUT, whose SIGKILL no trap sees,
#                      and which would leave the mount behind.

set -u

readonly kSkip=77
readonly kSize=2G

skip() {
  echo "run_on_fs.sh: skipped: $*" >&2
  exit "$kSkip"
}

if [ $# -lt 2 ]; then
  echo "usage: $0 <xfs|tmpfs> <command> [args...]" >&2
  exit 2
fi
fstype=$1
shift
case "$fstype" in
  xfs|tmpfs) ;;
  *) echo "run_on_fs.sh: unknown file system '$fstype' (xfs or tmpfs)" >&2
     exit 2 ;;
esac

[ "$(id -u)" -eq 0 ] || skip "mounting a $fstype needs root (uid $(id -u))"
command -v mount > /dev/null || skip "no mount (Debian's mount package)"
if [ "$fstype" = xfs ]; then
  command -v mkfs.xfs > /dev/null ||
    skip "no mkfs.xfs (Debian's xfsprogs: apt-get install xfsprogs)"
  command -v losetup > /dev/null || skip "no losetup (Debian's mount package)"
fi

work=
loop=
mnt=
child=
cleanup() {
  local status=$?
  trap - EXIT INT TERM HUP
  if [ -n "$child" ]; then
    kill -TERM "$child" 2> /dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 "$child" 2> /dev/null || break
      sleep 1
    done
    kill -KILL "$child" 2> /dev/null
    wait "$child" 2> /dev/null
  fi
  if [ -n "$mnt" ] && mountpoint -q "$mnt"; then
    # A process the test left behind may still hold a file there: retry,
    # then detach lazily rather than leave the mount.
    for _ in 1 2 3 4 5; do
      umount "$mnt" 2> /dev/null && break
      sleep 1
    done
    if mountpoint -q "$mnt"; then
      echo "run_on_fs.sh: $mnt busy; detaching it lazily" >&2
      umount -l "$mnt"
    fi
  fi
  [ -n "$loop" ] && losetup -d "$loop" 2> /dev/null
  [ -n "$work" ] && rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

base=${RUN_ON_FS_DIR:-${TMPDIR:-/tmp}}
work=$(mktemp -d "$base/rocksdcp-$fstype.XXXXXX") ||
  skip "cannot make a directory in $base"
# Tests run children as nobody (permissions_test.cc): every directory on
# the way to their stores must let them in.
chmod 0755 "$work"
mnt=$work/mnt
mkdir "$mnt"

case "$fstype" in
  xfs)
    image=$work/xfs.img
    truncate -s "$kSize" "$image" || skip "cannot make a $kSize image in $base"
    if ! out=$(mkfs.xfs -q "$image" 2>&1); then
      skip "mkfs.xfs failed: $out"
    fi
    if ! loop=$(losetup --find --show "$image" 2>&1); then
      why=$loop
      loop=
      [ -e /dev/loop-control ] || why="$why (no /dev/loop-control)"
      skip "no loop device: $why"
    fi
    if ! out=$(mount -t xfs "$loop" "$mnt" 2>&1); then
      grep -qw xfs /proc/filesystems ||
        out="$out (no xfs in /proc/filesystems: the kernel lacks it)"
      skip "cannot mount XFS from $loop: $out"
    fi
    ;;
  tmpfs)
    if ! out=$(mount -t tmpfs -o "size=$kSize,mode=0755" rocksdcp-test \
                 "$mnt" 2>&1); then
      skip "cannot mount a tmpfs: $out"
    fi
    ;;
esac

tmp=$mnt/tmp
mkdir "$tmp"
chmod 1777 "$tmp"
echo "run_on_fs.sh: $(findmnt -no FSTYPE,SOURCE,OPTIONS "$mnt")" \
     "at $mnt; TMPDIR=$tmp" >&2

limit=()
if [ -n "${RUN_ON_FS_TIMEOUT:-}" ]; then
  limit=(timeout -k 10 "$RUN_ON_FS_TIMEOUT")
fi
# In the background, so that a TERM or an INT reaches the trap, which stops
# the test before unmounting.
TMPDIR=$tmp TEST_TMPDIR=$tmp "${limit[@]}" "$@" &
child=$!
wait "$child"
status=$?
child=
if [ ${#limit[@]} -gt 0 ] && [ "$status" -eq 124 ]; then
  echo "run_on_fs.sh: stopped after RUN_ON_FS_TIMEOUT=$RUN_ON_FS_TIMEOUT s" >&2
fi
exit "$status"
