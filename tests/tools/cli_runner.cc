#include "tools/cli_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "tools/tools_test_util.h"

namespace rocksdcp::testing {

bool Json::is_null() const {
  return node_ == nullptr || node_->kind == tools::Json::kNull;
}

Json Json::operator[](const std::string& key) const {
  if (node_ == nullptr || node_->kind != tools::Json::kObject) return {};
  const tools::Json* m = tools::Member(*node_, key);
  return m == nullptr ? Json() : Json(root_, m);
}

std::vector<Json> Json::arr() const {
  std::vector<Json> out;
  if (node_ == nullptr || node_->kind != tools::Json::kArray) return out;
  for (const tools::Json& e : node_->array) out.emplace_back(root_, &e);
  return out;
}

std::string Json::str() const {
  if (node_ == nullptr || node_->kind != tools::Json::kString) {
    return "<not a string>";
  }
  return node_->string;
}

double Json::num() const {
  if (node_ == nullptr || !node_->integer) return -1;
  return static_cast<double>(*node_->integer);
}

bool Json::boolean() const {
  return node_ != nullptr && node_->kind == tools::Json::kBool &&
         node_->boolean;
}

namespace {

// In a forked child: runs the CLI with `args`, stdout and stderr on the
// given descriptors. Never returns.
[[noreturn]] void ExecCli(const std::vector<std::string>& args, int out_fd,
                          int err_fd, int uid = -1) {
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  // Both the real and the effective user: a process whose two differ runs
  // in secure-execution mode, where an ASan build's LeakSanitizer can't
  // scan it at exit.
  if (uid >= 0 && (setgid(uid) != 0 || setuid(uid) != 0)) _exit(126);
  std::vector<std::string> copy = args;
  // ROCKSDCP_CLI_UNDER_TEST runs the tests against another build of the
  // same CLI: the static one (ctest's cli.static).
  const char* cli = std::getenv("ROCKSDCP_CLI_UNDER_TEST");
  if (cli == nullptr || *cli == '\0') cli = ROCKSDCP_CLI;
  std::vector<char*> argv = {const_cast<char*>(cli)};
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(cli, argv.data());
  _exit(127);
}

}  // namespace

CliRun CliTest::Run(const std::vector<std::string>& args,
                    const std::string& stdout_path) {
  const std::string out =
      stdout_path.empty() ? dir_.Sub("cli.out") : stdout_path;
  const std::string err = dir_.Sub("cli.err");
  pid_t pid = fork();
  if (pid == 0) {
    ExecCli(args, open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644),
            open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), run_as_uid_);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CliRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (stdout_path.empty()) r.out = tools::ReadFile(out);
  r.err = tools::ReadFile(err);
  return r;
}

CliRun CliTest::RunIntoClosedPipe(const std::vector<std::string>& args) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  close(fds[0]);
  const std::string err = dir_.Sub("cli.err");
  pid_t pid = fork();
  if (pid == 0) {
    ExecCli(args, fds[1],
            open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
  }
  close(fds[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  CliRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r.err = tools::ReadFile(err);
  return r;
}

CliRun CliTest::RunJson(std::vector<std::string> args) {
  args.push_back("--json");
  CliRun r = Run(args);
  std::string ignored;
  EXPECT_EQ(tools::RunPython({"-c",
                              "import json, sys\n"
                              "json.loads(open(sys.argv[1], 'rb').read()"
                              ".decode('utf-8'))\n",
                              dir_.Sub("cli.out")},
                             &ignored),
            0)
      << "Python's json module refused: " << r.out;
  auto parsed = tools::ParseJson(r.out, "the CLI's output");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString() << ": " << r.out;
  if (parsed.ok()) {
    auto root = std::make_shared<const tools::Json>(std::move(parsed).value());
    r.json = Json(root, root.get());
  }
  return r;
}

std::string CliTest::RunWithTerminalStderr(
    const std::vector<std::string>& args) {
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  EXPECT_GE(master, 0);
  EXPECT_EQ(grantpt(master), 0);
  EXPECT_EQ(unlockpt(master), 0);
  // The parent holds the terminal open too, so that reading never sees it
  // closed (EIO) before the child has opened it.
  const int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  EXPECT_GE(slave, 0);
  pid_t pid = fork();
  if (pid == 0) {
    ExecCli(args, open("/dev/null", O_WRONLY), slave);
  }
  // Drain the terminal while the child runs (it must never block on a full
  // buffer), then once more after it has exited.
  fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
  std::string got;
  auto drain = [&] {
    char buf[4096];
    ssize_t n;
    while ((n = read(master, buf, sizeof(buf))) > 0) {
      got.append(buf, static_cast<size_t>(n));
    }
  };
  int status = 0;
  for (;;) {
    pollfd pfd = {master, POLLIN, 0};
    poll(&pfd, 1, 100);
    drain();
    if (waitpid(pid, &status, WNOHANG) == pid) break;
  }
  drain();
  close(slave);
  close(master);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << got;
  return got;
}

void CliTest::SaveExamples(const std::vector<std::string>& ids) {
  uint64_t seed = 0;
  for (const std::string& id : ids) {
    ASSERT_OK(
        SaveDict(ExampleStateDict(++seed).dict, id, {.max_piece_bytes = 4096}));
  }
}

std::vector<std::string> CliTest::ListedIds() {
  CliRun r = RunJson({"ls", store_path()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> ids;
  for (const Json& c : r.json["checkpoints"].arr())
    ids.push_back(c["id"].str());
  return ids;
}

}  // namespace rocksdcp::testing
