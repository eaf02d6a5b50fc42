// FileLock: one holder at a time across open files; a waiting Acquire
// outlasts GC's brief hold and ends up holding the file its path names.

#include "util/file_lock.h"

#include <sys/stat.h>

#include <atomic>
#include <thread>

#include "test_util.h"

namespace rocksdcp::util {
namespace {

using testing::ScopedTempDir;

ino_t Inode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

TEST(FileLockTest, SecondTryAcquireFindsItHeldUntilReleased) {
  ScopedTempDir dir;
  const std::string path = dir.Sub("x.lock");
  ASSERT_OK_AND_ASSIGN(std::optional<FileLock> first,
                       FileLock::TryAcquire(path));
  ASSERT_TRUE(first.has_value());
  ASSERT_OK_AND_ASSIGN(std::optional<FileLock> second,
                       FileLock::TryAcquire(path));
  EXPECT_FALSE(second.has_value());
  first.reset();
  ASSERT_OK_AND_ASSIGN(second, FileLock::TryAcquire(path));
  EXPECT_TRUE(second.has_value());
}

// GC's pattern: it locks a writer's fresh lock file, finds no directory,
// unlinks the file and lets go. A writer waiting in Acquire meanwhile must
// come back holding a lock on the file the path names now, not on the
// unlinked one.
TEST(FileLockTest, AcquireWaitsOutAnUnlinkingHolder) {
  ScopedTempDir dir;
  const std::string path = dir.Sub("writer.lock");
  ASSERT_OK_AND_ASSIGN(std::optional<FileLock> gc, FileLock::TryAcquire(path));
  ASSERT_TRUE(gc.has_value());

  std::atomic<bool> released{false};
  Result<FileLock> writer = Status::Internal("not run");
  bool released_first = false;
  std::thread t([&] {
    writer = FileLock::Acquire(path);
    released_first = released.load();
  });
  released.store(true);
  gc->UnlinkAndRelease();
  t.join();

  ASSERT_OK(writer);
  EXPECT_TRUE(released_first);
  EXPECT_NE(Inode(path), 0u);  // A new file, which the writer holds.
  ASSERT_OK_AND_ASSIGN(std::optional<FileLock> other,
                       FileLock::TryAcquire(path));
  EXPECT_FALSE(other.has_value());
}

}  // namespace
}  // namespace rocksdcp::util
