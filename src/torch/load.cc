// Load: a checkpoint into a Trainer, in two phases, so that every mismatch
// is found before a byte of the module or optimizer is written.
//
//   1. A Load() of the small items: hyperparameters, steps, the trainer's
//      step, RNG state and extras, into tensors of its own. Its planner
//      checks the metadata against the trainer first (load_check.h).
//   2. A Load() of the module's and optimizer's tensors, in place. Its
//      planner first checks that the checkpoint is the same save as in
//      phase 1, and the small items' values; then it creates the optimizer
//      state the checkpoint has and the optimizer lacks.
//   3. Only when both succeeded: the steps, hyperparameters, RNG state and
//      trainer state are applied, and state the checkpoint lacks removed.
//
// Each check runs inside a planner's SetUpPlanner, within Load()'s
// collective protocol, so that with several ranks an error on one reaches
// all of them before any reads.

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "rocksdcp/checkpoint.h"
#include "rocksdcp/planner.h"
#include "rocksdcp/torch.h"
#include "torch/load_check.h"
#include "torch/torch_util.h"
#include "util/text.h"

namespace rocksdcp::torch {

namespace {

namespace optim = ::torch::optim;

// A DefaultLoadPlanner that first runs `hook` with the state dict and the
// metadata: to check the metadata and fill the dict from it.
class HookPlanner final : public LoadPlannerWrapper {
 public:
  using Hook = std::function<Status(StateDict*, const Metadata&)>;
  explicit HookPlanner(Hook hook)
      : LoadPlannerWrapper(&inner_), hook_(std::move(hook)) {}

  Status SetUpPlanner(StateDict* state_dict, const Metadata* metadata,
                      bool is_coordinator) override {
    ROCKSDCP_RETURN_IF_ERROR(
        CatchTorch(StatusCode::kInvalidArgument, "rocksdcp::torch",
                   [&] { return hook_(state_dict, *metadata); }));
    return LoadPlannerWrapper::SetUpPlanner(state_dict, metadata,
                                            is_coordinator);
  }

 private:
  Hook hook_;
  DefaultLoadPlanner inner_;
};

// Adds a fresh tensor (kept in small->tensors) or a byte value for each
// small item of the checkpoint to `dict`, the one phase 1 loads into.
Status AddSmallItems(const LoadTarget& t, const Metadata& metadata,
                     SmallItems* small, StateDict* dict) {
  const auto& md = metadata.state_dict_metadata;
  auto add = [&](const std::string& fqn) -> Status {
    auto saved = md.find(fqn);
    if (saved == md.end()) return Status::OK();
    const Expected& e = t.expected.at(fqn);
    DType dtype = e.dtype;
    std::vector<int64_t> size = e.size;
    if (e.hyper != nullptr) {
      // A hyperparameter, in whichever encoding CheckMetadata allowed.
      if (std::holds_alternative<BytesStorageMetadata>(saved->second)) {
        (*dict)[fqn] = std::string();
        return Status::OK();
      }
      const auto& tensor = std::get<TensorStorageMetadata>(saved->second);
      dtype = tensor.properties.dtype;
      size = tensor.size;
    }
    ROCKSDCP_ASSIGN_OR_RETURN(c10::ScalarType type, ScalarTypeOf(dtype));
    ::torch::Tensor tensor = ::torch::empty(size, type);
    ROCKSDCP_ASSIGN_OR_RETURN(TensorView view, MutableViewOf(tensor, fqn));
    small->tensors[fqn] = std::move(tensor);
    (*dict)[fqn] = view;
    return Status::OK();
  };
  const TorchOptions& o = t.options;
  for (const OptimizerParam& p : t.params) {
    for (const HyperField& h : t.kind->hyper) {
      ROCKSDCP_RETURN_IF_ERROR(add(GroupFqn(o, p.fqn, h.name)));
      for (size_t i = 0; h.type == HyperType::kFloat64Pair && i < h.Count();
           ++i) {
        ROCKSDCP_RETURN_IF_ERROR(add(GroupFqn(o, p.fqn, h.LegacyElement(i))));
      }
    }
    if (t.kind->step != nullptr) {
      ROCKSDCP_RETURN_IF_ERROR(add(StateFqn(o, p.fqn, "step")));
    }
  }
  if (t.trainer.state != nullptr) {
    ROCKSDCP_RETURN_IF_ERROR(add(TrainerStepFqn(o)));
    if (o.rng_state) ROCKSDCP_RETURN_IF_ERROR(add(RngStateFqn(o)));
    const std::string extra = ExtraPrefix(o);
    for (auto it = md.lower_bound(extra);
         it != md.end() && it->first.compare(0, extra.size(), extra) == 0;
         ++it) {
      (*dict)[it->first] = std::string();
    }
  }
  return Status::OK();
}

// The optimizer state phase 2 loads into, and how to take back what it
// created if the load fails.
class StateChanges {
 public:
  explicit StateChanges(optim::Optimizer* optimizer) : optimizer_(optimizer) {}

