// The LibTorch examples of README.md and docs/libtorch.md, compiled as
// printed: cmake/doc_snippets.cmake writes each ```cpp block marked
// `<!-- test: tests/torch/docs_examples_test.cc as NAME -->` into the build
// tree as NAME.inc. Each must do what its text says.

#include <string>
#include <vector>

#include "libtorch_async_save.inc"
#include "libtorch_save_and_restore.inc"
#include "readme_libtorch.inc"
#include "rocksdb/store_fixture.h"
#include "test_util.h"

namespace rocksdcp::testing {
namespace {

// README.md, "Using it from LibTorch": trains, saves every 100 steps, keeps
// the last three and resumes from the newest.
TEST(ReadmeTest, LibTorchExampleTrainsKeepsThreeAndResumes) {
  ScopedTempDir dir;
  const std::string store = dir.Sub("ckpt");
  ASSERT_OK(Train(store, 300));
  EXPECT_EQ(CheckpointIds(store),
            (std::vector<std::string>{"step-100", "step-200", "step-300"}));
  ASSERT_OK(Train(store, 500));  // Resumes at step 300.
  EXPECT_EQ(CheckpointIds(store),
            (std::vector<std::string>{"step-300", "step-400", "step-500"}));
}

// docs/libtorch.md's first example: saves a module, Adam and the trainer's
// state, and loads them into fresh ones (the load checks them first).
TEST(LibTorchGuideTest, SaveAndRestoreSavesOneCheckpointAndLoadsIt) {
  ScopedTempDir dir;
  const std::string store = dir.Sub("ckpt");
  ASSERT_OK(SaveAndRestore(store));
  EXPECT_EQ(CheckpointIds(store), (std::vector<std::string>{"step-7"}));
  // A second run saves the same id, which a writer refuses by default.
  EXPECT_EQ(SaveAndRestore(store).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(CheckpointIds(store), (std::vector<std::string>{"step-7"}));
}

// docs/libtorch.md, "Asynchronous saves": the module trains on while the
// save commits, and the checkpoint loads into a fresh module and optimizer.
TEST(LibTorchGuideTest, AsyncSaveCommitsWhileTrainingGoesOn) {
  ScopedTempDir dir;
  auto store = Store::Open(dir.Sub("ckpt"));
  ASSERT_OK(store);
  ASSERT_OK(::TrainWhileSaving(**store));
  auto list = (*store)->List();
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, "step-8");
  ::torch::nn::Linear fresh(4, 2);
  ::torch::optim::SGD sgd(fresh->parameters(), 0.1);
  auto reader = (*store)->NewReader();
  ASSERT_OK(reader);
  EXPECT_OK(
      torch::Load({fresh.get(), &sgd}, **reader, {.checkpoint_id = "step-8"}));
}

}  // namespace
}  // namespace rocksdcp::testing
