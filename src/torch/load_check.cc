#include "torch/load_check.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <variant>

#include "torch/torch_util.h"
#include "util/text.h"

namespace rocksdcp::torch {

namespace {

using util::Quote;
using util::ShapeString;

constexpr char kMissing[] = "missing ";

std::string Describe(const Expected& e) {
  if (e.is_bytes) return "bytes";
  return std::string(DTypeName(e.dtype)) + " " + ShapeString(e.size);
}

std::string Describe(const StorageMetadata& m) {
  if (std::holds_alternative<BytesStorageMetadata>(m)) return "bytes";
  const auto& t = std::get<TensorStorageMetadata>(m);
  return std::string(DTypeName(t.properties.dtype)) + " " +
         ShapeString(t.size);
}

bool Matches(const Expected& e, const StorageMetadata& m) {
  if (std::holds_alternative<BytesStorageMetadata>(m)) return e.is_bytes;
  const auto& t = std::get<TensorStorageMetadata>(m);
  return !e.is_bytes && t.properties.dtype == e.dtype && t.size == e.size;
}

// The shortest decimal that reads back as `v`.
std::string Number(double v) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// The value of a 0-d hyperparameter or step tensor, as a double.
double ScalarOf(const ::torch::Tensor& t) {
  switch (t.scalar_type()) {
    case c10::ScalarType::Bool:
      // The raw byte: a forged checkpoint's bool may hold any byte, and
      // reading one that is not 0 or 1 as bool is undefined.
      return *static_cast<const uint8_t*>(t.data_ptr()) != 0 ? 1.0 : 0.0;
    case c10::ScalarType::Float:
      return *static_cast<const float*>(t.data_ptr());
    default:
      return *static_cast<const double*>(t.data_ptr());
  }
}

std::string ValueText(const HyperField& h, double v) {
  if (h.is_bool) return v != 0 ? "true" : "false";
  return Number(v);
}

// The names the checkpoint's param_groups hold for `param`: what tells
// which optimizer kind saved it.
std::set<std::string> GroupFields(const LoadTarget& target,
                                  const Metadata& metadata,
                                  const std::string& param) {
  const std::string prefix = GroupFqn(target.options, param, "");
  std::set<std::string> fields;
  for (auto it = metadata.state_dict_metadata.lower_bound(prefix);
       it != metadata.state_dict_metadata.end() &&
       it->first.compare(0, prefix.size(), prefix) == 0;
       ++it) {
    fields.insert(it->first.substr(prefix.size()));
  }
  return fields;
}

// The kind whose constant field `name` (a HyperField without a setter) has
// value `v`: a constant ignores the options it is read from.
std::string KindWithConstant(const char* name, double v) {
  for (const OptimizerKind& k : AllKinds()) {
    const HyperField* h = k.FindHyper(name);
    if (h != nullptr && h->set == nullptr &&
        h->get(::torch::optim::OptimizerOptions()) == v) {
      return k.name;
    }
  }
  return "another optimizer";
}

std::string Join(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// One line naming the optimizer that saved the checkpoint, when it is not
// `target`'s kind; empty when it is, or when the checkpoint has none.
std::string KindProblem(const LoadTarget& target, const Metadata& metadata) {
  for (const OptimizerParam& p : target.params) {
    const std::set<std::string> fields = GroupFields(target, metadata, p.fqn);
    if (fields.empty()) continue;
    auto is_kind = [&](const OptimizerKind& k) {
      for (const HyperField& h : k.hyper) {
        if (h.set != nullptr && fields.count(h.name) == 0) return false;
      }
      for (const std::string& f : fields) {
        if (k.FindHyper(f) == nullptr) return false;
      }
      return true;
    };
    if (is_kind(*target.kind)) return "";
    std::string saved_by = "no optimizer rocksdcp::torch knows";
    for (const OptimizerKind& k : AllKinds()) {
      if (is_kind(k)) saved_by = k.name;
    }
    return "optimizer kind: the checkpoint's param group of " + Quote(p.fqn) +
           " has " + Join(fields) + ", which is " + saved_by +
           "'s; this optimizer is " + target.kind->name;
  }
  return "";
}

}  // namespace

Result<LoadTarget> MakeLoadTarget(const Trainer& trainer,
                                  const TorchOptions& options,
                                  bool allow_partial_load) {
  LoadTarget t;
  t.trainer = trainer;
  t.options = options;
  t.allow_partial_load = allow_partial_load;
  t.module = ListModule(*trainer.module);
  for (const ModuleTensor& m : t.module) {
    const std::string fqn = ModuleFqn(options, m.name);
    if (PartOf(options, fqn) != Part::kModule) {
      return Status::InvalidArgument(
          "module tensor " + Quote(m.name) +
          " starts with the optimizer's or trainer's prefix: with "
          "model_prefix \"\", its fqn can't be told from theirs");
    }
    // A tied weight is read once, under its first name, but must be in the
    // checkpoint under each.
    ROCKSDCP_ASSIGN_OR_RETURN(TensorView view, m.first_name
                                                   ? MutableViewOf(m.tensor, fqn)
                                                   : ViewOf(m.tensor, fqn));
    t.expected[fqn] = {false, view.dtype, view.sizes, !allow_partial_load};
  }
  if (trainer.optimizer != nullptr) {
    ROCKSDCP_ASSIGN_OR_RETURN(t.kind, KindOf(*trainer.optimizer));
    ROCKSDCP_ASSIGN_OR_RETURN(
        t.params, ListOptimizer(*trainer.optimizer, *t.kind, t.module));
    for (const OptimizerParam& p : t.params) {
      ROCKSDCP_ASSIGN_OR_RETURN(DType dtype, DTypeOf(p.param.scalar_type()));
      for (const HyperField& h : t.kind->hyper) {
        t.expected[GroupFqn(options, p.fqn, h.name)] = {
            false, h.is_bool ? DType::kBool : DType::kFloat64, {},
            h.set != nullptr};
      }
      for (const StateField& f : t.kind->state) {
        t.expected[StateFqn(options, p.fqn, f.name)] = {
            false, dtype, p.param.sizes().vec(), false};
      }
      if (t.kind->step != nullptr) {
        t.expected[StateFqn(options, p.fqn, "step")] = {
            false, DType::kFloat32, {}, false};
      }
    }
  }
  if (trainer.state != nullptr) {
    t.expected[TrainerStepFqn(options)] = {false, DType::kInt64, {}, true};
    if (options.rng_state) {
      at::Generator gen = at::detail::getDefaultCPUGenerator();  // A handle.
      std::lock_guard<std::mutex> lock(gen.mutex());
      t.expected[RngStateFqn(options)] = {
          false, DType::kUInt8, {gen.get_state().numel()}, true};
    }
  }
  return t;
}

bool HasState(const LoadTarget& target, const Metadata& metadata,
              const std::string& param) {
  const auto& md = metadata.state_dict_metadata;
  for (const StateField& f : target.kind->state) {
    if (md.count(StateFqn(target.options, param, f.name))) return true;
  }
  return target.kind->step != nullptr &&
         md.count(StateFqn(target.options, param, "step"));
}

std::vector<std::string> CheckMetadata(const LoadTarget& target,
                                       const Metadata& metadata) {
  const TorchOptions& o = target.options;
  const auto& md = metadata.state_dict_metadata;
  // The optimizer's apart: when another kind saved the checkpoint, one line
  // says so instead of them.
  std::vector<std::string> problems, optimizer;
  auto report = [&](const std::string& fqn, std::string problem) {
    (PartOf(o, fqn) == Part::kOptimizer ? optimizer : problems)
        .push_back(std::move(problem));
  };
  for (const auto& [fqn, e] : target.expected) {
    auto it = md.find(fqn);
    if (it == md.end()) {
      if (e.required) report(fqn, kMissing + Quote(fqn) + " (" + Describe(e) + ")");
    } else if (!Matches(e, it->second)) {
      report(fqn, Quote(fqn) + " is " + Describe(it->second) +
                      " in the checkpoint, " + Describe(e) + " here");
    }
  }
  for (const auto& [fqn, m] : md) {
    if (target.expected.count(fqn)) continue;
    switch (PartOf(o, fqn)) {
      case Part::kModule:
        if (!target.allow_partial_load) {
          report(fqn, "unexpected " + Quote(fqn) +
                          " (the module has no such tensor)");
        }
        break;
      case Part::kOptimizer:
        if (target.kind != nullptr) {
          report(fqn, "unexpected " + Quote(fqn) + " (the " +
                          target.kind->name +
                          " optimizer has no such parameter or field)");
        }
        break;
      case Part::kTrainer:
        if (target.trainer.state == nullptr) break;
        if (fqn.rfind(ExtraPrefix(o), 0) != 0) {
          report(fqn, "unexpected " + Quote(fqn));
        } else if (!std::holds_alternative<BytesStorageMetadata>(m)) {
          report(fqn, Quote(fqn) + " is " + Describe(m) +
                          " in the checkpoint; TrainerState::extra holds "
                          "bytes");
        }
        break;
      case Part::kNone:
        break;
    }
  }
  if (target.kind == nullptr) return problems;
  // A parameter with state has all of its unconditional fields.
  for (const OptimizerParam& p : target.params) {
    const bool has = HasState(target, metadata, p.fqn);
    if (!has && !target.kind->state_from_start) continue;
    for (const StateField& f : target.kind->state) {
      const std::string fqn = StateFqn(o, p.fqn, f.name);
      if (f.exists_if == nullptr && !md.count(fqn)) {
        report(fqn, kMissing + Quote(fqn) + " (" +
                        Describe(target.expected.at(fqn)) + ")");
      }
    }
    const std::string step = StateFqn(o, p.fqn, "step");
    if (target.kind->step != nullptr && !md.count(step)) {
      report(step, kMissing + Quote(step) + " (float32 [])");
    }
  }
  if (std::string kind = KindProblem(target, metadata); !kind.empty()) {
    problems.insert(problems.begin(),
                    kind + " (so " + std::to_string(optimizer.size()) +
                        " optimizer fqns differ, not listed)");
  } else {
    problems.insert(problems.end(), optimizer.begin(), optimizer.end());
  }
  return problems;
}

double HyperValue(const LoadTarget& target, const SmallItems& small,
                  const std::string& param, const char* field) {
  return ScalarOf(small.at(GroupFqn(target.options, param, field)));
}

std::vector<std::string> CheckValues(const LoadTarget& target,
                                     const Metadata& metadata,
                                     const SmallItems& small) {
  const TorchOptions& o = target.options;
  std::vector<std::string> problems;
  if (target.kind != nullptr) {
    const auto& groups = target.trainer.optimizer->param_groups();
    // Per param group, its first parameter: the others must agree with it.
    std::map<size_t, const OptimizerParam*> first;
    std::set<std::pair<size_t, std::string>> reported;
    for (const OptimizerParam& p : target.params) {
      auto [lead, fresh] = first.emplace(p.group, &p);
      for (const HyperField& h : target.kind->hyper) {
        const std::string fqn = GroupFqn(o, p.fqn, h.name);
        if (!small.count(fqn)) continue;  // An optional field, absent.
        const double v = ScalarOf(small.at(fqn));
        if (h.set == nullptr && v != h.get(groups[p.group].options()) &&
            reported.emplace(SIZE_MAX, h.name).second) {
          problems.push_back("optimizer kind: the checkpoint's param group "
                             "of " + Quote(p.fqn) + " has " + h.name + " " +
                             ValueText(h, v) + ", which is " +
                             KindWithConstant(h.name, v) +
                             "'s; this optimizer is " + target.kind->name);
        }
        if (fresh) continue;
        const std::string lead_fqn = GroupFqn(o, lead->second->fqn, h.name);
        if (!small.count(lead_fqn)) continue;
        const double lv = ScalarOf(small.at(lead_fqn));
        if (std::memcmp(&v, &lv, sizeof v) != 0 &&
            reported.emplace(p.group, h.name).second) {
          problems.push_back(
              "param group layout: " + Quote(lead->second->fqn) + " and " +
              Quote(p.fqn) + " share param group " + std::to_string(p.group) +
              " here, but the checkpoint has " + h.name + " " +
              ValueText(h, lv) + " and " + ValueText(h, v) +
              " for them: it grouped them apart");
        }
      }
      if (!HasState(target, metadata, p.fqn)) continue;
      for (const StateField& f : target.kind->state) {
        if (f.exists_if == nullptr) continue;
        const std::string fqn = StateFqn(o, p.fqn, f.name);
        const bool wanted = HyperValue(target, small, p.fqn, f.exists_if) != 0;
        const bool there = metadata.state_dict_metadata.count(fqn) > 0;
        if (wanted != there) {
          problems.push_back(std::string(wanted ? kMissing : "unexpected ") +
                             Quote(fqn) + " (the checkpoint's " +
                             f.exists_if + " is " +
                             (wanted ? "set" : "not set") + ")");
        }
      }
      const std::string step_fqn = StateFqn(o, p.fqn, "step");
      if (auto step = small.find(step_fqn); step != small.end()) {
        const double v = ScalarOf(step->second);
        if (!(v >= 0) || v != std::floor(v)) {
          problems.push_back(Quote(step_fqn) + " is " + Number(v) +
                             "; a step count is a whole number >= 0");
        }
      }
    }
  }
  if (auto rng = small.find(RngStateFqn(o)); rng != small.end()) {
    Status s = CatchTorch(StatusCode::kInvalidArgument, "", [&] {
      at::Generator scratch = at::make_generator<at::CPUGeneratorImpl>();
      scratch.set_state(rng->second);
      return Status::OK();
    });
    if (!s.ok()) {
      problems.push_back(Quote(RngStateFqn(o)) +
                         " is not a CPU generator's state (LibTorch says" +
                         s.message() + ")");
    }
  }
  return problems;
}

Status Mismatch(const std::vector<std::string>& problems) {
  bool all_missing = true;
  std::string list;
  for (const std::string& p : problems) {
    all_missing = all_missing && p.rfind(kMissing, 0) == 0;
    list += (list.empty() ? "" : "; ") + p;
  }
  std::string message = "the checkpoint does not match the trainer (" +
                        std::to_string(problems.size()) +
                        (problems.size() == 1 ? " problem" : " problems") +
                        "; nothing was loaded): " + list;
  return all_missing ? Status::NotFound(std::move(message))
                     : Status::InvalidArgument(std::move(message));
}

}  // namespace rocksdcp::torch
