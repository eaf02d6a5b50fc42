#include "torch/optimizer_kind.h"

#include <c10/util/Type.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <cstring>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>

namespace rocksdcp::torch {

namespace {

namespace optim = ::torch::optim;

// A double option field of OPTIONS, read and set through LibTorch's
// TORCH_ARG accessors.
#define ROCKSDCP_DOUBLE_FIELD(OPTIONS, FIELD)                       \
  HyperField {                                                      \
#FIELD, HyperRole::kOption, HyperType::kFloat64,                  \
        [](const optim::OptimizerOptions& o) -> HyperNumbers {        \
          return {static_cast<const OPTIONS&>(o).FIELD()};            \
        },                                                            \
        [](optim::OptimizerOptions& o, const HyperNumbers& v) {       \
          static_cast<OPTIONS&>(o).FIELD(v.at(0));                    \
        },                                                            \
        nullptr \
  }
#define ROCKSDCP_BOOL_FIELD(OPTIONS, FIELD)                         \
  HyperField {                                                      \
#FIELD, HyperRole::kOption, HyperType::kBool,                     \
        [](const optim::OptimizerOptions& o) -> HyperNumbers {        \
          return {static_cast<const OPTIONS&>(o).FIELD() ? 1.0 : 0.0};\
        },                                                            \
        [](optim::OptimizerOptions& o, const HyperNumbers& v) {       \
          static_cast<OPTIONS&>(o).FIELD(v.at(0) != 0);               \
        },                                                            \
        nullptr \
  }
// betas, a std::tuple<double, double>: one pair, as Python's tuple.
#define ROCKSDCP_BETAS_FIELD(OPTIONS)                                        \
  HyperField {                                                               \
    "betas", HyperRole::kOption, HyperType::kFloat64Pair,                    \
        [](const optim::OptimizerOptions& o) -> HyperNumbers {               \
          const auto& b = static_cast<const OPTIONS&>(o).betas();            \
          return {std::get<0>(b), std::get<1>(b)};                           \
        },                                                                   \
        [](optim::OptimizerOptions& o, const HyperNumbers& v) {              \
          static_cast<OPTIONS&>(o).betas(std::make_tuple(v.at(0), v.at(1))); \
        },                                                                   \
        nullptr                                                              \
  }
// A tensor of a ParamState.
#define ROCKSDCP_STATE_FIELD(STATE, FIELD, EXISTS_IF)                        \
  StateField {                                                               \
#FIELD, EXISTS_IF,                                                       \
        [](optim::OptimizerParamState &                                      \
           s) -> ::torch::Tensor& { return static_cast<STATE&>(s).FIELD(); } \
  }
#define ROCKSDCP_STEP(STATE)                      \
  [](optim::OptimizerParamState& s) -> int64_t& { \
    return static_cast<STATE&>(s).step();         \
  }

template <typename Opt, typename Options, typename State>
OptimizerKind Kind(const char* name, std::vector<HyperField> hyper,
                   std::vector<StateField> state,
                   int64_t& (*step)(optim::OptimizerParamState&),
                   bool state_from_start) {
  return OptimizerKind{
      name,
      std::move(hyper),
      std::move(state),
      step,
      state_from_start,
      [](const optim::Optimizer& o) {
        return dynamic_cast<const Opt*>(&o) != nullptr;
      },
      [](const optim::OptimizerOptions& o) {
        return dynamic_cast<const Options*>(&o) != nullptr;
      },
      []() -> std::unique_ptr<optim::OptimizerParamState> {
        return std::make_unique<State>();
      },
  };
}

// decoupled_weight_decay: what tells AdamW's state from Adam's.
template <bool kDecoupled>
HyperField DecoupledWeightDecay() {
  return HyperField{"decoupled_weight_decay",
                    HyperRole::kKindMark,
                    HyperType::kBool,
                    [](const optim::OptimizerOptions&) -> HyperNumbers {
                      return {kDecoupled ? 1.0 : 0.0};
                    },
                    nullptr,
                    nullptr};
}

// The options Python's optimizers have and LibTorch's lack. Python's
// torch 2.x has them all for Adam and AdamW; SGD lacks capturable;
// RMSprop lacks fused; Adagrad lacks capturable.
HyperField PythonFalse(const char* name, const char* why) {
  return HyperField{
      name,
      HyperRole::kPythonFalse,
      HyperType::kBool,
      [](const optim::OptimizerOptions&) -> HyperNumbers { return {0.0}; },
      nullptr,
      why};
}
HyperField Maximize() {
  return PythonFalse("maximize",
                     "LibTorch's optimizers minimize: they have no maximize "
                     "option");
}
HyperField Capturable() {
  return PythonFalse("capturable",
                     "LibTorch's optimizers have no capturable option (CUDA "
                     "graph capture of the step)");
}
HyperField Differentiable() {
  return PythonFalse("differentiable",
                     "LibTorch's optimizers have no differentiable option "
                     "(autograd through the step)");
}
HyperField PythonImpl(const char* name) {
  return HyperField{
      name,   HyperRole::kPythonImpl, HyperType::kNone, nullptr, nullptr,
      nullptr};
}

std::vector<OptimizerKind> MakeKinds() {
  using optim::AdagradOptions;
  using optim::AdagradParamState;
  using optim::AdamOptions;
  using optim::AdamParamState;
  using optim::AdamWOptions;
  using optim::AdamWParamState;
  using optim::RMSpropOptions;
  using optim::RMSpropParamState;
  using optim::SGDOptions;
  using optim::SGDParamState;
  std::vector<OptimizerKind> kinds;
  kinds.push_back(Kind<optim::Adam, AdamOptions, AdamParamState>(
      "Adam",
      {ROCKSDCP_DOUBLE_FIELD(AdamOptions, lr),
       ROCKSDCP_BETAS_FIELD(AdamOptions),
       ROCKSDCP_DOUBLE_FIELD(AdamOptions, eps),
       ROCKSDCP_DOUBLE_FIELD(AdamOptions, weight_decay),
       ROCKSDCP_BOOL_FIELD(AdamOptions, amsgrad), Maximize(),
       PythonImpl("foreach"), Capturable(), Differentiable(),
       PythonImpl("fused"), DecoupledWeightDecay<false>()},
      {ROCKSDCP_STATE_FIELD(AdamParamState, exp_avg, nullptr),
       ROCKSDCP_STATE_FIELD(AdamParamState, exp_avg_sq, nullptr),
       ROCKSDCP_STATE_FIELD(AdamParamState, max_exp_avg_sq, "amsgrad")},
      ROCKSDCP_STEP(AdamParamState), false));
  kinds.push_back(Kind<optim::AdamW, AdamWOptions, AdamWParamState>(
      "AdamW",
      {ROCKSDCP_DOUBLE_FIELD(AdamWOptions, lr),
       ROCKSDCP_BETAS_FIELD(AdamWOptions),
       ROCKSDCP_DOUBLE_FIELD(AdamWOptions, eps),
       ROCKSDCP_DOUBLE_FIELD(AdamWOptions, weight_decay),
       ROCKSDCP_BOOL_FIELD(AdamWOptions, amsgrad), Maximize(),
       PythonImpl("foreach"), Capturable(), Differentiable(),
       PythonImpl("fused"), DecoupledWeightDecay<true>()},
      {ROCKSDCP_STATE_FIELD(AdamWParamState, exp_avg, nullptr),
       ROCKSDCP_STATE_FIELD(AdamWParamState, exp_avg_sq, nullptr),
       ROCKSDCP_STATE_FIELD(AdamWParamState, max_exp_avg_sq, "amsgrad")},
      ROCKSDCP_STEP(AdamWParamState), false));
  kinds.push_back(Kind<optim::SGD, SGDOptions, SGDParamState>(
      "SGD",
      {ROCKSDCP_DOUBLE_FIELD(SGDOptions, lr),
       ROCKSDCP_DOUBLE_FIELD(SGDOptions, momentum),
       ROCKSDCP_DOUBLE_FIELD(SGDOptions, dampening),
       ROCKSDCP_DOUBLE_FIELD(SGDOptions, weight_decay),
       ROCKSDCP_BOOL_FIELD(SGDOptions, nesterov), Maximize(),
       PythonImpl("foreach"), Differentiable(), PythonImpl("fused")},
      // SGD keeps state only with momentum, and then only the buffer.
      {ROCKSDCP_STATE_FIELD(SGDParamState, momentum_buffer, nullptr)}, nullptr,
      false));
  kinds.push_back(Kind<optim::RMSprop, RMSpropOptions, RMSpropParamState>(
      "RMSprop",
      {ROCKSDCP_DOUBLE_FIELD(RMSpropOptions, lr),
       ROCKSDCP_DOUBLE_FIELD(RMSpropOptions, alpha),
       ROCKSDCP_DOUBLE_FIELD(RMSpropOptions, eps),
       ROCKSDCP_DOUBLE_FIELD(RMSpropOptions, weight_decay),
       ROCKSDCP_DOUBLE_FIELD(RMSpropOptions, momentum),
       ROCKSDCP_BOOL_FIELD(RMSpropOptions, centered), Capturable(),
       PythonImpl("foreach"), Maximize(), Differentiable()},
      {ROCKSDCP_STATE_FIELD(RMSpropParamState, square_avg, nullptr),
       ROCKSDCP_STATE_FIELD(RMSpropParamState, momentum_buffer, "momentum"),
       ROCKSDCP_STATE_FIELD(RMSpropParamState, grad_avg, "centered")},
      ROCKSDCP_STEP(RMSpropParamState), false));
  kinds.push_back(Kind<optim::Adagrad, AdagradOptions, AdagradParamState>(
      "Adagrad",
      {ROCKSDCP_DOUBLE_FIELD(AdagradOptions, lr),
       ROCKSDCP_DOUBLE_FIELD(AdagradOptions, lr_decay),
       ROCKSDCP_DOUBLE_FIELD(AdagradOptions, weight_decay),
       ROCKSDCP_DOUBLE_FIELD(AdagradOptions, initial_accumulator_value),
       ROCKSDCP_DOUBLE_FIELD(AdagradOptions, eps), PythonImpl("foreach"),
       Maximize(), Differentiable(), PythonImpl("fused")},
      {ROCKSDCP_STATE_FIELD(AdagradParamState, sum, nullptr)},
      ROCKSDCP_STEP(AdagradParamState), true));
  return kinds;
}

#undef ROCKSDCP_DOUBLE_FIELD
#undef ROCKSDCP_BOOL_FIELD
#undef ROCKSDCP_BETAS_FIELD
#undef ROCKSDCP_STATE_FIELD
#undef ROCKSDCP_STEP

}  // namespace

const HyperField* OptimizerKind::FindHyper(const std::string& field) const {
  for (const HyperField& h : hyper) {
    if (field == h.name) return &h;
  }
  return nullptr;
}

const HyperField* OptimizerKind::FindSaved(const std::string& field) const {
  if (const HyperField* h = FindHyper(field)) return h;
  for (const HyperField& h : hyper) {
    if (h.type != HyperType::kFloat64Pair) continue;
    for (size_t i = 0; i < h.Count(); ++i) {
      if (field == h.LegacyElement(i)) return &h;
    }
  }
  return nullptr;
}

const std::vector<OptimizerKind>& AllKinds() {
  static const std::vector<OptimizerKind>* const kinds =
      new std::vector<OptimizerKind>(MakeKinds());
  return *kinds;
}

Result<const OptimizerKind*> KindOf(const optim::Optimizer& optimizer) {
  for (const OptimizerKind& kind : AllKinds()) {
    if (kind.is(optimizer)) return &kind;
  }
  return Status::NotSupported(
      "optimizer " + c10::demangle(typeid(optimizer).name()) +
      " is not one rocksdcp::torch saves: Adam, AdamW, SGD, RMSprop and "
      "Adagrad are");
}

namespace {

// What StateKeyOf returns, for either kind of key. A template, so that only
// the branch of the key this LibTorch has is compiled.
template <typename Key>
Key KeyOf(void* impl) {
  if constexpr (std::is_same_v<Key, std::string>) {
    // As LibTorch 1.13's optimizers print it (c10::guts::to_string, which
    // LibTorch 2.x removed, prints a pointer through an ostream).
    std::ostringstream out;
    out << impl;
    return out.str();
  } else {
    static_assert(std::is_same_v<Key, void*>,
                  "Optimizer::state() has a key rocksdcp::torch does not know");
    return impl;
  }
}

}  // namespace

StateKey StateKeyOf(const ::torch::Tensor& param) {
  return KeyOf<StateKey>(param.unsafeGetTensorImpl());
}

}  // namespace rocksdcp::torch
