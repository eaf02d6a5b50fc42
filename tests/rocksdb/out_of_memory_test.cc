// Running out of memory is a Status (ResourceExhausted) naming what was
// being done, never an exception or an abort (issue #13, item 2). A real
// checkpoint with a 256 MiB byte item is loaded by a child process whose
// address space is capped (RLIMIT_AS) below what the item needs.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "rocksdb/child_process.h"
#include "rocksdb/store_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST_F(StoreTest, ALoadThatRunsOutOfMemorySaysSoNamingTheItem) {
#ifdef ROCKSDCP_SANITIZED
  GTEST_SKIP() << "sanitizers reserve address space that RLIMIT_AS can't cap";
#else
  const std::string blob = RandomBytes(256 << 20, 5);
  ASSERT_OK(SaveDict({{"blob", blob}}, "big"));
  CloseStore();
  // 64 MiB more than the child uses once its store is open: too little
  // for the item, enough to fail cleanly.
  ChildOutput child =
      RunChildAs(-1, {"load-capped", store_path(), "big", "blob", "64"});
  EXPECT_EQ(child.exit_code, 3) << child.out;
  std::printf("capped load: %s", child.out.c_str());
  EXPECT_THAT(child.out,
              AllOf(HasSubstr("ResourceExhausted"), HasSubstr("'big'"),
                    HasSubstr("item 'blob'"), HasSubstr("out of memory")));
  // With room, the same child loads it: the cap, not the checkpoint, failed.
  ChildOutput roomy =
      RunChildAs(-1, {"load-capped", store_path(), "big", "blob", "2048"});
  EXPECT_EQ(roomy.exit_code, 0) << roomy.out;
#endif
}

}  // namespace
}  // namespace rocksdcp::testing
