// rocksdcp::torch with each optimizer kind: the names it saves, and a
// fresh model and optimizer that load a checkpoint train on bit for bit as
// the original does.

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <tuple>
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

// The keys of a param group of Python's optimizer of each kind (torch
// 2.15), params aside: what DCP's flattened optimizer state has under
// param_groups.<param>.
const std::set<std::string> kAdamHyper = {"lr",
                                          "betas",
                                          "eps",
                                          "weight_decay",
                                          "amsgrad",
                                          "maximize",
                                          "foreach",
                                          "capturable",
                                          "differentiable",
                                          "fused",
                                          "decoupled_weight_decay"};
const std::set<std::string> kSgdHyper = {
    "lr",       "momentum", "dampening",      "weight_decay", "nesterov",
    "maximize", "foreach",  "differentiable", "fused"};
const std::set<std::string> kRmspropHyper = {
    "lr",       "alpha",      "eps",     "weight_decay", "momentum",
    "centered", "capturable", "foreach", "maximize",     "differentiable"};
const std::set<std::string> kAdagradHyper = {
    "lr",   "lr_decay", "weight_decay", "initial_accumulator_value",
    "eps",  "foreach",  "maximize",     "differentiable",
    "fused"};

std::vector<OptimizerCase> Cases() {
  using P = std::vector<optim::OptimizerParamGroup>;
  return {
      {"Adam",
       [](P p) {
         return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.01));
       },
       {"exp_avg", "exp_avg_sq", "step"},
       kAdamHyper},
      {"AdamAmsgrad",
       [](P p) {
         return std::make_unique<optim::Adam>(
             p, optim::AdamOptions(0.01).amsgrad(true).weight_decay(0.01));
       },
       {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"},
       kAdamHyper},
      {"AdamW",
       [](P p) {
         return std::make_unique<optim::AdamW>(
             p, optim::AdamWOptions(0.01).betas({0.8, 0.95}));
       },
       {"exp_avg", "exp_avg_sq", "step"},
       kAdamHyper},
      {"SGDMomentum",
       [](P p) {
         return std::make_unique<optim::SGD>(
             p, optim::SGDOptions(0.05).momentum(0.9).dampening(0.1));
       },
       {"momentum_buffer"},
       kSgdHyper},
      {"SGDNesterov",
       [](P p) {
         return std::make_unique<optim::SGD>(
             p, optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
       },
       {"momentum_buffer"},
       kSgdHyper},
      {"RMSprop",
       [](P p) {
         return std::make_unique<optim::RMSprop>(p,
                                                 optim::RMSpropOptions(0.01));
       },
       {"square_avg", "step"},
       kRmspropHyper},
      {"RMSpropCenteredMomentum",
       [](P p) {
         return std::make_unique<optim::RMSprop>(
             p, optim::RMSpropOptions(0.01).momentum(0.5).centered(true));
       },
       {"square_avg", "momentum_buffer", "grad_avg", "step"},
       kRmspropHyper},
      {"Adagrad",
       [](P p) {
         return std::make_unique<optim::Adagrad>(
             p, optim::AdagradOptions(0.1).initial_accumulator_value(0.1));
       },
       {"sum", "step"},
       kAdagradHyper},
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
    if (it == y.end())
      return ::testing::AssertionFailure() << fqn << " missing";
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
                           public ::testing::WithParamInterface<OptimizerCase> {
};

TEST_P(TorchOptimizerTest, SavesPythonsFlattenedNames) {
  Net net(4, 1);
  auto optimizer = GetParam().make({net->parameters()});
  for (uint64_t s = 1; s <= 2; ++s) TrainStep(net, *optimizer, s);
  ASSERT_OK(
      SaveTrainer({.module = net.get(), .optimizer = optimizer.get()}, "c"));
  std::set<std::string> state, hyper;
  const std::string state_prefix = "optim.state.layers.0.weight.";
  const std::string group_prefix = "optim.param_groups.layers.0.weight.";
  for (const std::string& fqn : Fqns("c")) {
    if (fqn.rfind(state_prefix, 0) == 0)
      state.insert(fqn.substr(state_prefix.size()));
    if (fqn.rfind(group_prefix, 0) == 0)
      hyper.insert(fqn.substr(group_prefix.size()));
  }
  EXPECT_EQ(state, GetParam().state);
  EXPECT_EQ(hyper, GetParam().hyper);
  if (state.count("step")) {
    EXPECT_EQ(Describe("c", state_prefix + "step"), "float32 []");
  }
  // Each in the encoding rocksdcp's Python planner gives Python's value.
  for (const std::string& field : hyper) {
    const std::string fqn = group_prefix + field;
    if (field == "betas") {
      EXPECT_EQ(Describe("c", fqn), "float64 [2]");
    } else if (field == "foreach" || field == "fused") {
      EXPECT_EQ(Describe("c", fqn), "bytes");
      EXPECT_EQ(ReadBytes("c", fqn), "rocksdcp-json:null");  // None.
    } else if (field == "amsgrad" || field == "nesterov" ||
               field == "centered" || field == "maximize" ||
               field == "capturable" || field == "differentiable" ||
               field == "decoupled_weight_decay") {
      EXPECT_EQ(Describe("c", fqn), "bool []") << field;
    } else {
      EXPECT_EQ(Describe("c", fqn), "float64 []") << field;
    }
  }
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

TEST_F(TorchOptimizerStateTest,
       FrozenParameterHasNoStateAndLoadDropsStaleState) {
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

// ---- Hyperparameters as Python saves them, and the options only Python's
// optimizers have. ----

// "optim.param_groups.<param>." of each parameter in `dict`.
std::vector<std::string> GroupPrefixes(const StateDict& dict) {
  const std::string head = "optim.param_groups.", lr = ".lr";
  std::vector<std::string> out;
  for (const auto& [fqn, value] : dict) {
    if (fqn.rfind(head, 0) == 0 && fqn.size() > head.size() + lr.size() &&
        fqn.compare(fqn.size() - lr.size(), lr.size(), lr) == 0) {
      out.push_back(fqn.substr(0, fqn.size() - lr.size() + 1));
    }
  }
  return out;
}

// pickle.dumps(0.01, protocol=2): bytes as torch's own DefaultSavePlanner
// saves a hyperparameter (inside torch.save's zip), which C++ can't read.
const std::string kPickle("\x80\x02G?\x84z\xe1G\xae\x14{.", 12);

class TorchPythonOptionsTest : public TorchStoreTest {
 protected:
  TorchPythonOptionsTest()
      : net_(4, 1),
        adam_(net_->parameters(), optim::AdamOptions(0.01).betas({0.8, 0.95})),
        fresh_(4, 1),
        fresh_adam_(fresh_->parameters(), optim::AdamOptions(0.5)) {
    TrainStep(net_, adam_, 1);
    for (const auto& t : fresh_->parameters()) {
      fresh_before_.push_back(t.detach().clone());
    }
  }

  // Adam after a step, with betas (0.8, 0.95): what the checkpoints hold.
  torch::Trainer Saved() { return {net_.get(), &adam_}; }
  // Another Net and an Adam at lr 0.5 that never stepped: what they load
  // into.
  torch::Trainer Fresh() { return {fresh_.get(), &fresh_adam_}; }
  optim::AdamOptions& FreshOptions() {
    return static_cast<optim::AdamOptions&>(
        fresh_adam_.param_groups()[0].options());
  }

  // Sets `field` of every parameter's param group in `dict` to `value`.
  static void SetAll(StateDict& dict, const std::string& field,
                     const StateValue& value) {
    for (const std::string& p : GroupPrefixes(dict)) dict[p + field] = value;
  }
  // What `fresh_` holds is what it held before a load that failed.
  ::testing::AssertionResult FreshUnchanged() {
    const std::vector<::torch::Tensor> params = fresh_->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      if (auto r = BitEqual(params[i], fresh_before_[i]); !r) {
        return r << " at parameter " << i;
      }
    }
    if (!fresh_adam_.state().empty()) {
      return ::testing::AssertionFailure() << "the optimizer got state";
    }
    if (FreshOptions().lr() != 0.5) {
      return ::testing::AssertionFailure() << "lr is " << FreshOptions().lr();
    }
    return ::testing::AssertionSuccess();
  }

  Net net_;
  optim::Adam adam_;
  Net fresh_;
  optim::Adam fresh_adam_;
  std::vector<::torch::Tensor> fresh_before_;
};

TEST_F(TorchPythonOptionsTest, SavesBetasAsOnePairAndPythonOnlyOptions) {
  ASSERT_OK(SaveTrainer(Saved(), "c"));
  const std::string g = "optim.param_groups.layers.0.weight.";
  // A tuple of two floats, as rocksdcp's Python planner saves it.
  EXPECT_TRUE(BitEqual(ReadTensor("c", g + "betas"),
                       ::torch::tensor({0.8, 0.95}, ::torch::kFloat64)));
  EXPECT_FALSE(Fqns("c").count(g + "betas.0"));
  EXPECT_FALSE(Fqns("c").count(g + "betas.1"));
  // What LibTorch's Adam does: it never maximizes, captures or
  // differentiates, and has one implementation (Python's None: its pick).
  for (const char* f : {"maximize", "capturable", "differentiable"}) {
    EXPECT_TRUE(BitEqual(ReadTensor("c", g + f),
                         ::torch::scalar_tensor(false, ::torch::kBool)))
        << f;
  }
  for (const char* f : {"foreach", "fused"}) {
    EXPECT_EQ(ReadBytes("c", g + f), "rocksdcp-json:null") << f;
  }
}

TEST_F(TorchPythonOptionsTest, LoadsTheBetasPairsEarlierRocksdcpSaved) {
  // As rocksdcp saved Adam before: betas.0 and betas.1, no Python options.
  ASSERT_OK(SaveEdited(Saved(), "legacy", [this](StateDict& d) {
    for (const std::string& p : GroupPrefixes(d)) {
      for (const char* f : {"betas", "maximize", "foreach", "capturable",
                            "differentiable", "fused"}) {
        ASSERT_EQ(d.erase(p + f), 1u) << p << f;
      }
      d[p + "betas.0"] = Keep(::torch::scalar_tensor(0.8, ::torch::kFloat64));
      d[p + "betas.1"] = Keep(::torch::scalar_tensor(0.95, ::torch::kFloat64));
    }
  }));
  ASSERT_OK(LoadTrainer(Fresh(), "legacy"));
  EXPECT_EQ(FreshOptions().betas(), std::make_tuple(0.8, 0.95));
  EXPECT_EQ(FreshOptions().lr(), 0.01);
  EXPECT_TRUE(SameTrainer(Saved(), Fresh()));
  // Saved again, it has today's layout.
  ASSERT_OK(SaveTrainer(Fresh(), "again"));
  EXPECT_TRUE(Fqns("again").count("optim.param_groups.bn.weight.betas"));
  EXPECT_FALSE(Fqns("again").count("optim.param_groups.bn.weight.betas.0"));
}

TEST_F(TorchPythonOptionsTest, BetasTwiceOrHalfALegacyPairIsRefused) {
  const std::string g = "optim.param_groups.bn.weight.";
  ASSERT_OK(SaveEdited(Saved(), "twice", [this](StateDict& d) {
    SetAll(d, "betas.0", Keep(::torch::scalar_tensor(0.8, ::torch::kFloat64)));
  }));
  EXPECT_THAT(LoadTrainer(Fresh(), "twice"),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("unexpected '" + g +
                                 "betas.0' (the "
                                 "checkpoint holds betas as '" +
                                 g + "betas' too)")));
  ASSERT_OK(SaveEdited(Saved(), "half", [this](StateDict& d) {
    for (const std::string& p : GroupPrefixes(d)) d.erase(p + "betas");
    SetAll(d, "betas.0", Keep(::torch::scalar_tensor(0.8, ::torch::kFloat64)));
  }));
  EXPECT_THAT(LoadTrainer(Fresh(), "half"),
              StatusIs(StatusCode::kNotFound,
                       HasSubstr("missing '" + g + "betas.1' (float64 [], " +
                                 "as '" + g + "betas.0')")));
  EXPECT_TRUE(FreshUnchanged());
}

TEST_F(TorchPythonOptionsTest, TakesEveryEncodingPythonGivesItsValues) {
  ASSERT_OK(SaveEdited(Saved(), "py", [this](StateDict& d) {
    // Python's Adam defaults weight_decay to the int 0: an int64.
    SetAll(d, "weight_decay", Keep(::torch::scalar_tensor(0, ::torch::kInt64)));
    // An lr that is a tensor, float32.
    SetAll(d, "lr", Keep(::torch::scalar_tensor(0.25, ::torch::kFloat32)));
    SetAll(d, "betas", Keep(::torch::tensor({0.5f, 0.75f}, ::torch::kFloat32)));
    // foreach and fused pick an implementation: True, False or None.
    SetAll(d, "foreach", Keep(::torch::scalar_tensor(true, ::torch::kBool)));
    SetAll(d, "fused", std::string("rocksdcp-json:false"));
    SetAll(d, "maximize", std::string("rocksdcp-json:false"));
    SetAll(d, "capturable",
           Keep(::torch::scalar_tensor(false, ::torch::kBool)));
  }));
  FreshOptions().weight_decay(0.125);
  ASSERT_OK(LoadTrainer(Fresh(), "py"));
  EXPECT_EQ(FreshOptions().lr(), 0.25);
  EXPECT_EQ(FreshOptions().weight_decay(), 0.0);
  EXPECT_EQ(FreshOptions().betas(), std::make_tuple(0.5, 0.75));
  EXPECT_EQ(fresh_adam_.state().size(), adam_.state().size());
}

TEST_F(TorchPythonOptionsTest, RefusesWhatLibTorchsOptimizersCantDo) {
  ASSERT_OK(SaveEdited(Saved(), "py", [this](StateDict& d) {
    SetAll(d, "maximize", Keep(::torch::scalar_tensor(true, ::torch::kBool)));
    SetAll(d, "capturable", std::string("rocksdcp-json:true"));
    d["optim.param_groups.layers.0.bias.differentiable"] =
        Keep(::torch::scalar_tensor(true, ::torch::kBool));
    d["optim.param_groups.head.bias.foreach"] =
        std::string("rocksdcp-json:\"yes\"");
  }));
  const Status s = LoadTrainer(Fresh(), "py");
  EXPECT_THAT(s, StatusIs(StatusCode::kInvalidArgument,
                          HasSubstr("nothing was loaded")));
  EXPECT_THAT(s.message(),
              HasSubstr("'optim.param_groups.bn.weight.maximize' (and 5 more "
                        "like it) is true, but LibTorch's optimizers minimize: "
                        "they have no maximize option"));
  EXPECT_THAT(s.message(),
              HasSubstr("'optim.param_groups.bn.weight.capturable' (and 5 more "
                        "like it) is true, but LibTorch's optimizers have no "
                        "capturable option"));
  EXPECT_THAT(s.message(),
              HasSubstr("'optim.param_groups.layers.0.bias.differentiable' is "
                        "true, but LibTorch's optimizers have no "
                        "differentiable option"));
  EXPECT_THAT(s.message(),
              HasSubstr("'optim.param_groups.head.bias.foreach' holds the "
                        "plain data '\"yes\"'; the Adam optimizer's foreach is "
                        "None, true or false"));
  EXPECT_TRUE(FreshUnchanged());
}

TEST_F(TorchPythonOptionsTest, RefusesPickledHyperparametersNamingThem) {
  // torch's own DefaultSavePlanner pickles every hyperparameter.
  ASSERT_OK(SaveEdited(Saved(), "pickled", [](StateDict& d) {
    for (auto& [fqn, value] : d) {
      if (fqn.rfind("optim.param_groups.", 0) == 0) value = kPickle;
    }
  }));
  EXPECT_THAT(
      LoadTrainer(Fresh(), "pickled"),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("'optim.param_groups.bn.weight.lr' (and 65 more like "
                         "it) holds bytes that are not rocksdcp's encoding of "
                         "data: a pickle, as torch's own DefaultSavePlanner "
                         "saves a hyperparameter, which C++ can't read; save "
                         "the checkpoint with "
                         "rocksdcp.torch.DefaultSavePlanner")));
  EXPECT_TRUE(FreshUnchanged());
}

}  // namespace
}  // namespace rocksdcp::testing
