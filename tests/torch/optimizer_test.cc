// rocksdcp::torch with each optimizer kind: the names it saves, and a
// fresh model and optimizer that load a checkpoint train on bit for bit as
// the original does.

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "torch/torch_fixture.h"

namespace rocksdcp::testing {
namespace {

using ::testing::HasSubstr;
namespace optim = ::torch::optim;

struct OptimizerCase {
  const char* name;
  // Makes one over `groups`, each with the kind's default options.
  std::function<std::unique_ptr<optim::Optimizer>(
      std::vector<optim::OptimizerParamGroup>)>
      make;
  // The state a stepped parameter has, and its param groups' fields.
  std::set<std::string> state;
  std::set<std::string> hyper;
};

const std::set<std::string> kAdamHyper = {
    "lr", "betas.0", "betas.1", "eps", "weight_decay", "amsgrad",
    "decoupled_weight_decay"};

std::vector<OptimizerCase> Cases() {
  using P = std::vector<optim::OptimizerParamGroup>;
  return {
      {"Adam",
       [](P p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.01)); },
       {"exp_avg", "exp_avg_sq", "step"}, kAdamHyper},
      {"AdamAmsgrad",
       [](P p) {
         return std::make_unique<optim::Adam>(
             p, optim::AdamOptions(0.01).amsgrad(true).weight_decay(0.01));
       },
       {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"}, kAdamHyper},
      {"AdamW",
       [](P p) {
         return std::make_unique<optim::AdamW>(
             p, optim::AdamWOptions(0.01).betas({0.8, 0.95}));
       },
       {"exp_avg", "exp_avg_sq", "step"}, kAdamHyper},
      {"SGDMomentum",
       [](P p) {
         return std::make_unique<optim::SGD>(
             p, optim::SGDOptions(0.05).momentum(0.9).dampening(0.1));
       },
       {"momentum_buffer"},
       {"lr", "momentum", "dampening", "weight_decay", "nesterov"}},
      {"SGDNesterov",
       [](P p) {
         return std::make_unique<optim::SGD>(
             p, optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
       },
       {"momentum_buffer"},
       {"lr", "momentum", "dampening", "weight_decay", "nesterov"}},
      {"RMSprop",
       [](P p) {
         return std::make_unique<optim::RMSprop>(p, optim::RMSpropOptions(0.01));
       },
       {"square_avg", "step"},
       {"lr", "alpha", "eps", "weight_decay", "momentum", "centered"}},
      {"RMSpropCenteredMomentum",
       [](P p) {
         return std::make_unique<optim::RMSprop>(
             p, optim::RMSpropOptions(0.01).momentum(0.5).centered(true));
       },
       {"square_avg", "momentum_buffer", "grad_avg", "step"},
       {"lr", "alpha", "eps", "weight_decay", "momentum", "centered"}},
      {"Adagrad",
       [](P p) {
         return std::make_unique<optim::Adagrad>(
             p, optim::AdagradOptions(0.1).initial_accumulator_value(0.1));
       },
       {"sum", "step"},
       {"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"}},
  };
}

// Equal fqns, and equal bytes under each, in the two trainers' state dicts.
::testing::AssertionResult SameTrainer(const torch::Trainer& a,
                                       const torch::Trainer& b) {
  auto da = torch::MakeStateDict(a, {.rng_state = false});
  auto db = torch::MakeStateDict(b, {.rng_state = false});
  if (!da.ok() || !db.ok()) {
    return ::testing::AssertionFailure() << "MakeStateDict failed";
  }
  const StateDict& x = da->dict();
  const StateDict& y = db->dict();
  if (x.size() != y.size()) {
    return ::testing::AssertionFailure()
           << x.size() << " items vs " << y.size();
  }
  for (const auto& [fqn, value] : x) {
    auto it = y.find(fqn);
    if (it == y.end()) return ::testing::AssertionFailure() << fqn << " missing";
    if (value.index() != it->second.index()) {
      return ::testing::AssertionFailure() << fqn << " differs in kind";
    }
    if (const auto* t = std::get_if<TensorView>(&value)) {
      auto r = SameTensor(*t, std::get<TensorView>(it->second));
      if (!r) return r << " at " << fqn;
    } else if (std::get<std::string>(value) !=
               std::get<std::string>(it->second)) {
      return ::testing::AssertionFailure() << fqn << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

class TorchOptimizerTest : public TorchStoreTest,
                           public ::testing::WithParamInterface<OptimizerCase> {};

TEST_P(TorchOptimizerTest, SavesPythonsFlattenedNames) {
  Net net(4, 1);
  auto optimizer = GetParam().make({net->parameters()});
  for (uint64_t s = 1; s <= 2; ++s) TrainStep(net, *optimizer, s);
  ASSERT_OK(SaveTrainer({.module = net.get(), .optimizer = optimizer.get()}, "c"));
  std::set<std::string> state, hyper;
  const std::string state_prefix = "optim.state.layers.0.weight.";
  const std::string group_prefix = "optim.param_groups.layers.0.weight.";
  for (const std::string& fqn : Fqns("c")) {
    if (fqn.rfind(state_prefix, 0) == 0) state.insert(fqn.substr(state_prefix.size()));
    if (fqn.rfind(group_prefix, 0) == 0) hyper.insert(fqn.substr(group_prefix.size()));
  }
  EXPECT_EQ(state, GetParam().state);
  EXPECT_EQ(hyper, GetParam().hyper);
  if (state.count("step")) {
    EXPECT_EQ(Describe("c", state_prefix + "step"), "float32 []");
  }
  EXPECT_EQ(Describe("c", group_prefix + "lr"), "float64 []");
  for (const std::string& field : GetParam().state) {
    if (field == "step") continue;
    EXPECT_EQ(Describe("c", state_prefix + field), "float32 [4, 4]") << field;
  }
}

TEST_P(TorchOptimizerTest, FreshTrainerResumesBitExact) {
  Net a(8, 2);
  auto opt_a = GetParam().make({a->parameters()});
  for (uint64_t s = 1; s <= 3; ++s) TrainStep(a, *opt_a, s);
  // As a scheduler would: the checkpoint's lr is not the constructor's.
  opt_a->param_groups()[0].options().set_lr(0.004);
  ASSERT_OK(SaveTrainer({.module = a.get(), .optimizer = opt_a.get()}, "c"));

  Net b(8, 2);  // Other initial weights, and an optimizer that never stepped.
  auto opt_b = GetParam().make({b->parameters()});
  ASSERT_OK(LoadTrainer({.module = b.get(), .optimizer = opt_b.get()}, "c"));
  EXPECT_EQ(opt_b->param_groups()[0].options().get_lr(), 0.004);
  EXPECT_TRUE(SameTrainer({a.get(), opt_a.get()}, {b.get(), opt_b.get()}));

  for (uint64_t s = 4; s <= 6; ++s) {
    TrainStep(a, *opt_a, s);
    TrainStep(b, *opt_b, s);
  }
  EXPECT_TRUE(SameModuleState(*a, *b));
  EXPECT_TRUE(SameTrainer({a.get(), opt_a.get()}, {b.get(), opt_b.get()}));
}

// The optimizer of `net`, in two param groups: the layers, and the rest
// at lr 0.25.
std::unique_ptr<optim::Optimizer> TwoGroups(const OptimizerCase& c, Net& net) {
  std::vector<::torch::Tensor> rest = net->head->parameters();
  for (const auto& p : net->bn->parameters()) rest.push_back(p);
  auto o = c.make({optim::OptimizerParamGroup(net->layers->parameters()),
                   optim::OptimizerParamGroup(rest)});
  o->param_groups()[1].options().set_lr(0.25);
  return o;
}

TEST_P(TorchOptimizerTest, TwoParamGroupsKeepTheirOwnHyperparameters) {
  Net a(4, 1), b(4, 1);
  auto opt_a = TwoGroups(GetParam(), a);
  auto opt_b = TwoGroups(GetParam(), b);
  TrainStep(a, *opt_a, 1);
  opt_a->param_groups()[1].options().set_lr(0.125);
  ASSERT_OK(SaveTrainer({.module = a.get(), .optimizer = opt_a.get()}, "c"));
  ASSERT_OK(LoadTrainer({.module = b.get(), .optimizer = opt_b.get()}, "c"));
  EXPECT_EQ(opt_b->param_groups()[1].options().get_lr(), 0.125);
  EXPECT_NE(opt_b->param_groups()[0].options().get_lr(), 0.125);
  EXPECT_TRUE(SameTrainer({a.get(), opt_a.get()}, {b.get(), opt_b.get()}));
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, TorchOptimizerTest, ::testing::ValuesIn(Cases()),
    [](const ::testing::TestParamInfo<OptimizerCase>& info) {
      return std::string(info.param.name);
    });

class TorchOptimizerStateTest : public TorchStoreTest {};

TEST_F(TorchOptimizerStateTest, FrozenParameterHasNoStateAndLoadDropsStaleState) {
  Net a(4, 1), b(4, 1);
  optim::Adam opt_a(a->parameters(), 0.01);
  optim::Adam opt_b(b->parameters(), 0.01);
  a->head->weight.set_requires_grad(false);
  TrainStep(a, opt_a, 1);
  TrainStep(b, opt_b, 1);  // b's head has state.
  ASSERT_OK(SaveTrainer({.module = a.get(), .optimizer = &opt_a}, "c"));
  const std::set<std::string> fqns = Fqns("c");
  EXPECT_FALSE(fqns.count("optim.state.head.weight.exp_avg"));
  EXPECT_TRUE(fqns.count("optim.state.head.bias.exp_avg"));
  EXPECT_TRUE(fqns.count("optim.param_groups.head.weight.lr"));
  ASSERT_EQ(opt_b.state().size(), a->parameters().size());
  ASSERT_OK(LoadTrainer({.module = b.get(), .optimizer = &opt_b}, "c"));
  EXPECT_EQ(opt_b.state().size(), opt_a.state().size());
  EXPECT_TRUE(SameTrainer({a.get(), &opt_a}, {b.get(), &opt_b}));
}

TEST_F(TorchOptimizerStateTest, OptimizerOverOtherTensorsIsRefused) {
  Net net(4, 1);
  ::torch::Tensor stranger = ::torch::zeros({3, 2}, ::torch::requires_grad());
  optim::SGD sgd({stranger}, 0.1);
  EXPECT_THAT(
      SaveTrainer({.module = net.get(), .optimizer = &sgd}, "c"),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("parameter 0 of param group 0 of the optimizer (shape "
                         "[3, 2]) is not a parameter of the module")));
  optim::LBFGS lbfgs(net->parameters());
  EXPECT_THAT(SaveTrainer({.module = net.get(), .optimizer = &lbfgs}, "c"),
              StatusIs(StatusCode::kNotSupported,
                       HasSubstr("optimizer torch::optim::LBFGS is not one "
                                 "rocksdcp::torch saves")));
}

TEST_F(TorchOptimizerStateTest, StepBeyondFloat32IsRefusedNamingIt) {
  Net net(4, 1);
  optim::Adam adam(net->parameters());
  TrainStep(net, adam, 1);
  for (auto& [key, state] : adam.state()) {
    static_cast<optim::AdamParamState&>(*state).step((int64_t{1} << 24) + 1);
  }
  EXPECT_THAT(SaveTrainer({.module = net.get(), .optimizer = &adam}, "c"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("optimizer step 16777217 of parameter")));
}

}  // namespace
}  // namespace rocksdcp::testing
