// The LibTorch examples of README.md and docs/libtorch.md, compiled as
// printed: cmake/doc_snippets.cmake writes each ```cpp block marked
// `<!-- test: tests/torch/docs_examples_test.cc as NAME -->` into the build
// tree as NAME.inc. Each must do what its text says.

#include <string>
#include <vector>

#include "libtorch_save_and_restore.inc"
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

// README.md, "Using it from LibTorch": trains, saves every 100 steps, keeps
// the last three and resumes from the newest.
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

// docs/libtorch.md's first example: saves a module, Adam and the trainer's
// state, and loads them into fresh ones (the load checks them first).
TEST(LibTorchGuideTest, SaveAndRestoreSavesOneCheckpointAndLoadsIt) {
  ScopedTempDir dir;
  const std::string store = dir.Sub("ckpt");
  ASSERT_OK(SaveAndRestore(store));
  EXPECT_EQ(Ids(store), (std::vector<std::string>{"step-7"}));
  // A second run saves the same id, which a writer refuses by default.
  EXPECT_EQ(SaveAndRestore(store).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Ids(store), (std::vector<std::string>{"step-7"}));
}

}  // namespace
}  // namespace rocksdcp::testing
