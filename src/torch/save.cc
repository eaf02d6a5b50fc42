// MakeStateDict and Save: a Trainer as a StateDict of views, named as
// include/rocksdcp/torch.h says.

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rocksdcp/torch.h"
#include "torch/optimizer_kind.h"
#include "torch/torch_util.h"
#include "torch/trainer_parts.h"
#include "util/text.h"

namespace rocksdcp::torch {

namespace {

// float32 holds every whole number up to 2^24 exactly, and no more.
constexpr int64_t kMaxExactFloat32 = int64_t{1} << 24;

// A StateDict of views, and the small tensors it views that no module or
// optimizer holds.
struct DictBuilder {
  std::vector<::torch::Tensor> owned;
  StateDict dict;

  // A view of `t`, which this dict keeps alive.
  Result<TensorView> Own(::torch::Tensor t, const std::string& fqn) {
    ROCKSDCP_ASSIGN_OR_RETURN(TensorView view, ViewOf(t, fqn));
    owned.push_back(std::move(t));
    return view;
  }
  Status Add(const std::string& fqn, StateValue value) {
    if (!dict.emplace(fqn, std::move(value)).second) {
      return Status::InvalidArgument(
          "two parts of the trainer are both named " + util::Quote(fqn));
    }
    return Status::OK();
  }
};

}  // namespace

struct TorchStateDict::Rep {
  DictBuilder built;
};

TorchStateDict::TorchStateDict(std::unique_ptr<Rep> rep)
    : rep_(std::move(rep)) {}
TorchStateDict::TorchStateDict(TorchStateDict&&) noexcept = default;
TorchStateDict& TorchStateDict::operator=(TorchStateDict&&) noexcept = default;
TorchStateDict::~TorchStateDict() = default;
const StateDict& TorchStateDict::dict() const { return rep_->built.dict; }

namespace {

Status AddModule(const ::torch::nn::Module& module, const TorchOptions& o,
                 DictBuilder* rep) {
  for (const ModuleTensor& m : ListModule(module)) {
    const std::string fqn = ModuleFqn(o, m.name);
    if (PartOf(o, fqn) != Part::kModule) {
      return Status::InvalidArgument(
          "module tensor " + util::Quote(m.name) +
          " starts with the optimizer's or trainer's prefix: with "
          "model_prefix \"\", its fqn can't be told from theirs");
    }
    ROCKSDCP_ASSIGN_OR_RETURN(TensorView view, ViewOf(m.tensor, fqn));
    ROCKSDCP_RETURN_IF_ERROR(rep->Add(fqn, view));
  }
  return Status::OK();
}

Status AddOptimizer(const ::torch::nn::Module& module,
                    const ::torch::optim::Optimizer& optimizer,
                    const TorchOptions& o, DictBuilder* rep) {
  ROCKSDCP_ASSIGN_OR_RETURN(const OptimizerKind* kind, KindOf(optimizer));
  ROCKSDCP_ASSIGN_OR_RETURN(
      std::vector<OptimizerParam> params,
      ListOptimizer(optimizer, *kind, ListModule(module)));

  // Each group's hyperparameters, one value per field (a 0-d tensor, a
  // pair's 1-d tensor, or None's bytes), under the fqn of every parameter
  // of the group.
  const auto& groups = optimizer.param_groups();
  std::vector<std::vector<StateValue>> hyper(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const HyperField& h : kind->hyper) {
      if (h.type == HyperType::kNone) {
        hyper[g].emplace_back(std::string(kPlainNone));
        continue;
      }
      const HyperNumbers v = h.get(groups[g].options());
      ::torch::Tensor t;
      switch (h.type) {
        case HyperType::kBool:
          t = ::torch::scalar_tensor(v.at(0) != 0, ::torch::kBool);
          break;
        case HyperType::kFloat64Pair:
          t = ::torch::tensor(v, ::torch::kFloat64);
          break;
        default:
          t = ::torch::scalar_tensor(v.at(0), ::torch::kFloat64);
          break;
      }
      ROCKSDCP_ASSIGN_OR_RETURN(
          TensorView view,
          rep->Own(std::move(t), "param group " + std::to_string(g)));
      hyper[g].emplace_back(view);
    }
  }

