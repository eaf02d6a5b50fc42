// The LibTorch adapter's errors: each row of docs/errors.md named torch-...
// is made to happen here and its code and message checked against the
// document, as tests/rocksdb/error_table_test.cc does for the core's rows
// (ROCKSDCP_PRINT_ERRORS=1 prints the rows as the code words them). Then:
// a load that fails its checks changes nothing, and one that fails later
// takes back the optimizer state it created.

#include <functional>
#include <map>
#include <string>

#include "torch/torch_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::HasSubstr;
namespace optim = ::torch::optim;

const char kDoc[] = ROCKSDCP_SOURCE_DIR "/docs/errors.md";

// Every row named torch-..., in the document's order.
const char* const kScenarios[] = {
    "torch-tensor-not-on-cpu",
    "torch-tensor-shares-memory",
    "torch-fqn-missing",
    "torch-fqn-unexpected",
    "torch-shape-mismatch",
    "torch-dtype-mismatch",
    "torch-optimizer-kind",
    "torch-adamw-into-adam",
    "torch-param-group-layout",
    "torch-python-option-true",
    "torch-hyperparameter-pickled",
    "torch-optimizer-not-supported",
    "torch-parameter-not-in-module",
    "torch-step-too-large",
    "torch-overwritten-during-load",
    "torch-piece-corrupt",
};

// A reader that runs `between` before its second Reset: between the two
// phases of rocksdcp::torch::Load.
class BetweenPhasesReader : public StorageReaderWrapper {
 public:
  BetweenPhasesReader(StorageReader* target, std::function<void()> between)
      : StorageReaderWrapper(target), between_(std::move(between)) {}
  Status Reset(std::string_view id) override {
    if (++resets_ == 2) between_();
    return StorageReaderWrapper::Reset(id);
  }

 private:
  std::function<void()> between_;
  int resets_ = 0;
};

class TorchErrorsTest : public TorchStoreTest {
 protected:
  // A checkpoint "c" of a Net(width, depth) with `optimizer_kind`'s state
  // ("" for none), after one step.
  Status SaveNet(int64_t width, int64_t depth, const std::string& kind,
                 double lr = 0.01) {
    Net net(width, depth);
    std::unique_ptr<optim::Optimizer> o;
    if (kind == "Adam")
      o = std::make_unique<optim::Adam>(net->parameters(), lr);
    if (kind == "AdamW")
      o = std::make_unique<optim::AdamW>(net->parameters(), lr);
    if (kind == "SGD") {
      o = std::make_unique<optim::SGD>(net->parameters(),
                                       optim::SGDOptions(lr).momentum(0.9));
    }
    if (o) TrainStep(net, *o, 1);
    return SaveTrainer({.module = net.get(), .optimizer = o.get()}, "c")
        .status();
  }

