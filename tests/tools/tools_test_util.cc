#include "tools/tools_test_util.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace rocksdcp::tools {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

std::string ShellQuoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

int RunPython(const std::vector<std::string>& args, std::string* out) {
  std::string cmd = ROCKSDCP_PYTHON3;
  for (const std::string& a : args) cmd += " " + ShellQuoted(a);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  out->clear();
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool HaveNumpy() {
  std::string out;
  return RunPython({"-c", "import numpy"}, &out) == 0;
}

::testing::AssertionResult ReadSafetensors(const std::string& path,
                                           Json* report) {
  std::string out;
  const int rc = RunPython(
      {std::string(ROCKSDCP_SOURCE_DIR) + "/tests/tools/read_safetensors.py",
       path},
      &out);
  if (rc != 0) {
    return ::testing::AssertionFailure()
           << "read_safetensors.py refused " << path << " (exit " << rc
           << "; its reason is on stderr)";
  }
  auto parsed = ParseJson(out, "read_safetensors.py's report");
  if (!parsed.ok()) {
    return ::testing::AssertionFailure() << parsed.status().ToString();
  }
  *report = std::move(parsed).value();
  return ::testing::AssertionSuccess();
}

const Json* Member(const Json& object, std::string_view key) {
  for (const auto& [k, v] : object.object) {
    if (k == key) return &v;
  }
  return nullptr;
}

}  // namespace rocksdcp::tools
