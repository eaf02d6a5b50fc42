// interop_trainer: the LibTorch side of tests/python/torch2/
// test_libtorch_interop.py, which checks that a LibTorch model and
// optimizer load into torch 2.x's set_state_dict and back. A build target,
// not a ctest: the Python test runs it (ROCKSDCP_INTEROP_TRAINER).
//
//   interop_trainer save --store DIR --id ID --optimizer KIND
//                        [--steps N] [--seed S]
//   interop_trainer load --store DIR --id ID --optimizer KIND --resave ID2
//
// KIND: adam, adamw, sgd, rmsprop or adagrad. The model is InteropNet,
// fc1 (Linear 6->8), norm (LayerNorm 8), fc2 (Linear 8->3), its parameters
// named "fc1.weight", ..., as Python's module of the same attributes names
// them; the optimizer has two param groups, [fc1, norm] and [fc2].
//
// save: initial weights from SEED (default 1), an optimizer of KIND with
// the options of Configured() (not LibTorch's defaults), N steps (default
// 3) on data drawn from SEED, then rocksdcp::torch::Save as ID.
// load: a model initialized from another seed and an optimizer of KIND with
// LibTorch's default options load ID (rocksdcp::torch::Load), then save
// what they hold as ID2, for the test to compare with what it saved.
//
// Either prints, on stdout, one line of JSON: the optimizer's param groups
// as LibTorch holds them (each double as the shortest decimal that reads
// back as it), e.g. {"optimizer": "adam", "param_groups": [{"params":
// ["fc1.weight", ...], "lr": 0.01, "betas": [0.8, 0.95], ...}, ...]}.
// Exits 1 with the error on stderr if a Save or Load fails, 2 on bad usage.

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "rocksdcp/rocksdcp.h"
#include "rocksdcp/torch.h"

namespace {

struct InteropNetImpl : torch::nn::Module {
  InteropNetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(6, 8))),
        norm(register_module(
            "norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({8})))),
        fc2(register_module("fc2", torch::nn::Linear(8, 3))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return fc2(torch::relu(norm(fc1(x))));
  }
  torch::nn::Linear fc1;
  torch::nn::LayerNorm norm;
  torch::nn::Linear fc2;
};
TORCH_MODULE(InteropNet);

// The model with every parameter drawn from `seed`, so that LayerNorm's
// weight and bias are not their initial ones and 0.
InteropNet MakeNet(uint64_t seed) {
  InteropNet net;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::NoGradGuard no_grad;
  for (auto& p : net->parameters()) p.copy_(torch::randn(p.sizes(), gen));
  return net;
}

// The param groups: fc1 and norm, then fc2.
std::vector<torch::optim::OptimizerParamGroup> Groups(InteropNet& net) {
  std::vector<torch::Tensor> first = net->fc1->parameters();
  for (const auto& p : net->norm->parameters()) first.push_back(p);
  return {torch::optim::OptimizerParamGroup(first),
          torch::optim::OptimizerParamGroup(net->fc2->parameters())};
}

// An optimizer of `kind`: with `configured`, options that differ from
// LibTorch's defaults (and keep every state tensor the kind has: amsgrad,
// momentum, centered), the second param group at half the lr; else
// LibTorch's defaults (SGD has no default lr: 0.1).
std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const std::string& kind,
                                                       InteropNet& net,
                                                       bool configured) {
  namespace optim = torch::optim;
  std::unique_ptr<optim::Optimizer> o;
  if (kind == "adam") {
    o = std::make_unique<optim::Adam>(Groups(net),
                                      configured ? optim::AdamOptions(0.01)
                                                       .betas({0.8, 0.95})
                                                       .eps(1e-7)
                                                       .weight_decay(0.02)
                                                       .amsgrad(true)
                                                 : optim::AdamOptions());
  } else if (kind == "adamw") {
    o = std::make_unique<optim::AdamW>(Groups(net),
                                       configured ? optim::AdamWOptions(0.005)
                                                        .betas({0.85, 0.99})
                                                        .eps(1e-6)
                                                        .weight_decay(0.05)
                                                  : optim::AdamWOptions());
  } else if (kind == "sgd") {
    o = std::make_unique<optim::SGD>(
        Groups(net),
        configured
            ? optim::SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(
                  0.001)
            : optim::SGDOptions(0.1));
  } else if (kind == "rmsprop") {
    o = std::make_unique<optim::RMSprop>(
        Groups(net), configured ? optim::RMSpropOptions(0.01)
                                      .alpha(0.95)
                                      .eps(1e-6)
                                      .weight_decay(0.01)
                                      .momentum(0.5)
                                      .centered(true)
                                : optim::RMSpropOptions());
  } else if (kind == "adagrad") {
    o = std::make_unique<optim::Adagrad>(
        Groups(net), configured ? optim::AdagradOptions(0.1)
                                      .lr_decay(0.01)
                                      .weight_decay(0.01)
                                      .initial_accumulator_value(0.1)
                                      .eps(1e-9)
                                : optim::AdagradOptions());
  } else {
    return nullptr;
  }
  if (configured) {
    auto& second = o->param_groups()[1].options();
    second.set_lr(second.get_lr() / 2);
  }
  return o;
}

