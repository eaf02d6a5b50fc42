#include "hostile/limited_run.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char** environ;

namespace rocksdcp::hostile {
namespace {

constexpr size_t kMaxCaptured = 1 << 20;

// An unlinked temporary file for one of the child's outputs.
int TempFile() {
  char name[] = "/tmp/rocksdcp-hostile-out-XXXXXX";
  const int fd = mkstemp(name);
  if (fd >= 0) unlink(name);
  return fd;
}

std::string ReadBack(int fd) {
  std::string out;
  if (fd < 0) return out;
  lseek(fd, 0, SEEK_SET);
  char buf[65536];
  for (ssize_t n;
       out.size() < kMaxCaptured && (n = read(fd, buf, sizeof(buf))) > 0;) {
    out.append(buf, static_cast<size_t>(n));
  }
  if (out.size() > kMaxCaptured) out.resize(kMaxCaptured);
  close(fd);
  return out;
}

}  // namespace

bool SanitizerBuild() {
#ifdef ROCKSDCP_SANITIZED
  return true;
#else
  return false;
#endif
}

std::string RunOutcome::Describe() const {
  char buf[96];
  if (killed) {
    std::snprintf(buf, sizeof(buf), "killed after %.1f s", seconds);
  } else if (signal != 0) {
    std::snprintf(buf, sizeof(buf), "signal %d (%s)", signal,
                  strsignal(signal));
  } else {
    std::snprintf(buf, sizeof(buf), "exit %d", exit_code);
  }
  return buf;
}

RunOutcome RunLimited(const std::vector<std::string>& argv,
                      const Limits& limits,
                      const std::vector<std::string>& env) {
  RunOutcome r;
  const int out = TempFile();
  const int err = TempFile();
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
  envs.push_back("MALLOC_ARENA_MAX=2");
  envs.insert(envs.end(), env.begin(), env.end());
  std::vector<char*> cenv;
  for (std::string& e : envs) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(out, 1);
    dup2(err, 2);
    rlimit cpu{limits.cpu_seconds, limits.cpu_seconds + 1};
    setrlimit(RLIMIT_CPU, &cpu);
    if (limits.address_space > 0 && !SanitizerBuild()) {
      rlimit as{limits.address_space, limits.address_space};
      setrlimit(RLIMIT_AS, &as);
    }
    // No core files: a crash is reported by its signal.
    rlimit core{0, 0};
    setrlimit(RLIMIT_CORE, &core);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  auto sleep = std::chrono::microseconds(200);
  while (true) {
    const pid_t got = wait4(pid, &status, WNOHANG, &usage);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (got == pid) {
      r.seconds = elapsed;
      break;
    }
    if (got < 0) {
      r.seconds = elapsed;
      r.exit_code = -1;
      break;
    }
    if (elapsed > limits.kill_after_seconds) {
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &usage);
      r.seconds = elapsed;
      r.killed = true;
      break;
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(10000));
  }
  if (!r.killed) {
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  r.max_rss = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  r.out = ReadBack(out);
  r.err = ReadBack(err);
  return r;
}

uint64_t SmallestWorkingAddressSpace(const std::vector<std::string>& argv,
                                     uint64_t low, uint64_t high,
                                     uint64_t step) {
  auto works = [&](uint64_t as) {
    for (int i = 0; i < 3; ++i) {
      if (RunLimited(argv, {.address_space = as}).exit_code != 0) return false;
    }
    return true;
  };
  if (!works(high)) return 0;
  while (high - low > step) {
    const uint64_t mid = low + (high - low) / 2;
    if (works(mid)) {
      high = mid;
    } else {
      low = mid;
    }
  }
  return high;
}

}  // namespace rocksdcp::hostile
