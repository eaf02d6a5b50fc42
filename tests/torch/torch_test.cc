// rocksdcp::torch: tensors of every dtype and any strides, module state
// under Python's names, tied weights, trainer state.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "torch/torch_fixture.h"
#include "torch/torch_util.h"

namespace rocksdcp::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A tensor of `type` with random bytes (0 or 1 for bool).
::torch::Tensor RandomOf(c10::ScalarType type, std::vector<int64_t> shape) {
  if (type == ::torch::kBool) return ::torch::randint(0, 2, shape).to(type);
  const int64_t elem = c10::elementSize(type);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return ::torch::randint(0, 256, {n * elem}, ::torch::kUInt8)
      .view(type)
      .reshape(shape);
}

class TorchTensorTest : public TorchStoreTest {
 protected:
  // Saves {"t": src} as `id`, then loads it into `dst`.
  Status RoundTrip(const std::string& id, const ::torch::Tensor& src,
                   const ::torch::Tensor& dst) {
    ROCKSDCP_ASSIGN_OR_RETURN(TensorView in, torch::ViewOf(src, "t"));
    ROCKSDCP_RETURN_IF_ERROR(SaveDict({{"t", in}}, id).status());
    ROCKSDCP_ASSIGN_OR_RETURN(TensorView out, torch::MutableViewOf(dst, "t"));
    StateDict sd{{"t", out}};
    return LoadDict(&sd, id);
  }
};

TEST_F(TorchTensorTest, EveryDTypeRoundTripsBitExact) {
  const std::map<c10::ScalarType, DType> types = {
    {::torch::kUInt8, DType::kUInt8},
    {::torch::kInt8, DType::kInt8},
    {::torch::kInt16, DType::kInt16},
    {::torch::kInt32, DType::kInt32},
    {::torch::kInt64, DType::kInt64},
    {::torch::kFloat16, DType::kFloat16},
    {::torch::kBFloat16, DType::kBFloat16},
    {::torch::kFloat32, DType::kFloat32},
    {::torch::kFloat64, DType::kFloat64},
    {::torch::kComplexHalf, DType::kComplex32},
    {::torch::kComplexFloat, DType::kComplex64},
    {::torch::kComplexDouble, DType::kComplex128},
    {::torch::kBool, DType::kBool},
  // The dtypes LibTorch gained after 1.13 (src/torch/tensor.cc).
#if ROCKSDCP_TORCH_AT_LEAST(2, 1)
    {c10::ScalarType::Float8_e4m3fn, DType::kFloat8E4M3FN},
    {c10::ScalarType::Float8_e5m2, DType::kFloat8E5M2},
#endif
#if ROCKSDCP_TORCH_AT_LEAST(2, 2)
    {c10::ScalarType::Float8_e4m3fnuz, DType::kFloat8E4M3FNUZ},
    {c10::ScalarType::Float8_e5m2fnuz, DType::kFloat8E5M2FNUZ},
#endif
#if ROCKSDCP_TORCH_AT_LEAST(2, 3)
    {c10::ScalarType::UInt16, DType::kUInt16},
    {c10::ScalarType::UInt32, DType::kUInt32},
    {c10::ScalarType::UInt64, DType::kUInt64},
#endif
#if ROCKSDCP_TORCH_AT_LEAST(2, 7)
    {c10::ScalarType::Float8_e8m0fnu, DType::kFloat8E8M0FNU},
#endif
  };
  for (const auto& [type, dtype] : types) {
    SCOPED_TRACE(c10::toString(type));
    ASSERT_OK_AND_ASSIGN(DType got, torch::DTypeOf(type));
    EXPECT_EQ(got, dtype);
    ASSERT_OK_AND_ASSIGN(c10::ScalarType back, torch::ScalarTypeOf(dtype));
    EXPECT_EQ(back, type);
    ::torch::Tensor src = RandomOf(type, {3, 5});
    ::torch::Tensor dst = ::torch::zeros({3, 5}, type);
    ASSERT_OK(RoundTrip(c10::toString(type), src, dst));
    EXPECT_TRUE(BitEqual(src, dst));
  }
}