void Train(InteropNet& net, torch::optim::Optimizer& optimizer, int64_t steps,
           uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed * 7919 + 17);
  for (int64_t i = 0; i < steps; ++i) {
    torch::Tensor x = torch::randn({16, 6}, gen);
    torch::Tensor y = torch::randint(0, 3, {16}, gen);
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(net->forward(x), y).backward();
    optimizer.step();
  }
}

// ---- The param groups as JSON ----

// The shortest decimal that reads back as `v`: Python's json reads it as
// the same double.
std::string Number(double v) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}
std::string Bool(bool b) { return b ? "true" : "false"; }
std::string Betas(const std::tuple<double, double>& b) {
  return "[" + Number(std::get<0>(b)) + ", " + Number(std::get<1>(b)) + "]";
}

// The options of one param group, as "key": value pairs.
std::vector<std::pair<std::string, std::string>> Options(
    const std::string& kind, const torch::optim::OptimizerOptions& options) {
  namespace optim = torch::optim;
  if (kind == "adam" || kind == "adamw") {
    // AdamOptions and AdamWOptions have the same fields.
    auto fields = [](const auto& o) {
      return std::vector<std::pair<std::string, std::string>>{
          {"lr", Number(o.lr())},
          {"betas", Betas(o.betas())},
          {"eps", Number(o.eps())},
          {"weight_decay", Number(o.weight_decay())},
          {"amsgrad", Bool(o.amsgrad())}};
    };
    return kind == "adam"
               ? fields(static_cast<const optim::AdamOptions&>(options))
               : fields(static_cast<const optim::AdamWOptions&>(options));
  }
  if (kind == "sgd") {
    const auto& o = static_cast<const optim::SGDOptions&>(options);
    return {{"lr", Number(o.lr())},
            {"momentum", Number(o.momentum())},
            {"dampening", Number(o.dampening())},
            {"weight_decay", Number(o.weight_decay())},
            {"nesterov", Bool(o.nesterov())}};
  }
  if (kind == "rmsprop") {
    const auto& o = static_cast<const optim::RMSpropOptions&>(options);
    return {{"lr", Number(o.lr())},
            {"alpha", Number(o.alpha())},
            {"eps", Number(o.eps())},
            {"weight_decay", Number(o.weight_decay())},
            {"momentum", Number(o.momentum())},
            {"centered", Bool(o.centered())}};
  }
  const auto& o = static_cast<const optim::AdagradOptions&>(options);
  return {{"lr", Number(o.lr())},
          {"lr_decay", Number(o.lr_decay())},
          {"weight_decay", Number(o.weight_decay())},
          {"initial_accumulator_value", Number(o.initial_accumulator_value())},
          {"eps", Number(o.eps())}};
}

