#include "rocksdb/child_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace rocksdcp::testing {
namespace {

// The test child's command line, its path and then `args`, as execv takes
// it; built before fork, so that the child allocates nothing. Holds the
// strings its pointers point into, so it stays where it is made.
struct ChildCommand {
  explicit ChildCommand(const std::vector<std::string>& args) {
    strings.reserve(args.size() + 1);
    strings.emplace_back(ROCKSDCP_TEST_CHILD);
    strings.insert(strings.end(), args.begin(), args.end());
    for (std::string& s : strings) argv.push_back(s.data());
    argv.push_back(nullptr);
  }
  ChildCommand(const ChildCommand&) = delete;
  ChildCommand& operator=(const ChildCommand&) = delete;

  std::vector<std::string> strings;
  std::vector<char*> argv;
};

}  // namespace

int RunChild(const std::vector<std::string>& args) {
  ChildCommand command(args);
  pid_t pid = fork();
  if (pid == 0) {
    execv(ROCKSDCP_TEST_CHILD, command.argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

ChildOutput RunChildAs(int uid, const std::vector<std::string>& args) {
  int out[2];
  EXPECT_EQ(pipe(out), 0);
  // Opened as this user and executed through the descriptor: another user
  // may not be allowed into the build tree's directories (a clone under
  // /root, or in a mktemp -d directory of mode 0700).
  const int bin_fd = open(ROCKSDCP_TEST_CHILD, O_RDONLY);
  EXPECT_GE(bin_fd, 0) << ROCKSDCP_TEST_CHILD << ": " << std::strerror(errno);
  ChildCommand command(args);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
#ifdef ROCKSDCP_SHARED_LIBRARY
    if (std::strncmp(*e, "LD_LIBRARY_PATH=", 16) == 0) continue;
#endif
    env_strings.emplace_back(*e);
  }
#ifdef ROCKSDCP_SHARED_LIBRARY
  // The same for the shared library the child loads: a copy in a directory
  // everyone may read, found through LD_LIBRARY_PATH.
  namespace fs = std::filesystem;
  char lib_dir[] = "/tmp/rocksdcp-child-lib-XXXXXX";
  EXPECT_NE(mkdtemp(lib_dir), nullptr) << std::strerror(errno);
  chmod(lib_dir, 0755);
  std::error_code ec;
  const fs::path lib = fs::path(lib_dir) / ROCKSDCP_SHARED_LIBRARY_SONAME;
  fs::copy_file(ROCKSDCP_SHARED_LIBRARY, lib, ec);
  EXPECT_FALSE(ec) << ROCKSDCP_SHARED_LIBRARY << ": " << ec.message();
  chmod(lib.c_str(), 0755);
  env_strings.push_back(std::string("LD_LIBRARY_PATH=") + lib_dir);
#endif
  std::vector<char*> env;
  for (std::string& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    if (uid >= 0 && (setgid(uid) != 0 || setuid(uid) != 0)) _exit(126);
    fexecve(bin_fd, command.argv.data(), env.data());
    _exit(127);
  }
  close(bin_fd);
  close(out[1]);
  ChildOutput result;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof(buf))) > 0;) {
    result.out.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
#ifdef ROCKSDCP_SHARED_LIBRARY
  fs::remove_all(lib_dir, ec);
#endif
  return result;
}

BackgroundChild::BackgroundChild(const std::vector<std::string>& args) {
  ChildCommand command(args);
  pid_ = fork();
  if (pid_ == 0) {
    execv(ROCKSDCP_TEST_CHILD, command.argv.data());
    _exit(127);
  }
}

bool BackgroundChild::Exited() {
  if (pid_ < 0) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  pid_ = -1;
  return true;
}

BackgroundChild::~BackgroundChild() {
  if (pid_ < 0) return;
  int status = 0;
  waitpid(pid_, &status, 0);
}

LockHolder::LockHolder(const std::string& store) {
  int to_child[2], from_child[2];
  EXPECT_EQ(pipe(to_child), 0);
  EXPECT_EQ(pipe(from_child), 0);
  pid_ = fork();
  if (pid_ == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    close(to_child[1]);
    close(from_child[0]);
    execl(ROCKSDCP_TEST_CHILD, ROCKSDCP_TEST_CHILD, "hold", store.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  stdin_ = to_child[1];
  char buf[6] = {};
  // Blocks until the child has the lock and says so.
  ready_ = read(from_child[0], buf, 5) == 5 && std::string(buf) == "ready";
  close(from_child[0]);
}

LockHolder::~LockHolder() {
  close(stdin_);  // The child exits on EOF.
  int status;
  waitpid(pid_, &status, 0);
}

}  // namespace rocksdcp::testing
