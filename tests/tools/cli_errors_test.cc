// docs/errors.md's rows for the CLI, named cli-...: this test makes each
// one happen by running rocksdcp, and checks its exit code and its stderr
// against the row of the same name, so that the two cannot drift apart: a
// row without a scenario here, a scenario without a row, or a message that
// differs by a character fails it. ROCKSDCP_PRINT_ERRORS=1 prints the rows
// as the CLI produces them, to paste into the document.
//
// The rows give an exit code ("exit 1"), not a Status code: the library's
// tables (tests/rocksdb/error_table_test.cc) don't read them.

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <regex>
#include <string>

#include "tools/cli_runner.h"
#include "tools/tools_test_util.h"

namespace rocksdcp::testing {
namespace {

const char kDoc[] = ROCKSDCP_SOURCE_DIR "/docs/errors.md";

struct CliRow {
  int exit_code = -1;
  std::string message;  // stderr, without its newline.
};

// The document's cli-... rows: | `name` | situation | exit N | `message` |
std::map<std::string, CliRow> ReadCliRows() {
  std::ifstream in(kDoc);
  EXPECT_TRUE(in.good()) << "cannot read " << kDoc;
  const std::regex row(
      R"(^\| `(cli-[a-z0-9-]+)` \|[^|]*\| exit ([0-9]+) \| `(.*)` \|$)");
  std::map<std::string, CliRow> rows;
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (!std::regex_match(line, m, row)) continue;
    EXPECT_TRUE(rows.count(m[1]) == 0) << "row " << m[1] << " twice";
    rows[m[1]] = {std::stoi(m[2]), m[3]};
  }
  return rows;
}

// The scenarios, by row name, in the document's order.
const char* const kScenarios[] = {
    "cli-output-disk-full",        "cli-import-header-over-limit",
    "cli-import-header-cut-short", "cli-import-too-many-items",
    "cli-export-too-many-items",   "cli-ls-not-a-directory",
    "cli-ls-permission-denied",
};

// A file of safetensors' 8-byte little-endian header size, then `rest`.
std::string SafetensorsFile(uint64_t header_size, const std::string& rest) {
  std::string size(8, '\0');
  for (int i = 0; i < 8; ++i) {
    size[i] = static_cast<char>((header_size >> (8 * i)) & 0xff);
  }
  return size + rest;
}

class CliErrorTableTest : public CliTest,
                          public ::testing::WithParamInterface<const char*> {
 protected:
  // Runs the scenario's command; its stderr with the store's path as
  // <store> and the test's temp dir as <tmp>.
  CliRow Produce(const std::function<CliRun()>& scenario) {
    CliRun r = scenario();
    std::string message = r.err;
    if (!message.empty() && message.back() == '\n') message.pop_back();
    for (const auto& [path, name] :
         {std::pair{store_path(), "<store>"},
          std::pair{dir_.path().string(), "<tmp>"}}) {
      for (size_t at; (at = message.find(path)) != std::string::npos;) {
        message.replace(at, path.size(), name);
      }
    }
    return {r.exit_code, message};
  }

  std::map<std::string, std::function<CliRun()>> Scenarios() {
    std::map<std::string, std::function<CliRun()>> s;
    s["cli-output-disk-full"] = [this] {
      SaveExamples({"ck"});
      CloseStore();
      return Run({"ls", store_path()}, "/dev/full");
    };
    s["cli-import-header-over-limit"] = [this] {
      tools::WriteFile(dir_.Sub("big.safetensors"),
                       SafetensorsFile(100'000'112, "{}      "));
      return Run({"import", dir_.Sub("big.safetensors"), store_path(), "ck"});
    };
    s["cli-import-header-cut-short"] = [this] {
      tools::WriteFile(dir_.Sub("cut.safetensors"),
                       SafetensorsFile(500, std::string(300, ' ')));
      return Run({"import", dir_.Sub("cut.safetensors"), store_path(), "ck"});
    };
    s["cli-import-too-many-items"] = [this] {
      // 100,000 one-byte tensors.
      std::string header = "{";
      for (int i = 0; i < 100'000; ++i) {
        header += (i ? ",\"t" : "\"t") + std::to_string(i) +
                  "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" +
                  std::to_string(i) + "," + std::to_string(i + 1) + "]}";
      }
      header += "}";
      tools::WriteFile(
          dir_.Sub("many.safetensors"),
          SafetensorsFile(header.size(), header) + std::string(100'000, 'x'));
      return Run({"import", dir_.Sub("many.safetensors"), store_path(), "ck"});
    };
    s["cli-export-too-many-items"] = [this] {
      // One tensor with a 9 MB name: some 70,000 items of usual names
      // take import past its limit as well, but take longer to save.
      uint8_t one = 1;
      EXPECT_OK(SaveDict({{std::string(9'000'000, 'n'),
                           TensorView::Contiguous(DType::kUInt8, {1}, &one)}},
                         "ck"));
      CloseStore();
      return Run({"export", store_path(), "ck", "--safetensors",
                  dir_.Sub("ck.safetensors")});
    };
    s["cli-ls-not-a-directory"] = [this] {
      tools::WriteFile(dir_.Sub("file"), "not a store");
      return Run({"ls", dir_.Sub("file")});
    };
    // Mode 000 to a user other than root, which reads everything: as root,
    // the CLI runs as nobody.
    s["cli-ls-permission-denied"] = [this] {
      SaveExamples({"ck"});
      CloseStore();
      EXPECT_EQ(chmod(dir_.path().c_str(), 0755), 0);
      EXPECT_EQ(chmod(store_path().c_str(), 0), 0);
      if (geteuid() == 0) run_as_uid_ = 65534;
      CliRun r = Run({"ls", store_path()});
      run_as_uid_ = -1;
      EXPECT_EQ(chmod(store_path().c_str(), 0755), 0);
      EXPECT_EQ(chmod(dir_.path().c_str(), 0700), 0);
      return r;
    };
    return s;
  }
};

TEST_P(CliErrorTableTest, MessageIsTheDocumentedOne) {
  const std::string name = GetParam();
  auto scenarios = Scenarios();
  ASSERT_TRUE(scenarios.count(name) > 0) << "no scenario " << name;
  const CliRow got = Produce(scenarios[name]);
  if (std::getenv("ROCKSDCP_PRINT_ERRORS") != nullptr) {
    std::cout << "| `" << name << "` | | exit " << got.exit_code << " | `"
              << got.message << "` |\n";
  }
  const std::map<std::string, CliRow> doc = ReadCliRows();
  auto it = doc.find(name);
  ASSERT_TRUE(it != doc.end()) << "docs/errors.md has no row `" << name << "`";
  EXPECT_EQ(got.exit_code, it->second.exit_code);
  EXPECT_EQ(got.message, it->second.message);
}

INSTANTIATE_TEST_SUITE_P(Docs, CliErrorTableTest,
                         ::testing::ValuesIn(kScenarios), ErrorRowTestName);

TEST(CliErrorTableDocTest, EveryRowHasAScenario) {
  const std::map<std::string, CliRow> doc = ReadCliRows();
  EXPECT_EQ(doc.size(), std::size(kScenarios));
  for (const char* name : kScenarios) {
    EXPECT_TRUE(doc.count(name) > 0) << "docs/errors.md lacks `" << name << "`";
  }
}

}  // namespace
}  // namespace rocksdcp::testing