  // The state of `param`, created when it has none.
  optim::OptimizerParamState& StateOf(const OptimizerKind& kind,
                                      const ::torch::Tensor& param) {
    auto& state = optimizer_->state();
    const StateKey key = StateKeyOf(param);
    auto it = state.find(key);
    if (it == state.end()) {
      it = state.emplace(key, kind.new_state()).first;
      created_.push_back(key);
    }
    return *it->second;
  }

  // Makes `slot` a tensor shaped like `param` to load into: the one there
  // if it has the right shape and dtype, else a new one (the old one kept,
  // to put back).
  const ::torch::Tensor& Slot(::torch::Tensor& slot,
                              const ::torch::Tensor& param) {
    if (!slot.defined() || slot.sizes() != param.sizes() ||
        slot.scalar_type() != param.scalar_type() || !slot.device().is_cpu()) {
      replaced_.emplace_back(&slot, slot);
      slot = ::torch::empty_like(param, ::torch::MemoryFormat::Preserve);
    }
    return slot;
  }

  // Takes back every change, most recent first.
  void Undo() {
    for (auto it = replaced_.rbegin(); it != replaced_.rend(); ++it) {
      *it->first = std::move(it->second);
    }
    for (const StateKey& key : created_) optimizer_->state().erase(key);
    replaced_.clear();
    created_.clear();
  }