std::string Json(const std::string& kind, InteropNet& net,
                 const torch::optim::Optimizer& optimizer) {
  std::map<const void*, std::string> names;
  for (const auto& item : net->named_parameters()) {
    names.emplace(item.value().unsafeGetTensorImpl(), item.key());
  }
  std::string out = "{\"optimizer\": \"" + kind + "\", \"param_groups\": [";
  const char* group_sep = "";
  for (const auto& group : optimizer.param_groups()) {
    out += group_sep;
    group_sep = ", ";
    out += "{\"params\": [";
    const char* sep = "";
    for (const auto& p : group.params()) {
      out += sep + ("\"" + names.at(p.unsafeGetTensorImpl()) + "\"");
      sep = ", ";
    }
    out += "]";
    for (const auto& [key, value] : Options(kind, group.options())) {
      out += ", \"" + key + "\": " + value;
    }
    out += "}";
  }
  return out + "]}";
}

// ---- main ----

int Fail(const char* what, const rocksdcp::Status& s) {
  std::fprintf(stderr, "interop_trainer: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

int Usage() {
  std::fprintf(stderr,
               "usage: interop_trainer save --store DIR --id ID --optimizer "
               "KIND [--steps N] [--seed S]\n"
               "       interop_trainer load --store DIR --id ID --optimizer "
               "KIND --resave ID2\n"
               "KIND: adam, adamw, sgd, rmsprop, adagrad\n");
  return 2;
}

int Run(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string command = argv[1];
  std::map<std::string, std::string> flags = {{"--steps", "3"},
                                              {"--seed", "1"}};
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag != "--store" && flag != "--id" && flag != "--optimizer" &&
        flag != "--steps" && flag != "--seed" && flag != "--resave") {
      return Usage();
    }
    flags[flag] = argv[i + 1];
  }
  if (argc % 2 != 0 || !flags.count("--store") || !flags.count("--id") ||
      !flags.count("--optimizer") || (command != "save" && command != "load") ||
      (command == "load") != (flags.count("--resave") > 0)) {
    return Usage();
  }
  const std::string kind = flags["--optimizer"];
  const uint64_t seed = std::strtoull(flags["--seed"].c_str(), nullptr, 10);
  // One thread: the same arithmetic on every run.
  at::set_num_threads(1);

  const bool save = command == "save";
  InteropNet net = MakeNet(save ? seed : seed + 1000);
  std::unique_ptr<torch::optim::Optimizer> optimizer =
      MakeOptimizer(kind, net, /*configured=*/save);
  if (optimizer == nullptr) return Usage();
  const rocksdcp::torch::Trainer trainer{net.get(), optimizer.get()};

  auto store = rocksdcp::Store::Open(flags["--store"]);
  if (!store.ok()) return Fail("open", store.status());
  std::string save_as = flags["--id"];
  if (save) {
    Train(net, *optimizer, std::atoll(flags["--steps"].c_str()), seed);
  } else {
    auto reader = (*store)->NewReader();
    if (!reader.ok()) return Fail("reader", reader.status());
    rocksdcp::Status s = rocksdcp::torch::Load(
        trainer, **reader, {.checkpoint_id = flags["--id"]});
    if (!s.ok()) return Fail("load", s);
    save_as = flags["--resave"];
  }
  auto writer = (*store)->NewWriter({.overwrite = true});
  if (!writer.ok()) return Fail("writer", writer.status());
  auto saved =
      rocksdcp::torch::Save(trainer, **writer, {.checkpoint_id = save_as});
  if (!saved.ok()) return Fail("save", saved.status());
  std::printf("%s\n", Json(kind, net, *optimizer).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {  // LibTorch throws; rocksdcp does not.
    std::fprintf(stderr, "interop_trainer: %s\n", e.what());
    return 1;
  }
}
