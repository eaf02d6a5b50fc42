// A save on a nearly full disk returns an error and leaves every committed
// checkpoint as it was, however little room is left: swept over every free
// space from 0 to a 1 MiB checkpoint's size plus 1 MiB, in 4 KiB steps (16
// KiB under a sanitizer, which runs each step several times slower), on a
// real filesystem (a small tmpfs this test mounts). The save runs in a
// child process (rocksdcp_test_child save-mib), so that an abort (RocksDB's
// assertions) fails the test instead of killing it.
//
// Mounting needs root (CI runs as root); elsewhere the test skips, saying
// why.

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "rocksdb/child_process.h"
#include "rocksdb/fault_fs_fixture.h"
#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kPage = 4096;
constexpr int64_t kCheckpointMib = 1;

class DiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mount_ = dir_.Sub("tmpfs");
    fs::create_directories(mount_);
    // Room for the store, its first checkpoint and the filler.
    if (mount("rocksdcp-test", mount_.c_str(), "tmpfs", 0, "size=16m") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs (" << std::strerror(errno)
                   << "): the disk-full sweep needs root";
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) {
      EXPECT_EQ(umount(mount_.c_str()), 0) << std::strerror(errno);
    }
  }

  uint64_t FreeBytes() const {
    struct statvfs st {};
    EXPECT_EQ(statvfs(mount_.c_str(), &st), 0);
    return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  }

  // Fills the filesystem until `free` bytes are left.
  void LeaveFree(uint64_t free) {
    const uint64_t now = FreeBytes();
    ASSERT_GE(now, free);
    const int fd = open((mount_ + "/filler").c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const int rc = now == free ? 0 : posix_fallocate(fd, 0, now - free);
    close(fd);
    ASSERT_EQ(rc, 0) << std::strerror(rc);
    ASSERT_EQ(FreeBytes(), free);
  }

  ScopedTempDir dir_;
  std::string mount_;
  bool mounted_ = false;
};

TEST_F(DiskFullTest,
       EveryAmountOfFreeSpaceFailsCleanlyAndKeepsWhatWasCommitted) {
  const uint64_t limit = (kCheckpointMib << 20) + (1 << 20);
  const uint64_t pages = limit / kPage + 1;
  const uint64_t step = kPage * SweepStride(pages, pages);
  int saved = 0, failed = 0;
  for (uint64_t free = 0; free <= limit; free += step) {
    SCOPED_TRACE("free space " + std::to_string(free));
    const std::string store = mount_ + "/store";
    ExampleState first = ExampleStateDict(1);
    {
      ASSERT_OK_AND_ASSIGN(auto s, Store::Open(store));
      ASSERT_OK_AND_ASSIGN(auto w, s->NewWriter());
      ASSERT_OK(Save(first.dict, *w, {.checkpoint_id = "first"}));
    }
    LeaveFree(free);
    const int code =
        RunChild({"save-mib", store, "second", std::to_string(kCheckpointMib)});
    ASSERT_TRUE(code == 0 || code == 3)
        << "the save neither committed nor failed with an error: exit " << code
        << " (-1: killed by a signal)";
    (code == 0 ? saved : failed)++;
    fs::remove(mount_ + "/filler");

    // With room again, the store opens read-write, the first checkpoint
    // loads bit for bit, and the second is there whole or not at all.
    {
      ASSERT_OK_AND_ASSIGN(auto s, Store::Open(store));
      ExampleState into = EmptyExampleStateDict();
      ASSERT_OK_AND_ASSIGN(auto r, s->NewReader());
      ASSERT_OK(Load(&into.dict, *r, {.checkpoint_id = "first"}));
      EXPECT_TRUE(IsExampleState(into, 1));
      auto second = s->Info("second");
      EXPECT_EQ(second.ok(), code == 0) << second.status().ToString();
      if (second.ok()) {
        OwnedTensor data = ZeroTensor(DType::kUInt8, {kCheckpointMib << 20});
        StateDict sd{{"data", data.view}};
        ASSERT_OK_AND_ASSIGN(auto r2, s->NewReader());
        ASSERT_OK(Load(&sd, *r2, {.checkpoint_id = "second"}));
        EXPECT_TRUE(SameTensor(
            data.view,
            RandomTensor(DType::kUInt8, {kCheckpointMib << 20}, 7).view));
      }
      ASSERT_OK(s->CollectGarbage().status());
    }
    fs::remove_all(store);
  }
  // The sweep reached both ends: saves that fit, and saves that could not.
  EXPECT_GT(saved, 0);
  EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace rocksdcp::testing
