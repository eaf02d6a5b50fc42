// The C++ examples of README.md and docs/*.md that need a store and data to
// show what they do, compiled as printed and run: cmake/doc_snippets.cmake
// writes each ```cpp block marked
// `<!-- test: tests/docs/examples_test.cc as NAME -->` into the build tree
// as NAME.inc. Each test checks that its example does what its text says,
// through a store of its own opened again afterwards.

#include <string>
#include <vector>

#include "compression_save.inc"
#include "cpp_save_keep_verify.inc"
#include "cpp_sharded.inc"
#include "incremental_save.inc"
#include "readme_save_then_load.inc"
#include "rocksdb/store_fixture.h"
#include "small_devices_save.inc"
#include "test_util.h"
#include "tuning_save_and_load.inc"

namespace rocksdcp::testing {
namespace {

// A state dict of a float tensor "w" viewing `w` and bytes "rng_state".
StateDict Dict(std::vector<float>& w, const std::string& rng) {
  StateDict state;
  state["w"] = TensorView::Contiguous(
      DType::kFloat32, {static_cast<int64_t>(w.size())}, w.data());
  state["rng_state"] = rng;
  return state;
}

// Loads checkpoint `id`'s "w" (of `n` floats) and "rng_state" from `store`.
struct Loaded {
  std::vector<float> w;
  std::string rng;
};
Loaded LoadBack(Store& store, const std::string& id, size_t n) {
  Loaded loaded{.w = std::vector<float>(n, -1.0f)};
  StateDict state = Dict(loaded.w, "");
  auto reader = store.NewReader();
  EXPECT_OK(reader);
  if (!reader.ok()) return loaded;
  EXPECT_OK(Load(&state, **reader, {.checkpoint_id = id}));
  loaded.rng = std::get<std::string>(state["rng_state"]);
  return loaded;
}

Loaded LoadBack(const std::string& dir, const std::string& id, size_t n) {
  auto store = Store::Open(dir, {.read_only = true});
  EXPECT_OK(store);
  return store.ok() ? LoadBack(**store, id, n) : Loaded{};
}

std::vector<float> Ramp(size_t n, float from) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = from + 0.25f * static_cast<float>(i);
  return v;
}

// README.md, "Using it from C++".
TEST(DocsExamplesTest, ReadmeSavesLoadsInPlaceAndLists) {
  ScopedTempDir dir;
  std::vector<float> weight = {1, 2, 3, 4, 5, 6};
  std::string rng = "generator state";
  ASSERT_OK(::SaveThenLoad(dir.Sub("ckpt"), weight, rng));
  EXPECT_EQ(weight, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(rng, "generator state");
  EXPECT_EQ(CheckpointIds(dir.Sub("ckpt")),
            (std::vector<std::string>{"step-100"}));

  auto store = Store::Open(dir.Sub("ckpt"), {.read_only = true});
  ASSERT_OK(store);
  std::vector<float> loaded(6, 0.0f);
  StateDict state;
  state["linear.weight"] =
      TensorView::Contiguous(DType::kFloat32, {2, 3}, loaded.data());
  state["rng_state"] = std::string();
  auto reader = (*store)->NewReader();
  ASSERT_OK(reader);
  ASSERT_OK(Load(&state, **reader, {.checkpoint_id = "step-100"}));
  EXPECT_EQ(loaded, weight);
  EXPECT_EQ(std::get<std::string>(state["rng_state"]), "generator state");
}

// docs/cpp.md's first example: replaces a saved id, keeps the newest three.
TEST(DocsExamplesTest, CppGuideSavesReplacesKeepsThreeAndVerifies) {
  ScopedTempDir dir;
  const std::string ckpt = dir.Sub("ckpt");
  for (int step = 1; step <= 5; ++step) {
    std::vector<float> w = Ramp(64, static_cast<float>(step));
    ASSERT_OK(
        ::SaveKeepVerify(ckpt, Dict(w, "rng"), "step-" + std::to_string(step)));
  }
  EXPECT_EQ(CheckpointIds(ckpt),
            (std::vector<std::string>{"step-3", "step-4", "step-5"}));
  std::vector<float> again = Ramp(64, 100.0f);
  ASSERT_OK(::SaveKeepVerify(ckpt, Dict(again, "again"), "step-5"));
  Loaded loaded = LoadBack(ckpt, "step-5", 64);
  EXPECT_EQ(loaded.w, again);
  EXPECT_EQ(loaded.rng, "again");
}

// docs/cpp.md, "Many ranks": two ranks save half the rows each, one loads
// the whole.
TEST(DocsExamplesTest, CppGuideShardedSaveLoadsWhole) {
  ScopedTempDir dir;
  auto store = Store::Open(dir.Sub("ckpt"));
  ASSERT_OK(store);
  ASSERT_OK(::SaveShardedLoadWhole(**store));
  std::vector<float> whole(32, 0.0f);
  StateDict state;
  state["w"] = TensorView::Contiguous(DType::kFloat32, {4, 8}, whole.data());
  auto reader = (*store)->NewReader();
  ASSERT_OK(reader);
  ASSERT_OK(Load(&state, **reader, {.checkpoint_id = "sharded"}));
  EXPECT_EQ(whole, std::vector<float>(32, 1.0f));
}

// docs/compression.md: a compressed save loads back bit for bit.
TEST(DocsExamplesTest, CompressionGuideSavesWhatLoadsBack) {
  ScopedTempDir dir;
  auto store = Store::Open(dir.Sub("ckpt"));
  ASSERT_OK(store);
  std::vector<float> w = Ramp(1 << 16, 0.5f);
  ASSERT_OK(::SaveCompressed(**store, Dict(w, "rng")));
  Loaded loaded = LoadBack(**store, "step-100", w.size());
  EXPECT_EQ(loaded.w, w);
  EXPECT_EQ(loaded.rng, "rng");
  auto report = (*store)->Verify();
  ASSERT_OK(report);
  EXPECT_TRUE(report->ok());
}

// docs/incremental.md: the second save stores only the item that changed.
TEST(DocsExamplesTest, IncrementalGuideStoresOnlyWhatChanged) {
  ScopedTempDir dir;
  auto store = Store::Open(dir.Sub("ckpt"));
  ASSERT_OK(store);
  OwnedTensor table = RandomTensor(DType::kFloat32, {256, 64}, 7);
  std::vector<float> head = Ramp(64, 1.0f);
  StateDict state;
  state["embedding"] = table.view;
  state["head"] = TensorView::Contiguous(DType::kFloat32, {64}, head.data());
  ASSERT_OK(::SaveIncrementally(**store, state, "step-1"));
  head[0] = -1.0f;
  ASSERT_OK(::SaveIncrementally(**store, state, "step-2"));

  auto list = (*store)->List();
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].id, "step-2");
  EXPECT_EQ((*list)[1].referenced_bytes, 256u * 64u * sizeof(float));
  auto diff = DiffCheckpoints(**store, "step-1", "step-2");
  ASSERT_OK(diff);
  for (const ItemDiff& item : diff->items) {
    EXPECT_EQ(item.change, item.fqn == "head" ? ItemChange::kChanged
                                              : ItemChange::kUnchanged)
        << item.fqn;
  }
}

