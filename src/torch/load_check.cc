#include "torch/load_check.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
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
  return std::string(DTypeName(t.properties.dtype)) + " " + ShapeString(t.size);
}

// A hyperparameter's item as the checkpoint may hold it: any byte item
// (rocksdcp's plain data, or a pickle that CheckValues names), or a tensor
// in the encodings Python's planners give its value.
bool HyperMatches(const Expected& e, const TensorStorageMetadata& t) {
  if (e.is_bytes || e.dtype == DType::kBool) {
    // A bool, or Python's None-or-bool of a kPythonImpl field.
    return t.size.empty() && t.properties.dtype == DType::kBool;
  }
  // A number: a Python float (float64), int (int64), or a tensor's value.
  const DType d = t.properties.dtype;
  return t.size == e.size &&
         (d == DType::kFloat64 || d == DType::kFloat32 || d == DType::kInt64);
}

bool Matches(const Expected& e, const StorageMetadata& m) {
  if (std::holds_alternative<BytesStorageMetadata>(m)) {
    return e.is_bytes || e.hyper != nullptr;
  }
  const auto& t = std::get<TensorStorageMetadata>(m);
  if (e.hyper != nullptr) return HyperMatches(e, t);
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

// The value of a 0-d step tensor (float32, as saved), as a double.
double ScalarOf(const ::torch::Tensor& t) {
  return *static_cast<const float*>(t.data_ptr());
}

// The elements of a small hyperparameter tensor, which phase 1 read into a
// fresh (contiguous) tensor of a dtype HyperMatches allows.
HyperNumbers NumbersOf(const ::torch::Tensor& t) {
  HyperNumbers out;
  const int64_t n = t.numel();
  const void* data = t.data_ptr();
  for (int64_t i = 0; i < n; ++i) {
    switch (t.scalar_type()) {
      case c10::ScalarType::Bool:
        // The raw byte: a forged checkpoint's bool may hold any byte, and
        // reading one that is not 0 or 1 as bool is undefined.
        out.push_back(static_cast<const uint8_t*>(data)[i] != 0 ? 1.0 : 0.0);
        break;
      case c10::ScalarType::Float:
        out.push_back(static_cast<const float*>(data)[i]);
        break;
      case c10::ScalarType::Long:
        out.push_back(
            static_cast<double>(static_cast<const int64_t*>(data)[i]));
        break;
      default:
        out.push_back(static_cast<const double*>(data)[i]);
        break;
    }
  }
  return out;
}

// A hyperparameter as the checkpoint holds it.
struct HyperRead {
  enum class Kind {
    kAbsent,
    kNumbers,  // A tensor's elements, or a JSON true or false.
    kNone,     // rocksdcp-json:null, Python's None.
    kPickle,   // Bytes not of rocksdcp's encoding: torch's planner pickles.
    kOther,    // Other plain data, which no hyperparameter LibTorch has is.
  };
  Kind kind = Kind::kAbsent;
  HyperNumbers numbers;
  bool is_bool = false;  // kNumbers of a bool tensor or a JSON bool.
  std::string fqn;       // Where it was read.
  std::string text;      // kOther: the JSON, for messages.
};

// What `small` holds under `fqn`.
HyperRead ReadItem(const SmallItems& small, const std::string& fqn) {
  HyperRead r;
  r.fqn = fqn;
  if (auto t = small.tensors.find(fqn); t != small.tensors.end()) {
    r.kind = HyperRead::Kind::kNumbers;
    r.is_bool = t->second.scalar_type() == c10::ScalarType::Bool;
    r.numbers = NumbersOf(t->second);
    return r;
  }
  auto item = small.dict.find(fqn);
  if (item == small.dict.end()) return r;
  const auto* bytes = std::get_if<std::string>(&item->second);
  if (bytes == nullptr) return r;
  const std::string_view prefix(kPlainPrefix);
  if (bytes->compare(0, prefix.size(), prefix) != 0) {
    r.kind = HyperRead::Kind::kPickle;
    return r;
  }
  const std::string json = bytes->substr(prefix.size());
  if (json == "null") {
    r.kind = HyperRead::Kind::kNone;
  } else if (json == "true" || json == "false") {
    r.kind = HyperRead::Kind::kNumbers;
    r.is_bool = true;
    r.numbers = {json == "true" ? 1.0 : 0.0};
  } else {
    r.kind = HyperRead::Kind::kOther;
    r.text = "the plain data " +
             Quote(json.size() > 40 ? json.substr(0, 40) + "..." : json);
  }
  return r;
}

// Hyperparameter `h` of `param`: its item, or a pair's legacy elements.
HyperRead ReadHyper(const LoadTarget& target, const SmallItems& small,
                    const std::string& param, const HyperField& h) {
  HyperRead whole = ReadItem(small, GroupFqn(target.options, param, h.name));
  if (whole.kind != HyperRead::Kind::kAbsent ||
      h.type != HyperType::kFloat64Pair) {
    return whole;
  }
  HyperRead pair;
  pair.kind = HyperRead::Kind::kNumbers;
  for (size_t i = 0; i < h.Count(); ++i) {
    HyperRead e =
        ReadItem(small, GroupFqn(target.options, param, h.LegacyElement(i)));
    if (e.kind != HyperRead::Kind::kNumbers || e.numbers.size() != 1) {
      return e;
    }
    if (i == 0) pair.fqn = e.fqn;
    pair.numbers.push_back(e.numbers[0]);
    pair.is_bool = pair.is_bool || e.is_bool;
  }
  return pair;
}

// True if `r` is a value of `h`'s type.
bool Fits(const HyperField& h, const HyperRead& r) {
  if (h.type == HyperType::kNone) {  // None, True or False.
    return r.kind == HyperRead::Kind::kNone ||
           (r.kind == HyperRead::Kind::kNumbers && r.is_bool &&
            r.numbers.size() == 1);
  }
  return r.kind == HyperRead::Kind::kNumbers && r.numbers.size() == h.Count() &&
         r.is_bool == (h.type == HyperType::kBool);
}

std::string ValueText(const HyperField& h, const HyperNumbers& v) {
  if (h.type == HyperType::kBool) return v.at(0) != 0 ? "true" : "false";
  if (v.size() == 1) return Number(v[0]);
  std::string out;
  for (double x : v) out += (out.empty() ? "(" : ", ") + Number(x);
  return out + ")";
}

// What `r` holds, for messages.
std::string Holds(const HyperRead& r) {
  switch (r.kind) {
    case HyperRead::Kind::kNumbers: {
      if (r.is_bool && r.numbers.size() == 1) {
        return r.numbers[0] != 0 ? "true" : "false";
      }
      std::string out;
      for (double x : r.numbers) out += (out.empty() ? "" : ", ") + Number(x);
      return r.numbers.size() == 1 ? out : "(" + out + ")";
    }
    case HyperRead::Kind::kNone:
      return "None";
    default:
      return r.text;
  }
}

// What `h` must hold, for messages.
std::string Wants(const HyperField& h) {
  switch (h.type) {
    case HyperType::kFloat64:
      return "a number";
    case HyperType::kBool:
      return "a bool";
    case HyperType::kFloat64Pair:
      return "two numbers";
    case HyperType::kNone:
      return "None, true or false";
  }
  return "";
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

// The kind whose kind mark `name` has value `v`: a mark ignores the
// options it is read from.
std::string KindWithMark(const char* name, const HyperNumbers& v) {
  for (const OptimizerKind& k : AllKinds()) {
    const HyperField* h = k.FindHyper(name);
    if (h != nullptr && h->role == HyperRole::kKindMark &&
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
        if (h.role != HyperRole::kOption || fields.count(h.name)) continue;
        bool legacy = false;
        for (size_t i = 0; h.type == HyperType::kFloat64Pair && i < h.Count();
             ++i) {
          legacy = legacy || fields.count(h.LegacyElement(i)) > 0;
        }
        if (!legacy) return false;
      }
      for (const std::string& f : fields) {
        if (k.FindSaved(f) == nullptr) return false;
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
    ROCKSDCP_ASSIGN_OR_RETURN(
        TensorView view,
        m.first_name ? MutableViewOf(m.tensor, fqn) : ViewOf(m.tensor, fqn));
    t.expected[fqn] = {false, view.dtype, view.sizes, !allow_partial_load};
  }
  if (trainer.optimizer != nullptr) {
    ROCKSDCP_ASSIGN_OR_RETURN(t.kind, KindOf(*trainer.optimizer));
    ROCKSDCP_ASSIGN_OR_RETURN(
        t.params, ListOptimizer(*trainer.optimizer, *t.kind, t.module));
    for (const OptimizerParam& p : t.params) {
      ROCKSDCP_ASSIGN_OR_RETURN(DType dtype, DTypeOf(p.param.scalar_type()));
      for (const HyperField& h : t.kind->hyper) {
        Expected e{.is_bytes = h.type == HyperType::kNone,
                   .dtype = h.type == HyperType::kFloat64 ||
                                    h.type == HyperType::kFloat64Pair
                                ? DType::kFloat64
                                : DType::kBool,
                   .size = {},
                   .required = false,
                   .hyper = &h};
        if (h.type == HyperType::kFloat64Pair) {
          e.size = {static_cast<int64_t>(h.Count())};
          for (size_t i = 0; i < h.Count(); ++i) {
            t.expected[GroupFqn(options, p.fqn, h.LegacyElement(i))] = {
                .is_bytes = false,
                .dtype = DType::kFloat64,
                .size = {},
                .required = false,
                .hyper = &h};
          }
        }
        t.expected[GroupFqn(options, p.fqn, h.name)] = std::move(e);
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

namespace {

// CheckMetadata's problems, the optimizer's apart: when another kind saved
// the checkpoint, one line says so instead of them.
class MetadataProblems {
 public:
  explicit MetadataProblems(const TorchOptions& options) : options_(options) {}

  void Report(const std::string& fqn, std::string problem) {
    (PartOf(options_, fqn) == Part::kOptimizer ? optimizer_ : problems_)
        .push_back(std::move(problem));
  }

  // The problems outside the optimizer.
  std::vector<std::string> TakeWithoutOptimizer() {
    return std::move(problems_);
  }

  // Every problem, or, when `kind_problem` says another kind saved the
  // checkpoint, it first in place of the optimizer's.
  std::vector<std::string> Take(const std::string& kind_problem) {
    if (!kind_problem.empty()) {
      problems_.insert(problems_.begin(),
                       kind_problem + " (so " +
                           std::to_string(optimizer_.size()) +
                           " optimizer fqns differ, not listed)");
    } else {
      problems_.insert(problems_.end(), optimizer_.begin(), optimizer_.end());
    }
    return std::move(problems_);
  }

 private:
  const TorchOptions& options_;
  std::vector<std::string> problems_, optimizer_;
};

// Each item the target expects is in the checkpoint, as it expects it.
void CheckExpectedItems(const LoadTarget& target, const Metadata& metadata,
                        MetadataProblems* found) {
  const auto& md = metadata.state_dict_metadata;
  for (const auto& [fqn, e] : target.expected) {
    auto it = md.find(fqn);
    if (it == md.end()) {
      if (e.required)
        found->Report(fqn, kMissing + Quote(fqn) + " (" + Describe(e) + ")");
    } else if (!Matches(e, it->second)) {
      found->Report(fqn, Quote(fqn) + " is " + Describe(it->second) +
                             " in the checkpoint, " + Describe(e) + " here");
    }
  }
}

// The checkpoint's items the target doesn't expect, in the parts it loads.
void CheckUnexpectedItems(const LoadTarget& target, const Metadata& metadata,
                          MetadataProblems* found) {
  const TorchOptions& o = target.options;
  for (const auto& [fqn, m] : metadata.state_dict_metadata) {
    if (target.expected.count(fqn)) continue;
    switch (PartOf(o, fqn)) {
      case Part::kModule:
        if (!target.allow_partial_load) {
          found->Report(fqn, "unexpected " + Quote(fqn) +
                                 " (the module has no such tensor)");
        }
        break;
      case Part::kOptimizer:
        if (target.kind != nullptr) {
          found->Report(fqn, "unexpected " + Quote(fqn) + " (the " +
                                 target.kind->name +
                                 " optimizer has no such parameter or field)");
        }
        break;
      case Part::kTrainer:
        if (target.trainer.state == nullptr) break;
        if (fqn.rfind(ExtraPrefix(o), 0) != 0) {
          found->Report(fqn, "unexpected " + Quote(fqn));
        } else if (!std::holds_alternative<BytesStorageMetadata>(m)) {
          found->Report(fqn, Quote(fqn) + " is " + Describe(m) +
                                 " in the checkpoint; TrainerState::extra "
                                 "holds bytes");
        }
        break;
      case Part::kNone:
        break;
    }
  }
}

// Parameter `param` has the pair option `h`, as one item or (as rocksdcp
// saved it before) as its elements, not both.
void CheckPairOption(const LoadTarget& target, const Metadata& metadata,
                     const std::string& param, const HyperField& h,
                     MetadataProblems* found) {
  const TorchOptions& o = target.options;
  const auto& md = metadata.state_dict_metadata;
  const std::string whole = GroupFqn(o, param, h.name);
  const Expected& e = target.expected.at(whole);
  std::vector<std::string> present, absent;
  for (size_t i = 0; i < h.Count(); ++i) {
    const std::string fqn = GroupFqn(o, param, h.LegacyElement(i));
    (md.count(fqn) ? present : absent).push_back(fqn);
  }
  if (md.count(whole) > 0) {
    for (const std::string& fqn : present) {
      found->Report(fqn, "unexpected " + Quote(fqn) +
                             " (the checkpoint holds " + h.name + " as " +
                             Quote(whole) + " too)");
    }
  } else if (present.empty()) {
    found->Report(whole, kMissing + Quote(whole) + " (" + Describe(e) + ")");
  } else {
    for (const std::string& fqn : absent) {
      found->Report(fqn, kMissing + Quote(fqn) + " (float64 [], as " +
                             Quote(present[0]) + ")");
    }
  }
}

// Every parameter has each option of LibTorch's.
void CheckOptions(const LoadTarget& target, const Metadata& metadata,
                  MetadataProblems* found) {
  const auto& md = metadata.state_dict_metadata;
  for (const OptimizerParam& p : target.params) {
    for (const HyperField& h : target.kind->hyper) {
      if (h.role != HyperRole::kOption) continue;
      if (h.type == HyperType::kFloat64Pair) {
        CheckPairOption(target, metadata, p.fqn, h, found);
        continue;
      }
      const std::string whole = GroupFqn(target.options, p.fqn, h.name);
      const Expected& e = target.expected.at(whole);
      if (!md.count(whole)) {
        found->Report(whole,
                      kMissing + Quote(whole) + " (" + Describe(e) + ")");
      }
    }
  }
}

// A parameter with state has all of its unconditional fields.
void CheckStateFields(const LoadTarget& target, const Metadata& metadata,
                      MetadataProblems* found) {
  const TorchOptions& o = target.options;
  const auto& md = metadata.state_dict_metadata;
  for (const OptimizerParam& p : target.params) {
    const bool has = HasState(target, metadata, p.fqn);
    if (!has && !target.kind->state_from_start) continue;
    for (const StateField& f : target.kind->state) {
      const std::string fqn = StateFqn(o, p.fqn, f.name);
      if (f.exists_if == nullptr && !md.count(fqn)) {
        found->Report(fqn, kMissing + Quote(fqn) + " (" +
                               Describe(target.expected.at(fqn)) + ")");
      }
    }
    const std::string step = StateFqn(o, p.fqn, "step");
    if (target.kind->step != nullptr && !md.count(step)) {
      found->Report(step, kMissing + Quote(step) + " (float32 [])");
    }
  }
}

}  // namespace

std::vector<std::string> CheckMetadata(const LoadTarget& target,
                                       const Metadata& metadata) {
  MetadataProblems found(target.options);
  CheckExpectedItems(target, metadata, &found);
  CheckUnexpectedItems(target, metadata, &found);
  if (target.kind == nullptr) return found.TakeWithoutOptimizer();
  CheckOptions(target, metadata, &found);
  CheckStateFields(target, metadata, &found);
  return found.Take(KindProblem(target, metadata));
}

std::optional<HyperNumbers> HyperValue(const LoadTarget& target,
                                       const SmallItems& small,
                                       const std::string& param,
                                       const HyperField& field) {
  HyperRead r = ReadHyper(target, small, param, field);
  if (r.kind != HyperRead::Kind::kNumbers || !Fits(field, r)) {
    return std::nullopt;
  }
  return std::move(r.numbers);
}

namespace {

// A problem that every parameter of a param group repeats (they share
// their hyperparameters), said once: its first fqn, and how many more.
class Repeated {
 public:
  // `fqn` + `what` is the problem: " is true, but ...".
  void Add(const std::string& what, const std::string& fqn) {
    auto [it, fresh] = fqns_.try_emplace(what);
    if (fresh) order_.push_back(what);
    it->second.push_back(fqn);
  }
  void AppendTo(std::vector<std::string>* problems) const {
    for (const std::string& what : order_) {
      const std::vector<std::string>& fqns = fqns_.at(what);
      std::string more;
      if (fqns.size() > 1) {
        more = " (and " + std::to_string(fqns.size() - 1) + " more like it)";
      }
      problems->push_back(Quote(fqns[0]) + more + what);
    }
  }

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::vector<std::string>> fqns_;
};

constexpr char kPickled[] =
    " holds bytes that are not rocksdcp's encoding of data: a pickle, as "
    "torch's own DefaultSavePlanner saves a hyperparameter, which C++ can't "
    "read; save the checkpoint with rocksdcp.torch.DefaultSavePlanner, which "
    "saves hyperparameters as data";

bool SameBits(const HyperNumbers& a, const HyperNumbers& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// What CheckValues has found so far.
struct ValueProblems {
  std::vector<std::string> problems;
  // The problems each parameter of a param group repeats, said last.
  Repeated repeated;
  // Said once: (param group, hyperparameter) for a group's parameters that
  // disagree, (SIZE_MAX, hyperparameter) for the optimizer kind.
  std::set<std::pair<size_t, std::string>> reported;
};

// The checkpoint's hyperparameter `h` of parameter `p` is this optimizer's,
// and the same as that of `lead`, the first parameter of p's param group.
void CheckHyper(const LoadTarget& target, const SmallItems& small,
                const OptimizerParam& p, const OptimizerParam& lead,
                const HyperField& h, ValueProblems* found) {
  const OptimizerKind& kind = *target.kind;
  const HyperRead r = ReadHyper(target, small, p.fqn, h);
  if (r.kind == HyperRead::Kind::kAbsent) return;  // Optional.
  if (r.kind == HyperRead::Kind::kPickle) {
    found->repeated.Add(kPickled, r.fqn);
    return;
  }
  if (!Fits(h, r)) {
    found->repeated.Add(" holds " + Holds(r) + "; the " + kind.name +
                            " optimizer's " + h.name + " is " + Wants(h),
                        r.fqn);
    return;
  }
  switch (h.role) {
    case HyperRole::kPythonImpl:
      return;  // It only picks one of Python's implementations.
    case HyperRole::kPythonFalse:
      if (r.numbers[0] != 0) {
        found->repeated.Add(std::string(" is true, but ") + h.why, r.fqn);
      }
      return;
    case HyperRole::kKindMark: {
      const auto& groups = target.trainer.optimizer->param_groups();
      if (r.numbers != h.get(groups[p.group].options()) &&
          found->reported.emplace(SIZE_MAX, h.name).second) {
        found->problems.push_back(
            "optimizer kind: the checkpoint's param group of " + Quote(p.fqn) +
            " has " + h.name + " " + ValueText(h, r.numbers) + ", which is " +
            KindWithMark(h.name, r.numbers) + "'s; this optimizer is " +
            kind.name);
      }
      break;
    }
    case HyperRole::kOption:
      break;
  }
  if (&lead == &p) return;
  const HyperRead lr = ReadHyper(target, small, lead.fqn, h);
  if (!Fits(h, lr)) return;  // Reported as its own problem.
  if (!SameBits(r.numbers, lr.numbers) &&
      found->reported.emplace(p.group, h.name).second) {
    found->problems.push_back(
        "param group layout: " + Quote(lead.fqn) + " and " + Quote(p.fqn) +
        " share param group " + std::to_string(p.group) +
        " here, but the checkpoint has " + h.name + " " +
        ValueText(h, lr.numbers) + " and " + ValueText(h, r.numbers) +
        " for them: it grouped them apart");
  }
}

// Parameter `p`'s state has each conditional field exactly when the
// checkpoint's hyperparameter it depends on is set.
void CheckConditionalState(const LoadTarget& target, const Metadata& metadata,
                           const SmallItems& small, const OptimizerParam& p,
                           std::vector<std::string>* problems) {
  const OptimizerKind& kind = *target.kind;
  for (const StateField& f : kind.state) {
    if (f.exists_if == nullptr) continue;
    const HyperField* cond = kind.FindHyper(f.exists_if);
    const std::optional<HyperNumbers> v =
        cond == nullptr ? std::nullopt
                        : HyperValue(target, small, p.fqn, *cond);
    if (!v) continue;  // Reported above.
    const std::string fqn = StateFqn(target.options, p.fqn, f.name);
    const bool wanted = v->at(0) != 0;
    const bool there = metadata.state_dict_metadata.count(fqn) > 0;
    if (wanted != there) {
      problems->push_back(std::string(wanted ? kMissing : "unexpected ") +
                          Quote(fqn) + " (the checkpoint's " + f.exists_if +
                          " is " + (wanted ? "set" : "not set") + ")");
    }
  }
}

// Parameter `p`'s step, if the checkpoint has it, is a step count.
void CheckStep(const LoadTarget& target, const SmallItems& small,
               const OptimizerParam& p, std::vector<std::string>* problems) {
  const std::string step_fqn = StateFqn(target.options, p.fqn, "step");
  if (auto step = small.tensors.find(step_fqn); step != small.tensors.end()) {
    const double v = ScalarOf(step->second);
    if (!(v >= 0) || v != std::floor(v)) {
      problems->push_back(Quote(step_fqn) + " is " + Number(v) +
                          "; a step count is a whole number >= 0");
    }
  }
}

// The checkpoint's RNG state, if it has one, is a CPU generator's.
void CheckRngState(const LoadTarget& target, const SmallItems& small,
                   std::vector<std::string>* problems) {
  const TorchOptions& o = target.options;
  if (auto rng = small.tensors.find(RngStateFqn(o));
      rng != small.tensors.end()) {
    Status s = CatchTorch(StatusCode::kInvalidArgument, "", [&] {
      at::Generator scratch = at::make_generator<at::CPUGeneratorImpl>();
      scratch.set_state(rng->second);
      return Status::OK();
    });
    if (!s.ok()) {
      problems->push_back(Quote(RngStateFqn(o)) +
                          " is not a CPU generator's state (LibTorch says" +
                          s.message() + ")");
    }
  }
}

}  // namespace

std::vector<std::string> CheckValues(const LoadTarget& target,
                                     const Metadata& metadata,
                                     const SmallItems& small) {
  ValueProblems found;
  if (target.kind != nullptr) {
    // Per param group, its first parameter: the others must agree with it.
    std::map<size_t, const OptimizerParam*> first;
    for (const OptimizerParam& p : target.params) {
      const OptimizerParam& lead = *first.emplace(p.group, &p).first->second;
      for (const HyperField& h : target.kind->hyper) {
        CheckHyper(target, small, p, lead, h, &found);
      }
      if (!HasState(target, metadata, p.fqn)) continue;
      CheckConditionalState(target, metadata, small, p, &found.problems);
      CheckStep(target, small, p, &found.problems);
    }
  }
  found.repeated.AppendTo(&found.problems);
  CheckRngState(target, small, &found.problems);
  return std::move(found.problems);
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