TEST_F(TorchTensorTest, DTypesLibTorchLacksAreNamed) {
  // Every dtype maps to a scalar type and back, or is refused naming the
  // LibTorch built against: LibTorch 1.13 lacks the float8 family and the
  // wide unsigned integers, LibTorch 2.7 and later lack none.
  int lacking = 0;
  for (uint8_t d = 1; d <= kMaxDType; ++d) {
    const DType dtype = static_cast<DType>(d);
    SCOPED_TRACE(DTypeName(dtype));
    Result<c10::ScalarType> type = torch::ScalarTypeOf(dtype);
    if (type.ok()) {
      ASSERT_OK_AND_ASSIGN(DType back, torch::DTypeOf(*type));
      EXPECT_EQ(back, dtype);
    } else {
      ++lacking;
      EXPECT_THAT(
          type, StatusIs(StatusCode::kInvalidArgument,
                         HasSubstr(std::string(DTypeName(dtype)) + " has no " +
                                   torch::LibTorchName() + " scalar type")));
    }
  }
#if ROCKSDCP_TORCH_AT_LEAST(2, 7)
  EXPECT_EQ(lacking, 0);
#else
  EXPECT_THAT(torch::ScalarTypeOf(DType::kFloat8E4M3FN),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("float8_e4m3fn has no LibTorch 1.")));
  EXPECT_GT(lacking, 0);
#endif
  EXPECT_THAT(torch::DTypeOf(::torch::kQInt8),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("QInt8 has no rocksdcp dtype")));
}

TEST_F(TorchTensorTest, TransposedAndSlicedSaveAsIsAndLoadInPlace) {
  ::torch::Tensor base = ::torch::arange(48, ::torch::kFloat32).reshape({6, 8});
  ::torch::Tensor transposed = base.t();            // [8, 6]
  ::torch::Tensor sliced = base.slice(1, 2, 7, 2);  // [6, 3], gaps
  ASSERT_OK_AND_ASSIGN(TensorView t, torch::ViewOf(transposed, "t"));
  EXPECT_THAT(t.strides, ElementsAre(1, 8));
  EXPECT_EQ(t.data, base.data_ptr());
  ASSERT_OK_AND_ASSIGN(TensorView s, torch::ViewOf(sliced, "s"));
  EXPECT_THAT(s.strides, ElementsAre(8, 2));
  ASSERT_OK(SaveDict({{"t", t}, {"s", s}}, "c").status());

  // Load into a transposed destination and into a slice of a larger one:
  // in place, with every element outside the slice untouched.
  ::torch::Tensor into_t = ::torch::zeros({6, 8}).t();
  ::torch::Tensor frame = ::torch::full({6, 8}, -1.0f);
  ::torch::Tensor into_s = frame.slice(1, 2, 7, 2);
  ASSERT_OK_AND_ASSIGN(TensorView dt, torch::MutableViewOf(into_t, "t"));
  ASSERT_OK_AND_ASSIGN(TensorView ds, torch::MutableViewOf(into_s, "s"));
  StateDict sd{{"t", dt}, {"s", ds}};
  ASSERT_OK(LoadDict(&sd, "c"));
  EXPECT_TRUE(BitEqual(into_t, transposed));
  EXPECT_TRUE(BitEqual(into_s, sliced));
  ::torch::Tensor untouched = frame.clone();
  untouched.slice(1, 2, 7, 2).fill_(-1.0f);
  EXPECT_EQ((untouched == -1.0f).all().item<bool>(), true);
}

TEST_F(TorchTensorTest, ZeroDimAndEmptyTensors) {
  ::torch::Tensor scalar = ::torch::scalar_tensor(3.5, ::torch::kFloat64);
  ::torch::Tensor empty = ::torch::zeros({0, 4});
  ::torch::Tensor into_scalar = ::torch::zeros({}, ::torch::kFloat64);
  ::torch::Tensor into_empty = ::torch::zeros({0, 4});
  ASSERT_OK_AND_ASSIGN(TensorView a, torch::ViewOf(scalar, "a"));
  ASSERT_OK_AND_ASSIGN(TensorView b, torch::ViewOf(empty, "b"));
  ASSERT_OK(SaveDict({{"a", a}, {"b", b}}, "c").status());
  ASSERT_OK_AND_ASSIGN(TensorView da, torch::MutableViewOf(into_scalar, "a"));
  ASSERT_OK_AND_ASSIGN(TensorView db, torch::MutableViewOf(into_empty, "b"));
  StateDict sd{{"a", da}, {"b", db}};
  ASSERT_OK(LoadDict(&sd, "c"));
  EXPECT_EQ(into_scalar.item<double>(), 3.5);
}

