// tools/files.h: OutFile's whole-or-nothing output, on a real filesystem.

#include "files.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "tools/tools_test_util.h"

namespace rocksdcp::tools {
namespace {

using ::rocksdcp::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class OutFileTest : public ToolsTest {
 protected:
  Status WriteWhole(const std::string& path, const std::string& bytes) {
    OutFile out(path);
    ROCKSDCP_RETURN_IF_ERROR(out.Open());
    ROCKSDCP_RETURN_IF_ERROR(out.Write(bytes));
    return out.Commit();
  }
  mode_t Mode(const std::string& path) {
    struct stat st;
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }
};

TEST_F(OutFileTest, AppearsOnlyOnCommit) {
  {
    OutFile out(Out("f"));
    ASSERT_OK(out.Open());
    ASSERT_OK(out.Write("half"));
    EXPECT_EQ(::access(Out("f").c_str(), F_OK), -1);
  }  // Not committed: nothing is left, not even the temporary file.
  EXPECT_THAT(ListDir(dir_.path().string()), ElementsAre("store"));
  ASSERT_OK(WriteWhole(Out("f"), "whole"));
  EXPECT_EQ(ReadFile(Out("f")), "whole");
  EXPECT_THAT(ListDir(dir_.path().string()), ElementsAre("f", "store"));
}

TEST_F(OutFileTest, ReplacesKeepingPermissionsAndFollowingSymlinks) {
  WriteFile(Out("private"), "old");
  ASSERT_EQ(::chmod(Out("private").c_str(), 0600), 0);
  ASSERT_OK(WriteWhole(Out("private"), "new"));
  EXPECT_EQ(ReadFile(Out("private")), "new");
  EXPECT_EQ(Mode(Out("private")), 0600u);

  ASSERT_EQ(::symlink(Out("private").c_str(), Out("link").c_str()), 0);
  ASSERT_OK(WriteWhole(Out("link"), "through"));
  struct stat st;
  ASSERT_EQ(::lstat(Out("link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(ReadFile(Out("private")), "through");
}

TEST_F(OutFileTest, RefusesWhatIsNoRegularFile) {
  ASSERT_EQ(::mkdir(Out("d").c_str(), 0755), 0);
  OutFile dir(Out("d"));
  EXPECT_THAT(dir.Open(), StatusIs(StatusCode::kInvalidArgument,
                                   HasSubstr("not a regular file")));
  OutFile dev("/dev/null");
  EXPECT_THAT(dev.Open(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("'/dev/null'")));
  OutFile nodir(Out("none/f"));
  EXPECT_THAT(nodir.Open(),
              StatusIs(StatusCode::kIOError, HasSubstr("none/f")));
}

TEST_F(OutFileTest, CtrlCRemovesTheTemporaryFile) {
  const pid_t pid = fork();
  if (pid == 0) {
    RemoveOutFilesOnSignals();
    OutFile out(Out("f"));
    if (!out.Open().ok() || !out.Write("partial").ok()) _exit(1);
    std::raise(SIGINT);
    _exit(2);  // Not reached: SIGINT ends the process.
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_THAT(ListDir(dir_.path().string()), ElementsAre("store"));
}

}  // namespace
}  // namespace rocksdcp::tools
