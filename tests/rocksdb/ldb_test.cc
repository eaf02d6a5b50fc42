// A person can inspect a store with RocksDB's stock ldb: the checkpoint is
// a column family, its keys print readably, and the metadata is fetchable.

#include <stdio.h>
#include <sys/wait.h>

#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::HasSubstr;

class LdbTest : public StoreTest {
 protected:
  // Runs ldb with `args` against the store; returns its stdout and sets
  // *exit_code.
  std::string Ldb(const std::string& args, int* exit_code) {
    const std::string cmd =
        std::string(ROCKSDCP_LDB) + " --db=" + store_path() + " " + args +
        " 2>&1";
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

}  // namespace
}  // namespace rocksdcp::testing
