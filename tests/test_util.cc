#include "test_util.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <system_error>
#include <vector>

namespace rocksdcp::testing {

namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

std::string RandomBytes(size_t n, uint64_t seed) {
  std::string out(n, '\0');
  uint64_t state = seed;
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = SplitMix64(state);
    std::memcpy(out.data() + i, &v, std::min<size_t>(8, n - i));
  }
  return out;
}

OwnedTensor RandomTensor(DType dtype, std::vector<int64_t> sizes,
                         uint64_t seed) {
  OwnedTensor t = ZeroTensor(dtype, std::move(sizes));
  const std::string r = RandomBytes(t.bytes.size(), seed);
  std::memcpy(t.bytes.data(), r.data(), r.size());
  return t;
}

OwnedTensor ZeroTensor(DType dtype, std::vector<int64_t> sizes) {
  OwnedTensor t;
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  // At least one byte, so data is never null.
  t.bytes.assign(std::max<size_t>(1, n * DTypeSize(dtype)), 0);
  t.view = TensorView::Contiguous(dtype, std::move(sizes), t.bytes.data());
  return t;
}

::testing::AssertionResult SameTensor(const TensorView& a,
                                      const TensorView& b) {
  if (a.dtype != b.dtype) {
    return ::testing::AssertionFailure()
           << "dtype " << DTypeName(a.dtype) << " vs " << DTypeName(b.dtype);
  }
  if (a.sizes != b.sizes)
    return ::testing::AssertionFailure() << "sizes differ";
  // Compare contiguous copies.
  std::vector<uint8_t> ca(a.nbytes() + 1), cb(b.nbytes() + 1);
  CopyTensor(a, TensorView::Contiguous(a.dtype, a.sizes, ca.data()));
  CopyTensor(b, TensorView::Contiguous(b.dtype, b.sizes, cb.data()));
  if (ca != cb) {
    size_t i = 0;
    while (ca[i] == cb[i]) ++i;
    return ::testing::AssertionFailure() << "bytes differ at offset " << i;
  }
  return ::testing::AssertionSuccess();
}

std::map<std::string, ErrorDocRow> ReadErrorDoc(
    const std::string& path, const std::string& name_prefix) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  const std::regex row(R"(^\| `([a-z0-9-]+)` \|[^|]*\| (\w+) \| `(.*)` \|$)");
  std::map<std::string, ErrorDocRow> rows;
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, row) &&
        m[1].str().rfind(name_prefix, 0) == 0) {
      EXPECT_TRUE(rows.count(m[1]) == 0) << "row " << m[1] << " twice";
      rows[m[1]] = {m[2], m[3]};
    }
  }
  return rows;
}

::testing::AssertionResult IsDocumentedError(
    const std::map<std::string, ErrorDocRow>& doc, const std::string& name,
    const ErrorDocRow& got) {
  if (std::getenv("ROCKSDCP_PRINT_ERRORS") != nullptr) {
    std::cout << "| `" << name << "` | | " << got.code << " | `" << got.message
              << "` |\n";
  }
  if (got.code == "OK") {
    return ::testing::AssertionFailure() << name << " did not fail";
  }
  auto it = doc.find(name);
  if (it == doc.end()) {
    return ::testing::AssertionFailure()
           << "docs/errors.md has no row `" << name << "`";
  }
  if (got.code != it->second.code || got.message != it->second.message) {
    return ::testing::AssertionFailure()
           << "row `" << name << "` documents\n  " << it->second.code << ": "
           << it->second.message << "\nbut the code says\n  " << got.code
           << ": " << got.message;
  }
  return ::testing::AssertionSuccess();
}

std::string ErrorRowTestName(
    const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

ScopedTempDir::ScopedTempDir() {
  std::string pattern = ::testing::TempDir() + "rocksdcp-test-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  char* made = mkdtemp(buf.data());
  EXPECT_NE(made, nullptr) << "mkdtemp(" << pattern << ") failed";
  path_ = made ? std::filesystem::path(made) : std::filesystem::path();
}

ScopedTempDir::~ScopedTempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

uint64_t OpenFileDescriptors() {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

}  // namespace rocksdcp::testing
