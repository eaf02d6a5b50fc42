// The FaultFs itself: what survives its power loss, and its faults.

#include "rocksdb/fault_fs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "test_util.h"

namespace rocksdcp::testing {
namespace {

using ::testing::HasSubstr;

class FaultFsTest : public ::testing::Test {
 protected:
  FaultFsTest() : fs_(std::make_shared<FaultFs>(dir_.path().string())) {}

  std::string Path(const std::string& name) const { return dir_.Sub(name); }

  // Writes `data` to a new file `name`, synced or not.
  void Write(const std::string& name, const std::string& data, bool sync) {
    std::unique_ptr<rocksdb::FSWritableFile> f;
    ASSERT_TRUE(fs_->NewWritableFile(Path(name), {}, &f, nullptr).ok());
    ASSERT_TRUE(f->Append(data, {}, nullptr).ok());
    if (sync) {
      ASSERT_TRUE(f->Sync({}, nullptr).ok());
    }
    ASSERT_TRUE(f->Close({}, nullptr).ok());
  }

  void SyncDir() {
    std::unique_ptr<rocksdb::FSDirectory> d;
    ASSERT_TRUE(fs_->NewDirectory(dir_.path().string(), {}, &d, nullptr).ok());
    ASSERT_TRUE(d->Fsync({}, nullptr).ok());
  }

  // The file's contents, or "<missing>".
  std::string Read(const std::string& name) const {
    std::ifstream in(Path(name), std::ios::binary);
    if (!in) return "<missing>";
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  ScopedTempDir dir_;
  std::shared_ptr<FaultFs> fs_;
};

TEST_F(FaultFsTest, PowerLossKeepsOnlySyncedDataAndEntries) {
  Write("synced", "durable", /*sync=*/true);
  Write("unsynced", "lost", /*sync=*/false);
  SyncDir();  // Both names are durable; only one file's data is.
  Write("new", "no entry", /*sync=*/true);  // Its entry is not durable.
  ASSERT_OK(fs_->SimulatePowerLoss());
  EXPECT_EQ(Read("synced"), "durable");
  EXPECT_EQ(Read("unsynced"), "");
  EXPECT_EQ(Read("new"), "<missing>");
}

TEST_F(FaultFsTest, PowerLossUndoesUnsyncedDeleteAndRename) {
  Write("a", "alpha", /*sync=*/true);
  Write("b", "beta", /*sync=*/true);
  SyncDir();
  ASSERT_TRUE(fs_->DeleteFile(Path("a"), {}, nullptr).ok());
  ASSERT_TRUE(fs_->RenameFile(Path("b"), Path("c"), {}, nullptr).ok());
  ASSERT_EQ(Read("a"), "<missing>");
  ASSERT_OK(fs_->SimulatePowerLoss());
  EXPECT_EQ(Read("a"), "alpha");
  EXPECT_EQ(Read("b"), "beta");
  EXPECT_EQ(Read("c"), "<missing>");
}

TEST_F(FaultFsTest, NoOperationReachesTheDiskOnceThePowerIsCut) {
  fs_->CutPowerAfter(1);
  std::unique_ptr<rocksdb::FSWritableFile> f;
  ASSERT_TRUE(fs_->NewWritableFile(Path("x"), {}, &f, nullptr).ok());
  EXPECT_TRUE(f->Append("data", {}, nullptr).IsIOError());
  EXPECT_TRUE(fs_->power_is_off());
  EXPECT_TRUE(f->Close({}, nullptr).IsIOError());
  ASSERT_OK(fs_->SimulatePowerLoss());
  EXPECT_FALSE(fs_->power_is_off());
  EXPECT_EQ(Read("x"), "<missing>");
}

TEST_F(FaultFsTest, FailsTheNthOperationOfTheChosenKinds) {
  fs_->InjectFault(2, kOpSync, FaultType::kNoSpace, /*sticky=*/false);
  std::unique_ptr<rocksdb::FSWritableFile> f;
  ASSERT_TRUE(fs_->NewWritableFile(Path("x"), {}, &f, nullptr).ok());
  ASSERT_TRUE(f->Append("data", {}, nullptr).ok());
  EXPECT_TRUE(f->Sync({}, nullptr).ok());  // The first sync.
  const rocksdb::IOStatus s = f->Sync({}, nullptr);
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_THAT(s.ToString(), HasSubstr("sync " + Path("x")));
  EXPECT_TRUE(f->Sync({}, nullptr).ok());  // Not sticky.
  EXPECT_EQ(fs_->faults_injected(), 1u);
  EXPECT_EQ(fs_->Count(kOpSync), 3u);
  EXPECT_EQ(fs_->Count(kOpCreate | kOpWrite), 2u);
}

}  // namespace
}  // namespace rocksdcp::testing