  std::map<std::string, std::function<Status()>> Scenarios() {
    std::map<std::string, std::function<Status()>> s;
    s["torch-tensor-not-on-cpu"] = [this] {
      // A module built on another device: meta, the one this machine has.
      auto module = std::make_shared<::torch::nn::Module>();
      module->register_parameter("w", ::torch::empty({2}, ::torch::kMeta));
      return SaveTrainer({.module = module.get()}, "c").status();
    };
    s["torch-tensor-shares-memory"] = [] {
      return torch::MutableViewOf(::torch::zeros({1, 3}).expand({4, 3}),
                                  "model.mask")
          .status();
    };
    s["torch-fqn-missing"] = [this] {
      ROCKSDCP_RETURN_IF_ERROR(SaveNet(8, 1, ""));
      Net net(8, 2);
      return LoadTrainer({.module = net.get()}, "c");
    };
    s["torch-fqn-unexpected"] = [this] {
      ROCKSDCP_RETURN_IF_ERROR(SaveNet(8, 2, ""));
      Net net(8, 1);
      return LoadTrainer({.module = net.get()}, "c");
    };
    s["torch-shape-mismatch"] = [this] {
      ::torch::nn::Linear saved(8, 4);
      ROCKSDCP_RETURN_IF_ERROR(
          SaveTrainer({.module = saved.get()}, "c").status());
      ::torch::nn::Linear into(4, 8);
      return LoadTrainer({.module = into.get()}, "c");
    };
    s["torch-dtype-mismatch"] = [this] {
      ::torch::nn::Linear saved(4, 4);
      ROCKSDCP_RETURN_IF_ERROR(
          SaveTrainer({.module = saved.get()}, "c").status());
      ::torch::nn::Linear into(4, 4);
      into->to(::torch::kBFloat16);
      return LoadTrainer({.module = into.get()}, "c");
    };
    s["torch-optimizer-kind"] = [this] {
      ROCKSDCP_RETURN_IF_ERROR(SaveNet(2, 1, "SGD"));
      Net net(2, 1);
      optim::Adam adam(net->parameters());
      return LoadTrainer({.module = net.get(), .optimizer = &adam}, "c");
    };
    s["torch-adamw-into-adam"] = [this] {
      ROCKSDCP_RETURN_IF_ERROR(SaveNet(4, 1, "AdamW"));
      Net net(4, 1);
      optim::Adam adam(net->parameters());
      return LoadTrainer({.module = net.get(), .optimizer = &adam}, "c");
    };
    s["torch-param-group-layout"] = [this] {
      Net a(4, 1);
      optim::Adam two(a->layers->parameters(), 0.01);
      two.add_param_group(optim::OptimizerParamGroup(
          a->head->parameters(), std::make_unique<optim::AdamOptions>(0.1)));
      ROCKSDCP_RETURN_IF_ERROR(
          SaveTrainer({.module = a.get(), .optimizer = &two}, "c").status());
      Net b(4, 1);
      std::vector<::torch::Tensor> params = b->layers->parameters();
      for (const auto& p : b->head->parameters()) params.push_back(p);
      optim::Adam one(params, 0.01);
      return LoadTrainer({.module = b.get(), .optimizer = &one}, "c");
    };
    s["torch-python-option-true"] = [this] {
      // As rocksdcp's Python planner saves Adam(maximize=True).
      Net a(4, 1);
      optim::Adam adam(a->parameters(), 0.01);
      TrainStep(a, adam, 1);
      ROCKSDCP_RETURN_IF_ERROR(
          SaveEdited({a.get(), &adam}, "c", [this](StateDict& d) {
            for (auto& [fqn, value] : d) {
              if (fqn.size() > 9 && fqn.substr(fqn.size() - 9) == ".maximize") {
                value = Keep(::torch::scalar_tensor(true, ::torch::kBool));
              }
            }
          }).status());
      Net b(4, 1);
      optim::Adam into(b->parameters());
      return LoadTrainer({.module = b.get(), .optimizer = &into}, "c");
    };
    s["torch-hyperparameter-pickled"] = [this] {
      // As torch's own DefaultSavePlanner saves SGD: each hyperparameter
      // pickled (pickle.dumps(0.01, protocol=2) stands for them all).
      ::torch::nn::Linear a(2, 1);
      optim::SGD sgd(a->parameters(), optim::SGDOptions(0.01).momentum(0.9));
      ROCKSDCP_RETURN_IF_ERROR(
          SaveEdited({a.get(), &sgd}, "c", [](StateDict& d) {
            for (auto& [fqn, value] : d) {
              if (fqn.rfind("optim.param_groups.", 0) == 0) {
                value = std::string("\x80\x02G?\x84z\xe1G\xae\x14{.", 12);
              }
            }
          }).status());
      ::torch::nn::Linear b(2, 1);
      optim::SGD into(b->parameters(), 0.1);
      return LoadTrainer({.module = b.get(), .optimizer = &into}, "c");
    };
    s["torch-optimizer-not-supported"] = [this] {
      Net net(4, 1);
      optim::LBFGS lbfgs(net->parameters());
      return SaveTrainer({.module = net.get(), .optimizer = &lbfgs}, "c")
          .status();
    };
    s["torch-parameter-not-in-module"] = [this] {
      Net net(4, 1);
      optim::SGD sgd({::torch::zeros({3, 2}, ::torch::requires_grad())}, 0.1);
      return SaveTrainer({.module = net.get(), .optimizer = &sgd}, "c")
          .status();
    };
    s["torch-step-too-large"] = [this] {
      Net net(4, 1);
      optim::Adam adam(net->head->parameters());
      TrainStep(net, adam, 1);
      for (auto& [key, state] : adam.state()) {
        static_cast<optim::AdamParamState&>(*state).step(int64_t{1} << 25);
      }
      return SaveTrainer({.module = net.get(), .optimizer = &adam}, "c")
          .status();
    };
    s["torch-overwritten-during-load"] = [this] {
      ROCKSDCP_RETURN_IF_ERROR(SaveNet(4, 1, ""));
      ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store_->NewReader());
      BetweenPhasesReader between(reader.get(), [this] {
        EXPECT_OK(SaveNet(4, 1, ""));  // SaveTrainer overwrites.
      });
      Net net(4, 1);
      return torch::Load({.module = net.get()}, between,
                         {.checkpoint_id = "c"});
    };
    s["torch-piece-corrupt"] = [this] {
      ::torch::manual_seed(1);  // The same bytes, so the same checksums.
      Net a(64, 1);
      ROCKSDCP_ASSIGN_OR_RETURN(auto writer,
                                store_->NewWriter({.max_piece_bytes = 4096}));
      ROCKSDCP_RETURN_IF_ERROR(
          torch::Save({.module = a.get()}, *writer, {.checkpoint_id = "c"})
              .status());
      writer.reset();
      CloseStore();
      std::vector<std::string> ssts = SstFiles();
      EXPECT_FALSE(ssts.empty());
      if (!ssts.empty()) FlipByte(ssts[0], 4096 + 100);
      OpenStore();
      Net b(64, 1);
      return LoadTrainer({.module = b.get()}, "c");
    };
    return s;
  }

  ErrorDocRow Produce(const std::function<Status()>& scenario) {
    const Status s = scenario();
    std::string message = s.message();
    const std::string store = store_path();
    for (size_t at; (at = message.find(store)) != std::string::npos;) {
      message.replace(at, store.size(), "<store>");
    }
    return {std::string(StatusCodeName(s.code())), message};
  }
};

