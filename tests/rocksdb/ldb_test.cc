// A person can inspect a store with RocksDB's stock ldb: the checkpoint is
// a column family, its keys print readably, and the metadata is fetchable.

#include <stdio.h>
#include <sys/wait.h>

#include <fstream>
#include <map>
#include <regex>

#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::HasSubstr;

class LdbTest : public StoreTest {
 protected:
  // Runs ldb with `args` against the store; returns its stdout and sets
  // *exit_code.
  std::string Ldb(const std::string& args, int* exit_code) {
    const std::string cmd = std::string(ROCKSDCP_LDB) +
                            " --db=" + store_path() + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    EXPECT_NE(p, nullptr) << cmd;
    std::string out;
    char buf[4096];
    size_t n;
    while (p != nullptr && (n = fread(buf, 1, sizeof(buf), p)) > 0) {
      out.append(buf, n);
    }
    const int status = p ? pclose(p) : -1;
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
  }

  void SetUp() override {
#ifndef ROCKSDCP_LDB
    GTEST_SKIP() << "ldb (rocksdb-tools) not found at configure time";
#endif
    StoreTest::SetUp();
    ASSERT_OK(SaveDict(example_.dict, "step-100", {.max_piece_bytes = 4096}));
    CloseStore();  // ldb opens it itself.
  }

  ExampleState example_ = ExampleStateDict(1);
};

#ifdef ROCKSDCP_LDB

TEST_F(LdbTest, ListColumnFamiliesShowsTheCheckpoint) {
  int rc;
  std::string out = Ldb("list_column_families", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr("step-100"));
}

TEST_F(LdbTest, ScanPrintsReadableKeys) {
  int rc;
  std::string out = Ldb("--column_family=step-100 scan --no_value", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr("__metadata__"));
  EXPECT_THAT(out, HasSubstr("model.layers.0.attn.w@0,0#00000000"));
  EXPECT_THAT(out, HasSubstr("model.layers.0.attn.w@0,0#00000002"));
  EXPECT_THAT(out, HasSubstr("optimizer/state#00000000"));
  EXPECT_THAT(out, HasSubstr("step_counter@#00000000"));
}

TEST_F(LdbTest, CatalogScanListsTheCheckpoint) {
  int rc;
  std::string out = Ldb("scan --no_value", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr("checkpoint/step-100"));
}

TEST_F(LdbTest, GetMetadataReturnsTheFlatBuffer) {
  int rc;
  std::string out =
      Ldb("--column_family=step-100 get __metadata__ --value_hex", &rc);
  EXPECT_EQ(rc, 0) << out;
  // Bytes 4..7 of a FlatBuffer are its file identifier, "RDCM".
  ASSERT_GE(out.size(), 18u) << out;
  EXPECT_EQ(out.substr(0, 2), "0x") << out;
  EXPECT_EQ(out.substr(10, 8), "5244434D") << out;
}

#endif  // ROCKSDCP_LDB

#ifdef ROCKSDCP_LDB

// The ldb lines of docs/cli.md's "Inspecting a store with ldb" block.
std::vector<std::string> ReadmeLdbCommands() {
  std::ifstream in(ROCKSDCP_SOURCE_DIR "/docs/cli.md");
  EXPECT_TRUE(in.good());
  std::vector<std::string> commands;
  std::string line;
  bool section = false, block = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) {
      section = line == "## Inspecting a store with ldb";
      continue;
    }
    if (!section) continue;
    if (line.rfind("```", 0) == 0) {
      if (block) break;  // The section's first block ends.
      block = true;
      continue;
    }
    if (block && line.rfind("ldb ", 0) == 0) commands.push_back(line);
  }
  return commands;
}

// What each documented command must print, by the command as printed.
const std::map<std::string, std::vector<std::string>>& Expectations() {
  static const auto* expected =
      new std::map<std::string, std::vector<std::string>>{
          {"ldb --db=/path/to/store list_column_families",
           {"default", "step-300"}},
          // The catalog key, and its value's FlatBuffer identifier "RDCC"
          // in hex.
          {"ldb --db=/path/to/store scan --value_hex",
           {"checkpoint/step-300", "52444343"}},
          {"ldb --db=/path/to/store --column_family=step-300 scan --no_value "
           "| head -20",
           {"w@0,0#00000000", "__metadata__"}},
          // "RDCM", the metadata's identifier, in hex.
          {"ldb --db=/path/to/store --column_family=step-300 get "
           "__metadata__ --value_hex",
           {"0x", "5244434D"}},
          {"ldb --db=/path/to/store dump_live_files",
           {"Column family \"step-300\"", ".sst"}},
          {"ldb --db=/path/to/store checkconsistency", {"OK"}},
      };
  return *expected;
}

class LdbReadmeTest : public StoreTest {};

TEST_F(LdbReadmeTest, EveryDocumentedCommandWorksAsPrinted) {
  OwnedTensor w = RandomTensor(DType::kFloat32, {64, 64}, 3);
  ASSERT_OK(SaveDict({{"w", w.view}}, "step-300", {.max_piece_bytes = 4096}));
  // store_ stays open read-write, as a trainer's would: the commands only
  // read.
  const std::vector<std::string> commands = ReadmeLdbCommands();
  ASSERT_EQ(commands.size(), Expectations().size())
      << "docs/cli.md's ldb block and this test list different commands";
  for (const std::string& printed : commands) {
    auto expected = Expectations().find(printed);
    ASSERT_NE(expected, Expectations().end())
        << "docs/cli.md documents `" << printed << "`; check it here";
    std::string cmd = std::regex_replace(printed, std::regex("^ldb "),
                                         std::string(ROCKSDCP_LDB) + " ");
    cmd = std::regex_replace(cmd, std::regex("/path/to/store"), store_path());
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    ASSERT_NE(p, nullptr) << cmd;
    std::string out;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
    const int status = pclose(p);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << "\n"
                                                               << out;
    for (const std::string& want : expected->second) {
      EXPECT_THAT(out, HasSubstr(want)) << cmd;
    }
  }
}

#endif  // ROCKSDCP_LDB

}  // namespace
}  // namespace rocksdcp::testing