 private:
  optim::Optimizer* optimizer_;
  std::vector<StateKey> created_;
  std::vector<std::pair<::torch::Tensor*, ::torch::Tensor>> replaced_;
};

// Adds views of the module's and optimizer's tensors to `dict`, creating
// the optimizer state the checkpoint has. Returns the written tensors.
Result<std::vector<::torch::Tensor>> AddTensors(const LoadTarget& t,
                                                const Metadata& metadata,
                                                StateChanges* changes,
                                                StateDict* dict) {
  const auto& md = metadata.state_dict_metadata;
  std::vector<::torch::Tensor> written;
  for (const ModuleTensor& m : t.module) {
    const std::string fqn = ModuleFqn(t.options, m.name);
    if (!m.first_name || !md.count(fqn)) continue;  // Tied, or partial.
    ROCKSDCP_ASSIGN_OR_RETURN((*dict)[fqn], MutableViewOf(m.tensor, fqn));
    written.push_back(m.tensor);
  }
  for (const OptimizerParam& p : t.params) {
    if (!HasState(t, metadata, p.fqn)) continue;
    optim::OptimizerParamState& state = changes->StateOf(*t.kind, p.param);
    for (const StateField& f : t.kind->state) {
      const std::string fqn = StateFqn(t.options, p.fqn, f.name);
      if (!md.count(fqn)) continue;
      const ::torch::Tensor& slot = changes->Slot(f.ref(state), p.param);
      ROCKSDCP_ASSIGN_OR_RETURN((*dict)[fqn], MutableViewOf(slot, fqn));
      written.push_back(slot);
    }
  }
  return written;
}

// Applies what phase 1 read, once both phases succeeded.
void Apply(const LoadTarget& t, const Metadata& metadata, SmallItems& small) {
  const TorchOptions& o = t.options;
  if (t.kind != nullptr) {
    optim::Optimizer& optimizer = *t.trainer.optimizer;
    auto& states = optimizer.state();
    std::vector<bool> group_done(optimizer.param_groups().size(), false);
    for (const OptimizerParam& p : t.params) {
      if (!group_done[p.group]) {
        group_done[p.group] = true;
        auto& options = optimizer.param_groups()[p.group].options();
        for (const HyperField& h : t.kind->hyper) {
          if (h.role != HyperRole::kOption) continue;
          // CheckValues saw that it holds a value of h's type.
          h.set(options, HyperValue(t, small, p.fqn, h).value());
        }
      }
      auto it = states.find(StateKeyOf(p.param));
      if (!HasState(t, metadata, p.fqn)) {
        if (it != states.end()) states.erase(it);
        continue;
      }
      for (const StateField& f : t.kind->state) {
        if (!metadata.state_dict_metadata.count(StateFqn(o, p.fqn, f.name))) {
          f.ref(*it->second) = ::torch::Tensor();
        }
      }
      if (t.kind->step != nullptr) {
        const ::torch::Tensor& step =
            small.tensors.at(StateFqn(o, p.fqn, "step"));
        t.kind->step(*it->second) =
            static_cast<int64_t>(*static_cast<const float*>(step.data_ptr()));
      }
    }
  }
  if (t.trainer.state != nullptr) {
    TrainerState& state = *t.trainer.state;
    const ::torch::Tensor& step = small.tensors.at(TrainerStepFqn(o));
    state.step = *static_cast<const int64_t*>(step.data_ptr());
    if (o.rng_state) {
      // A handle: setting its state sets the default generator's.
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      // CheckValues set it into a scratch generator: it can't throw here.
      gen.set_state(small.tensors.at(RngStateFqn(o)));
    }
    state.extra.clear();
    const std::string extra = ExtraPrefix(o);
    for (auto& [fqn, value] : small.dict) {
      if (fqn.rfind(extra, 0) == 0) {
        state.extra[fqn.substr(extra.size())] =
            std::move(std::get<std::string>(value));
      }
    }
  }
}

// Load's arguments are ones it can take.
Status CheckArguments(const Trainer& trainer, const LoadOptions& load_options,
                      const TorchOptions& options, const std::string& context) {
  if (trainer.module == nullptr) {
    return Status::InvalidArgument(context + ": Trainer::module is null");
  }
  if (load_options.planner != nullptr) {
    return Status::InvalidArgument(
        context +
        ": rocksdcp::torch::Load plans the load itself; leave "
        "LoadOptions::planner null");
  }
  return CheckPrefixes(options);
}

// MakeLoadTarget, with what LibTorch throws as InvalidArgument.
Result<LoadTarget> MakeTarget(const Trainer& trainer,
                              const LoadOptions& load_options,
                              const TorchOptions& options,
                              const std::string& context) {
  std::optional<LoadTarget> target;
  ROCKSDCP_RETURN_IF_ERROR(
      CatchTorch(StatusCode::kInvalidArgument, context, [&]() -> Status {
        Result<LoadTarget> made =
            MakeLoadTarget(trainer, options, load_options.allow_partial_load);
        if (!made.ok()) return made.status().WithContext(context);
        target = std::move(made).value();
        return Status::OK();
      }));
  return std::move(*target);
}

// `load_options` for one of Load's phases, which `planner` plans.
LoadOptions PhaseOptions(const LoadOptions& load_options,
                         LoadPlanner* planner) {
  LoadOptions phase = load_options;
  phase.planner = planner;
  // The target already left out what a partial load may miss.
  phase.allow_partial_load = false;
  return phase;
}

// Phase 1: checks the metadata and reads the small items into `small`;
// `save_id` is the checkpoint's save id, if it has one.
Status ReadSmallItems(const LoadTarget& target, StorageReader& reader,
                      const LoadOptions& load_options, SmallItems* small,
                      std::optional<std::string>* save_id) {
  HookPlanner check_metadata([&](StateDict* dict, const Metadata& md) {
    std::vector<std::string> problems = CheckMetadata(target, md);
    if (!problems.empty()) return Mismatch(problems);
    if (md.storage_meta) *save_id = md.storage_meta->save_id;
    return AddSmallItems(target, md, small, dict);
  });
  return rocksdcp::Load(&small->dict, reader,
                        PhaseOptions(load_options, &check_metadata));
}

}  // namespace

Status Load(const Trainer& trainer, StorageReader& reader,
            const LoadOptions& load_options, const TorchOptions& options) {
  const std::string context =
      "load of checkpoint " + util::Quote(load_options.checkpoint_id);
  ROCKSDCP_RETURN_IF_ERROR(
      CheckArguments(trainer, load_options, options, context));
  ::torch::NoGradGuard no_grad;
  ROCKSDCP_ASSIGN_OR_RETURN(
      const LoadTarget target,
      MakeTarget(trainer, load_options, options, context));

  SmallItems small;
  std::optional<std::string> save_id;
  ROCKSDCP_RETURN_IF_ERROR(
      ReadSmallItems(target, reader, load_options, &small, &save_id));

  // Phase 2: check the values and the save, read the tensors in place.
  StateChanges changes(trainer.optimizer);
  std::vector<::torch::Tensor> written;
  // The optimizer's items of the checkpoint, which Apply looks up.
  Metadata optimizer_items;
  HookPlanner check_values([&](StateDict* dict, const Metadata& md) {
    std::optional<std::string> now;
    if (md.storage_meta) now = md.storage_meta->save_id;
    if (now != save_id) {
      return Status::Aborted(
          "the checkpoint was saved again (overwritten) between the two "
          "phases of this load, so nothing was written; load it again");
    }
    std::vector<std::string> problems = CheckMetadata(target, md);
    if (problems.empty()) problems = CheckValues(target, md, small);
    if (!problems.empty()) return Mismatch(problems);
    for (const auto& [fqn, item] : md.state_dict_metadata) {
      if (PartOf(options, fqn) == Part::kOptimizer) {
        optimizer_items.state_dict_metadata.emplace(fqn, item);
      }
    }
    ROCKSDCP_ASSIGN_OR_RETURN(written, AddTensors(target, md, &changes, dict));
    return Status::OK();
  });
  StateDict dict;
  Status read =
      rocksdcp::Load(&dict, reader, PhaseOptions(load_options, &check_values));
  if (!read.ok()) {
    changes.Undo();
    return read;
  }
  return CatchTorch(StatusCode::kInternal, context, [&] {
    // In-place writes that autograd must see, as copy_() would show them.
    for (const ::torch::Tensor& t : written) {
      if (!t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
    }
    Apply(target, optimizer_items, small);
    return Status::OK();
  });
}

}  // namespace rocksdcp::torch