class TorchErrorTableTest : public TorchErrorsTest,
                            public ::testing::WithParamInterface<const char*> {
};

TEST_P(TorchErrorTableTest, MessageIsTheDocumentedOne) {
  const std::string name = GetParam();
  auto scenarios = Scenarios();
  ASSERT_TRUE(scenarios.count(name) > 0) << "no scenario " << name;
  EXPECT_TRUE(IsDocumentedError(ReadErrorDoc(kDoc, "torch-"), name,
                                Produce(scenarios[name])));
}

INSTANTIATE_TEST_SUITE_P(Docs, TorchErrorTableTest,
                         ::testing::ValuesIn(kScenarios), ErrorRowTestName);

TEST(TorchErrorTableDocTest, EveryRowHasAScenario) {
  const std::map<std::string, ErrorDocRow> doc = ReadErrorDoc(kDoc, "torch-");
  EXPECT_EQ(doc.size(), std::size(kScenarios));
  for (const char* name : kScenarios) {
    EXPECT_TRUE(doc.count(name) > 0) << "docs/errors.md lacks `" << name << "`";
  }
}

TEST_F(TorchErrorsTest, AFailedCheckWritesNothing) {
  ASSERT_OK(SaveNet(4, 1, "SGD", 0.5));
  Net net(4, 1);
  optim::Adam adam(net->parameters(), 0.02);
  Net before(4, 1);
  ::torch::NoGradGuard no_grad;
  for (size_t i = 0; i < net->parameters().size(); ++i) {
    before->parameters()[i].copy_(net->parameters()[i]);
  }
  EXPECT_THAT(
      LoadTrainer({.module = net.get(), .optimizer = &adam}, "c"),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("optimizer kind")));
  EXPECT_TRUE(SameModuleState(*net, *before));
  EXPECT_TRUE(adam.state().empty());
  EXPECT_EQ(adam.param_groups()[0].options().get_lr(), 0.02);
}

TEST_F(TorchErrorsTest,
       ALaterFailureTakesBackCreatedStateAndKeepsHyperparameters) {
  Net a(64, 1);
  optim::Adam opt_a(a->parameters(), 0.5);
  TrainStep(a, opt_a, 1);
  torch::TrainerState state{.step = 9};
  ASSERT_OK_AND_ASSIGN(auto writer,
                       store_->NewWriter({.max_piece_bytes = 4096}));
  ASSERT_OK(
      torch::Save({a.get(), &opt_a, &state}, *writer, {.checkpoint_id = "c"}));
  writer.reset();
  CloseStore();
  for (const std::string& sst : SstFiles()) FlipByte(sst, 4096 + 100);
  OpenStore();

  Net b(64, 1);
  optim::Adam opt_b(b->parameters(), 0.02);
  torch::TrainerState back{.step = 1};
  EXPECT_THAT(LoadTrainer({b.get(), &opt_b, &back}, "c"),
              StatusIs(StatusCode::kCorruption, HasSubstr("at read_data")));
  EXPECT_TRUE(opt_b.state().empty());
  EXPECT_EQ(opt_b.param_groups()[0].options().get_lr(), 0.02);
  EXPECT_EQ(back.step, 1);
}

}  // namespace
}  // namespace rocksdcp::testing