// docs/small-devices.md: an asynchronous save with the small device's
// profile, then the newest two kept.
TEST(DocsExamplesTest, SmallDevicesGuideSavesWithTheProfile) {
  ScopedTempDir dir;
  std::vector<float> w = Ramp(1000, 3.0f);
  ASSERT_OK(::SaveOnABoard(dir.Sub("ckpt"), Dict(w, "board")));
  EXPECT_EQ(CheckpointIds(dir.Sub("ckpt")),
            (std::vector<std::string>{"step-100"}));
  Loaded loaded = LoadBack(dir.Sub("ckpt"), "step-100", w.size());
  EXPECT_EQ(loaded.w, w);
  EXPECT_EQ(loaded.rng, "board");
}

// docs/tuning.md: a save and a load with options of one's own.
TEST(DocsExamplesTest, TuningGuideSavesAndLoadsWithItsOptions) {
  ScopedTempDir dir;
  std::vector<float> w = Ramp(4096, -2.0f);
  std::vector<float> into_w(w.size(), 0.0f);
  StateDict into = Dict(into_w, "");
  ASSERT_OK(::SaveAndLoad(dir.Sub("ckpt"), Dict(w, "tuned"), &into));
  EXPECT_EQ(into_w, w);
  EXPECT_EQ(std::get<std::string>(into["rng_state"]), "tuned");
}

}  // namespace
}  // namespace rocksdcp::testing