TEST_F(TorchTensorTest, TensorsThatCantBeViewedAreRefusedNamingTheirFqn) {
  EXPECT_THAT(torch::ViewOf(::torch::Tensor(), "x"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'x' is undefined")));
  EXPECT_THAT(
      torch::ViewOf(::torch::empty({2}, ::torch::device(::torch::kMeta)),
                    "m.w"),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("tensor 'm.w' is on meta; rocksdcp reads and writes "
                         "CPU tensors only")));
  EXPECT_THAT(torch::ViewOf(::torch::eye(3).to_sparse(), "sp"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'sp' has layout Sparse")));
  EXPECT_THAT(torch::ViewOf(::torch::quantize_per_tensor(
                                ::torch::rand({2}), 0.1, 0, ::torch::kQInt8),
                            "q"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'q' is quantized (QInt8)")));
  EXPECT_THAT(
      torch::ViewOf(::torch::randn({2}, ::torch::kComplexFloat).conj(), "c"),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("tensor 'c' has its lazy conjugate bit set")));
  // Saving an expanded tensor reads each element; loading into one can't.
  ::torch::Tensor expanded = ::torch::zeros({1, 3}).expand({4, 3});
  EXPECT_OK(torch::ViewOf(expanded, "e"));
  EXPECT_THAT(torch::MutableViewOf(expanded, "e"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("tensor 'e' has elements that share memory")));
  EXPECT_OK(torch::MutableViewOf(::torch::zeros({4, 3}).t(), "ok"));
}

class TorchModuleTest : public TorchStoreTest {};

TEST_F(TorchModuleTest, FqnsAreThoseOfPythonStateDict) {
  Net net(8, 2);
  ASSERT_OK(SaveTrainer({.module = net.get()}, "c", {.model_prefix = ""}));
  // What Python's state_dict() names for the same architecture.
  EXPECT_EQ(Fqns("c"),
            (std::set<std::string>{"layers.0.weight", "layers.0.bias",
                                   "layers.2.weight", "layers.2.bias",
                                   "bn.weight", "bn.bias", "bn.running_mean",
                                   "bn.running_var", "bn.num_batches_tracked",
                                   "head.weight", "head.bias"}));
  EXPECT_EQ(Describe("c", "bn.num_batches_tracked"), "int64 []");
  EXPECT_EQ(Describe("c", "layers.2.weight"), "float32 [8, 8]");

  ASSERT_OK(SaveTrainer({.module = net.get()}, "d"));
  EXPECT_TRUE(Fqns("d").count("model.bn.running_var"));
  EXPECT_EQ(Fqns("d").size(), 11u);
}

TEST_F(TorchModuleTest, LoadWritesIntoTheModulesOwnTensors) {
  Net a(8, 2), b(8, 2);
  a->bn->running_mean.uniform_();
  a->bn->num_batches_tracked.fill_(7);
  ASSERT_FALSE(SameModuleState(*a, *b));
  ASSERT_OK(SaveTrainer({.module = a.get()}, "c"));
  const void* weight = b->head->weight.data_ptr();
  const uint32_t version = b->head->weight._version();
  ASSERT_OK(LoadTrainer({.module = b.get()}, "c"));
  EXPECT_TRUE(SameModuleState(*a, *b));
  EXPECT_EQ(b->head->weight.data_ptr(), weight);   // In place.
  EXPECT_GT(b->head->weight._version(), version);  // As copy_() would.
  EXPECT_TRUE(b->head->weight.requires_grad());
}

// A fine-tune that changes only the head: saved incrementally against the
// last checkpoint, the rest of the module is referenced, not written
// again, and the whole loads back.
TEST_F(TorchModuleTest, AnIncrementalSaveWritesOnlyWhatChanged) {
  Net a(64, 4), b(64, 4);
  ASSERT_OK(SaveTrainer({.module = a.get()}, "c0"));
  {
    ::torch::NoGradGuard no_grad;
    a->head->weight.add_(1.0);
  }
  ASSERT_OK_AND_ASSIGN(auto writer, store_->NewWriter({.base = "c0"}));
  ASSERT_OK(torch::Save({.module = a.get()}, *writer, {.checkpoint_id = "c1"})
                .status());
  ASSERT_OK_AND_ASSIGN(CheckpointInfo c1, store_->Info("c1"));
  const uint64_t head = a->head->weight.numel() * sizeof(float);
  EXPECT_EQ(c1.referenced_bytes, c1.bytes - head);
  ASSERT_OK(store_->Delete("c0"));
  ASSERT_OK(LoadTrainer({.module = b.get()}, "c1"));
  EXPECT_TRUE(SameModuleState(*a, *b));
}

// An output layer whose weight is given: the embedding's.
struct HeadImpl : ::torch::nn::Module {
  explicit HeadImpl(::torch::Tensor w)
      : weight(register_parameter("weight", w)) {}
  ::torch::Tensor forward(::torch::Tensor x) { return x.matmul(weight.t()); }
  ::torch::Tensor weight;
};

// A language model whose output layer shares the embedding's weight.
struct TiedImpl : ::torch::nn::Module {
  TiedImpl()
      : embed(register_module("embed", ::torch::nn::Embedding(10, 4))),
        lm_head(register_module("lm_head",
                                std::make_shared<HeadImpl>(embed->weight))) {}
  ::torch::nn::Embedding embed;
  std::shared_ptr<HeadImpl> lm_head;
};

TEST_F(TorchModuleTest, TiedWeightIsSavedUnderBothNamesAndLoadsOnce) {
  auto a = std::make_shared<TiedImpl>();
  auto b = std::make_shared<TiedImpl>();
  ::torch::optim::Adam adam(a->parameters(), 0.01);
  // The tied weight is listed twice in parameters(): Adam steps it once per
  // listing, keyed by address, so it has one state.
  ::torch::manual_seed(1);
  adam.zero_grad();
  a->lm_head->forward(a->embed->forward(::torch::tensor({1, 2, 3})))
      .sum()
      .backward();
  adam.step();
  ASSERT_OK(SaveTrainer({.module = a.get(), .optimizer = &adam}, "c"));
  const std::set<std::string> fqns = Fqns("c");
  EXPECT_TRUE(fqns.count("model.embed.weight"));
  EXPECT_TRUE(fqns.count("model.lm_head.weight"));
  // State under the first name in named_parameters() order only.
  EXPECT_TRUE(fqns.count("optim.state.embed.weight.exp_avg"));
  EXPECT_FALSE(fqns.count("optim.state.lm_head.weight.exp_avg"));

  ::torch::optim::Adam fresh(b->parameters(), 0.5);
  ASSERT_OK(LoadTrainer({.module = b.get(), .optimizer = &fresh}, "c"));
  EXPECT_TRUE(SameModuleState(*a, *b));
  EXPECT_EQ(b->embed->weight.data_ptr(), b->lm_head->weight.data_ptr());
  EXPECT_EQ(fresh.state().size(), 1u);
  EXPECT_EQ(static_cast<::torch::optim::AdamOptions&>(
                fresh.param_groups()[0].options())
                .lr(),
            0.01);
}

TEST_F(TorchModuleTest, EmptyModuleSavesAndLoads) {
  auto empty = std::make_shared<::torch::nn::Module>();
  torch::TrainerState state{.step = 5, .extra = {{"k", "v"}}};
  ASSERT_OK(SaveTrainer({.module = empty.get(), .state = &state}, "c"));
  EXPECT_EQ(Fqns("c"),
            (std::set<std::string>{"trainer.step", "trainer.rng_state",
                                   "trainer.extra.k"}));
  torch::TrainerState back;
  ASSERT_OK(LoadTrainer({.module = empty.get(), .state = &back}, "c"));
  EXPECT_EQ(back.step, 5);
  EXPECT_EQ(back.extra, state.extra);
}

TEST_F(TorchModuleTest, TrainerStateRoundTripsAndTheRngDrawsTheSame) {
  Net net(4, 1);
  ::torch::manual_seed(42);
  ::torch::randn({100});  // Somewhere in the stream.
  torch::TrainerState state{
      .step = 1234,
      .extra = {{"loader", std::string("\0\x01pos", 5)}, {"epoch", "3"}}};
  ASSERT_OK(SaveTrainer({.module = net.get(), .state = &state}, "c"));
  EXPECT_EQ(Describe("c", "trainer.step"), "int64 []");
  EXPECT_EQ(Describe("c", "trainer.extra.loader"), "bytes");
  ::torch::Tensor expected = ::torch::randn({16});

  ::torch::manual_seed(7);  // Elsewhere.
  torch::TrainerState back{.step = 0, .extra = {{"stale", "x"}}};
  ASSERT_OK(LoadTrainer({.module = net.get(), .state = &back}, "c"));
  EXPECT_EQ(back.step, 1234);
  EXPECT_EQ(back.extra, state.extra);  // "stale" is gone.
  EXPECT_TRUE(BitEqual(::torch::randn({16}), expected));
}

TEST_F(TorchModuleTest, RngStateIsOptional) {
  Net net(4, 1);
  torch::TrainerState state{.step = 3};
  ASSERT_OK(SaveTrainer({.module = net.get(), .state = &state}, "c",
                        {.rng_state = false}));
  EXPECT_FALSE(Fqns("c").count("trainer.rng_state"));
  EXPECT_OK(LoadTrainer({.module = net.get(), .state = &state}, "c",
                        {.rng_state = false}));
  EXPECT_THAT(LoadTrainer({.module = net.get(), .state = &state}, "c"),
              StatusIs(StatusCode::kNotFound,
                       HasSubstr("missing 'trainer.rng_state' (uint8 [")));
}

TEST_F(TorchModuleTest, PartialLoadSkipsWhatTheCheckpointLacks) {
  Net small(8, 1), big(8, 2);
  ASSERT_OK(SaveTrainer({.module = small.get()}, "c"));
  EXPECT_THAT(LoadTrainer({.module = big.get()}, "c"),
              StatusIs(StatusCode::kNotFound,
                       HasSubstr("missing 'model.layers.2.weight'")));
  ::torch::Tensor layer2 =
      big->layers[2]->as<::torch::nn::Linear>()->weight.clone();
  ASSERT_OK(LoadTrainer({.module = big.get()}, "c", {}, true));
  EXPECT_TRUE(BitEqual(big->head->weight, small->head->weight));
  EXPECT_TRUE(
      BitEqual(big->layers[2]->as<::torch::nn::Linear>()->weight, layer2));
}

TEST_F(TorchModuleTest, ThreadRanksEachSaveAndLoadTheirReplica) {
  // Data-parallel replicas, one per thread rank: the driver writes each
  // replicated tensor once, and every rank loads it all.
  constexpr int kRanks = 2;
  ::torch::manual_seed(5);
  Net source(8, 2);
  std::vector<Net> saved, loaded;
  std::vector<std::unique_ptr<::torch::optim::Adam>> saved_opt, loaded_opt;
  for (int r = 0; r < kRanks; ++r) {
    saved.emplace_back(8, 2);
    loaded.emplace_back(8, 2);
    ::torch::NoGradGuard no_grad;
    for (size_t i = 0; i < source->parameters().size(); ++i) {
      saved[r]->parameters()[i].copy_(source->parameters()[i]);
    }
    saved_opt.push_back(
        std::make_unique<::torch::optim::Adam>(saved[r]->parameters()));
    loaded_opt.push_back(
        std::make_unique<::torch::optim::Adam>(loaded[r]->parameters()));
  }
  for (int r = 0; r < kRanks; ++r) TrainStep(saved[r], *saved_opt[r], 1);
  std::vector<Status> results(kRanks);
  RunRanks(kRanks, 0, [&](int r, Collective& c) {
    auto writer = store_->NewWriter();
    results[r] =
        writer.ok()
            ? torch::Save({saved[r].get(), saved_opt[r].get()}, **writer,
                          {.checkpoint_id = "c", .collective = &c})
                  .status()
            : writer.status();
  });
  for (const Status& s : results) ASSERT_OK(s);
  RunRanks(kRanks, 0, [&](int r, Collective& c) {
    auto reader = store_->NewReader();
    results[r] =
        reader.ok()
            ? torch::Load({loaded[r].get(), loaded_opt[r].get()}, **reader,
                          {.checkpoint_id = "c", .collective = &c})
            : reader.status();
  });
  for (const Status& s : results) ASSERT_OK(s);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(SameModuleState(*saved[0], *loaded[r])) << "rank " << r;
    EXPECT_EQ(loaded_opt[r]->state().size(), saved_opt[0]->state().size());
  }
}

TEST_F(TorchModuleTest, ClashingPrefixesAreRefused) {
  Net net(4, 1);
  EXPECT_THAT(SaveTrainer({.module = net.get()}, "c",
                          {.optimizer_prefix = "model.optim."}),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("optimizer_prefix 'model.optim.' starts with "
                                 "model_prefix 'model.'")));
  EXPECT_THAT(
      SaveTrainer({.module = net.get()}, "c", {.trainer_prefix = ""}),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("must not be empty")));
}

}  // namespace
}  // namespace rocksdcp::testing
