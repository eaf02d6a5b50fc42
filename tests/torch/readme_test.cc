// README.md's LibTorch example, compiled as printed: CMake copies the
// ```cpp block of its "Using it from LibTorch" section into the build tree
// as readme_libtorch.inc (tests/CMakeLists.txt). It must train, save, keep
// the last three checkpoints and resume.

#include <string>
#include <vector>

#include "readme_libtorch.inc"
#include "test_util.h"

namespace rocksdcp::testing {
namespace {

std::vector<std::string> Ids(const std::string& dir) {
  std::vector<std::string> ids;
  auto store = Store::Open(dir, {.read_only = true});
  EXPECT_OK(store);
  if (!store.ok()) return ids;
  auto list = (*store)->List();
  EXPECT_OK(list);
  if (list.ok()) {
    for (const CheckpointInfo& c : *list) ids.push_back(c.id);
  }
  return ids;
}

TEST(ReadmeTest, LibTorchExampleTrainsKeepsThreeAndResumes) {
  ScopedTempDir dir;
  const std::string store = dir.Sub("ckpt");
  ASSERT_OK(Train(store, 300));
  EXPECT_EQ(Ids(store),
            (std::vector<std::string>{"step-100", "step-200", "step-300"}));
  ASSERT_OK(Train(store, 500));  // Resumes at step 300.
  EXPECT_EQ(Ids(store),
            (std::vector<std::string>{"step-300", "step-400", "step-500"}));
}

}  // namespace
}  // namespace rocksdcp::testing
