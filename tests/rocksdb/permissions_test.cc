// A store a user may not write, or on a read-only filesystem: opening it
// read-write fails with the real reason (not a made-up "locked by another
// process"), and opening it read-only still inspects it. The checks run the
// test child as another user (nobody) or against a tmpfs remounted
// read-only, so they need root (CI runs as root); elsewhere they skip.

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "rocksdb/child_process.h"
#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

namespace fs = std::filesystem;

constexpr int kNobody = 65534;

class PermissionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: runs a child as nobody";
    // Every directory on the way must let nobody in; the store's own
    // directory is under a path that contains "lock", which once sufficed
    // to turn any error into Busy.
    base_ = dir_.Sub("deadlock-free");
    fs::create_directories(base_);
    for (const std::string& d : {dir_.path().string(), base_}) {
      ASSERT_EQ(chmod(d.c_str(), 0755), 0) << std::strerror(errno);
    }
    store_ = base_ + "/store";
  }

  void SaveOne() {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(store_));
    ASSERT_OK_AND_ASSIGN(auto writer, store->NewWriter());
    ExampleState state = ExampleStateDict(1);
    ASSERT_OK(Save(state.dict, *writer, {.checkpoint_id = "c"}));
  }

  ScopedTempDir dir_;
  std::string base_, store_;
};

TEST_F(PermissionsTest,
       AUserWhoCantWriteTheStoreGetsTheRealErrorAndCanInspectIt) {
  SaveOne();
  ChildOutput rw = RunChildAs(kNobody, {"open", store_, "rw"});
  EXPECT_EQ(rw.exit_code, 3);
  EXPECT_THAT(rw.out, AllOf(StartsWith("IOError: cannot open store '" + store_),
                            HasSubstr("Permission denied"),
                            Not(HasSubstr("locked by another process"))));
  ChildOutput ro = RunChildAs(kNobody, {"open", store_, "ro"});
  EXPECT_EQ(ro.exit_code, 0) << ro.out;
  EXPECT_EQ(ro.out, "OK c\n");
}

// Issue #38: RocksDB reads EACCES as "no such file", so this once said the
// store did not exist.
TEST_F(PermissionsTest, AStoreDirectoryTheUserMayNotReadSaysSo) {
  SaveOne();
  ASSERT_EQ(chmod(store_.c_str(), 0), 0);
  for (const char* mode : {"ro", "rw"}) {
    SCOPED_TRACE(mode);
    ChildOutput out = RunChildAs(kNobody, {"open", store_, mode});
    EXPECT_EQ(out.exit_code, 3);
    EXPECT_EQ(out.out, "IOError: cannot open store '" + store_ +
                           "': Permission denied: this process may not read "
                           "the store's directory (mode 0000)\n");
  }
  // A directory on the way that nobody may search.
  ASSERT_EQ(chmod(store_.c_str(), 0755), 0);
  ASSERT_EQ(chmod(base_.c_str(), 0700), 0);
  ChildOutput out = RunChildAs(kNobody, {"open", store_, "ro"});
  EXPECT_EQ(out.exit_code, 3);
  EXPECT_THAT(out.out,
              AllOf(StartsWith("IOError: cannot open store '" + store_),
                    HasSubstr("Permission denied: this process may "
                              "not reach the store's directory"),
                    Not(HasSubstr("does not exist"))));
  ASSERT_EQ(chmod(base_.c_str(), 0755), 0);
}

TEST_F(PermissionsTest, AReadOnlyLockFileIsNotBusy) {
  SaveOne();
  // Everything writable by nobody but the LOCK file.
  for (const fs::directory_entry& e :
       fs::recursive_directory_iterator(store_)) {
    ASSERT_EQ(chmod(e.path().c_str(), e.is_directory() ? 0777 : 0666), 0);
  }
  ASSERT_EQ(chmod(store_.c_str(), 0777), 0);
  ASSERT_EQ(chmod((store_ + "/LOCK").c_str(), 0444), 0);
  ChildOutput rw = RunChildAs(kNobody, {"open", store_, "rw"});
  EXPECT_EQ(rw.exit_code, 3);
  EXPECT_THAT(rw.out, AllOf(HasSubstr("while open a file for lock: " + store_ +
                                      "/LOCK"),
                            HasSubstr("Permission denied"),
                            Not(HasSubstr("locked by another process"))));
}

TEST_F(PermissionsTest, AStoreOnAReadOnlyMountOpensReadOnlyOnly) {
  const std::string mount_dir = base_ + "/mnt";
  fs::create_directories(mount_dir);
  ASSERT_EQ(mount("rocksdcp-test", mount_dir.c_str(), "tmpfs", 0, "size=8m"), 0)
      << std::strerror(errno);
  store_ = mount_dir + "/store";
  SaveOne();
  ASSERT_EQ(mount(nullptr, mount_dir.c_str(), nullptr, MS_REMOUNT | MS_RDONLY,
                  nullptr),
            0)
      << std::strerror(errno);
  ChildOutput rw = RunChildAs(-1, {"open", store_, "rw"});
  ChildOutput ro = RunChildAs(-1, {"open", store_, "ro"});
  EXPECT_EQ(umount(mount_dir.c_str()), 0) << std::strerror(errno);
  EXPECT_EQ(rw.exit_code, 3);
  EXPECT_THAT(rw.out, AllOf(StartsWith("IOError: cannot open store '" + store_),
                            HasSubstr("Read-only file system"),
                            Not(HasSubstr("locked by another process"))));
  EXPECT_EQ(ro.exit_code, 0) << ro.out;
  EXPECT_EQ(ro.out, "OK c\n");
}

}  // namespace
}  // namespace rocksdcp::testing