  for (const OptimizerParam& p : params) {
    for (size_t i = 0; i < kind->hyper.size(); ++i) {
      ROCKSDCP_RETURN_IF_ERROR(
          rep->Add(GroupFqn(o, p.fqn, kind->hyper[i].name), hyper[p.group][i]));
    }
    auto state = optimizer.state().find(StateKeyOf(p.param));
    if (state == optimizer.state().end()) continue;  // No step taken yet.
    ::torch::optim::OptimizerParamState& s = *state->second;
    for (const StateField& f : kind->state) {
      const ::torch::Tensor& t = f.ref(s);
      if (!t.defined()) continue;
      const std::string fqn = StateFqn(o, p.fqn, f.name);
      ROCKSDCP_ASSIGN_OR_RETURN(TensorView view, ViewOf(t, fqn));
      ROCKSDCP_RETURN_IF_ERROR(rep->Add(fqn, view));
    }
    if (kind->step != nullptr) {
      const int64_t step = kind->step(s);
      const std::string fqn = StateFqn(o, p.fqn, "step");
      if (step < 0 || step > kMaxExactFloat32) {
        return Status::InvalidArgument(
            "optimizer step " + std::to_string(step) + " of parameter " +
            util::Quote(p.fqn) + " can't be saved as " + util::Quote(fqn) +
            ": Python keeps it as float32, which holds whole numbers up to "
            "2^24 exactly");
      }
      ROCKSDCP_ASSIGN_OR_RETURN(
          TensorView view,
          rep->Own(::torch::scalar_tensor(static_cast<float>(step),
                                          ::torch::kFloat32),
                   fqn));
      ROCKSDCP_RETURN_IF_ERROR(rep->Add(fqn, view));
    }
  }
  return Status::OK();
}

Status AddTrainer(const TrainerState& state, const TorchOptions& o,
                  DictBuilder* rep) {
  const std::string step_fqn = TrainerStepFqn(o);
  ROCKSDCP_ASSIGN_OR_RETURN(
      TensorView step,
      rep->Own(::torch::scalar_tensor(state.step, ::torch::kInt64), step_fqn));
  ROCKSDCP_RETURN_IF_ERROR(rep->Add(step_fqn, step));
  if (o.rng_state) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();  // A handle.
    ::torch::Tensor rng;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      rng = gen.get_state();
    }
    const std::string fqn = RngStateFqn(o);
    ROCKSDCP_ASSIGN_OR_RETURN(TensorView view, rep->Own(std::move(rng), fqn));
    ROCKSDCP_RETURN_IF_ERROR(rep->Add(fqn, view));
  }
  for (const auto& [key, bytes] : state.extra) {
    ROCKSDCP_RETURN_IF_ERROR(rep->Add(ExtraPrefix(o) + key, bytes));
  }
  return Status::OK();
}

}  // namespace

Result<TorchStateDict> MakeStateDict(const Trainer& trainer,
                                     const TorchOptions& options) {
  if (trainer.module == nullptr) {
    return Status::InvalidArgument("rocksdcp::torch: Trainer::module is null");
  }
  ROCKSDCP_RETURN_IF_ERROR(CheckPrefixes(options));
  auto rep = std::make_unique<TorchStateDict::Rep>();
  ROCKSDCP_RETURN_IF_ERROR(CatchTorch(
      StatusCode::kInvalidArgument, "rocksdcp::torch: state dict", [&] {
        DictBuilder* built = &rep->built;
        ROCKSDCP_RETURN_IF_ERROR(AddModule(*trainer.module, options, built));
        if (trainer.optimizer != nullptr) {
          ROCKSDCP_RETURN_IF_ERROR(AddOptimizer(
              *trainer.module, *trainer.optimizer, options, built));
        }
        if (trainer.state != nullptr) {
          ROCKSDCP_RETURN_IF_ERROR(AddTrainer(*trainer.state, options, built));
        }
        return Status::OK();
      }));
  return TorchStateDict(std::move(rep));
}

Result<Metadata> Save(const Trainer& trainer, StorageWriter& writer,
                      const SaveOptions& save_options,
                      const TorchOptions& options) {
  Result<TorchStateDict> state = MakeStateDict(trainer, options);
  if (!state.ok()) {
    return state.status().WithContext("save of checkpoint " +
                                      util::Quote(save_options.checkpoint_id));
  }
  return rocksdcp::Save(state->dict(), writer, save_options);
}

}  // namespace rocksdcp::torch
