#include "hostile/victim.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <variant>

namespace rocksdcp::hostile {
namespace {

// Deterministic bytes, different for every item.
std::vector<uint8_t> Bytes(size_t n, uint64_t seed, bool zero) {
  std::vector<uint8_t> out(n == 0 ? 1 : n, 0);
  if (zero) return out;
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    out[i] = static_cast<uint8_t>(x >> 24);
  }
  return out;
}

TensorView Add(VictimState& s, DType dtype, std::vector<int64_t> sizes,
               uint64_t seed, bool zero) {
  int64_t n = 1;
  for (int64_t d : sizes) n *= d;
  s.storage.push_back(
      Bytes(static_cast<size_t>(n) * DTypeSize(dtype), seed, zero));
  return TensorView::Contiguous(dtype, std::move(sizes),
                                s.storage.back().data());
}

}  // namespace

VictimState MakeVictimState(bool zero) {
  VictimState s;
  s.storage.reserve(16);
  s.dict["w"] = Add(s, DType::kFloat16, {48, 100}, 1, zero);
  s.dict["b"] = Add(s, DType::kFloat32, {100}, 2, zero);
  s.dict["b2"] = Add(s, DType::kFloat32, {100}, 3, zero);
  s.dict["s"] = Add(s, DType::kInt64, {}, 4, zero);
  s.dict["e"] = Add(s, DType::kFloat32, {0, 4}, 5, zero);
  // Saved as two shards, loaded as one dense tensor (resharding).
  const TensorView top = Add(s, DType::kFloat32, {4, 16}, 6, zero);
  const TensorView bottom = Add(s, DType::kFloat32, {4, 16}, 7, zero);
  if (zero) {
    s.dict["sharded"] = Add(s, DType::kFloat32, {8, 16}, 0, true);
  } else {
    s.dict["sharded"] = ShardedTensor{
        DType::kFloat32, {8, 16}, {{{0, 0}, top}, {{4, 0}, bottom}}};
  }
  const std::vector<uint8_t> opt = Bytes(5000, 8, zero);
  s.dict["opt"] = zero ? std::string() : std::string(opt.begin(), opt.end());
  return s;
}

namespace {

// A saved victim item as bytes: a byte item's, or a tensor's in row-major
// order (a sharded one's shards are whole rows, in order).
struct SavedItem {
  bool bytes_item = false;
  DType dtype = DType::kUInt8;
  std::vector<int64_t> sizes;
  std::string bytes;
};

std::map<std::string, SavedItem> SavedItems() {
  const VictimState saved = MakeVictimState(false);
  std::map<std::string, SavedItem> out;
  for (const auto& [fqn, value] : saved.dict) {
    SavedItem& item = out[fqn];
    if (const auto* b = std::get_if<std::string>(&value)) {
      item.bytes_item = true;
      item.bytes = *b;
    } else if (const auto* t = std::get_if<TensorView>(&value)) {
      item.dtype = t->dtype;
      item.sizes = t->sizes;
      item.bytes.assign(static_cast<const char*>(t->data), t->nbytes());
    } else {
      const auto& st = std::get<ShardedTensor>(value);
      item.dtype = st.dtype;
      item.sizes = st.global_size;
      for (const Shard& shard : st.local_shards) {
        item.bytes.append(static_cast<const char*>(shard.tensor.data),
                          shard.tensor.nbytes());
      }
    }
  }
  return out;
}

// True if `value`, loaded as `fqn`, can be compared with what was saved:
// a byte item as a byte item, a tensor of the saved dtype and shape.
bool Comparable(const SavedItem& saved, const StateValue& value) {
  if (saved.bytes_item) return std::holds_alternative<std::string>(value);
  const auto* t = std::get_if<TensorView>(&value);
  return t != nullptr && t->dtype == saved.dtype && t->sizes == saved.sizes;
}

bool SameAsSaved(const SavedItem& saved, const StateValue& value) {
  if (const auto* b = std::get_if<std::string>(&value))
    return *b == saved.bytes;
  const auto& t = std::get<TensorView>(value);
  return t.nbytes() == saved.bytes.size() &&
         (saved.bytes.empty() ||
          std::memcmp(t.data, saved.bytes.data(), saved.bytes.size()) == 0);
}

// The first item of `loaded` that differs from what was saved, among those
// that can be compared.
std::string Difference(const StateDict& loaded) {
  for (const auto& [fqn, saved] : SavedItems()) {
    auto it = loaded.find(fqn);
    if (it == loaded.end() || !Comparable(saved, it->second)) continue;
    if (!SameAsSaved(saved, it->second)) return fqn;
  }
  return "";
}

// Bytes of a tensor of `dtype` and `size`, or nullopt past 2^64.
std::optional<uint64_t> TensorBytes(DType dtype,
                                    const std::vector<int64_t>& size) {
  uint64_t n = DTypeSize(dtype);
  for (int64_t d : size) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
      return std::nullopt;
    }
  }
  return n;
}

constexpr uint64_t kWholeTensorLimit = 64ull << 20;

}  // namespace

Status LoadAsModel(Store& store, const std::string& id, std::string* wrong) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store.NewReader());
  VictimState into = MakeVictimState(/*zero=*/true);
  ROCKSDCP_RETURN_IF_ERROR(Load(&into.dict, *reader, {.checkpoint_id = id}));
  *wrong = Difference(into.dict);
  return Status::OK();
}

Status LoadAsMirror(Store& store, const std::string& id, std::string* wrong) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store.NewReader());
  ROCKSDCP_RETURN_IF_ERROR(reader->Reset(id));
  ROCKSDCP_ASSIGN_OR_RETURN(Metadata md, reader->ReadMetadata());
  std::vector<std::vector<uint8_t>> storage;
  storage.reserve(md.state_dict_metadata.size());
  StateDict sd;
  for (const auto& [fqn, item] : md.state_dict_metadata) {
    const auto* t = std::get_if<TensorStorageMetadata>(&item);
    if (t == nullptr) {
      sd[fqn] = std::string();
      continue;
    }
    const DType dtype = t->properties.dtype;
    const std::optional<uint64_t> bytes = TensorBytes(dtype, t->size);
    if (bytes && *bytes <= kWholeTensorLimit) {
      storage.emplace_back(std::max<uint64_t>(*bytes, 1), 0);
      sd[fqn] = TensorView::Contiguous(dtype, t->size, storage.back().data());
      continue;
    }
    // Too large to hold: one element of it, at the origin.
    storage.emplace_back(16, 0);
    sd[fqn] =
        ShardedTensor{dtype,
                      t->size,
                      {Shard{std::vector<int64_t>(t->size.size(), 0),
                             TensorView::Contiguous(
                                 dtype, std::vector<int64_t>(t->size.size(), 1),
                                 storage.back().data())}}};
  }
  ROCKSDCP_RETURN_IF_ERROR(Load(&sd, *reader, {.checkpoint_id = id}));
  *wrong = Difference(sd);
  return Status::OK();
}

namespace {

// tests/rocksdb/store_fixture's ExampleStateDict(seed), rebuilt here so
// that the child needs no GoogleTest: a bf16 matrix, a float vector, a 0-d
// int64 and a byte item.
Status SaveExample(Store& store, const std::string& id, uint64_t seed) {
  VictimState s;
  s.storage.reserve(4);
  s.dict["model.layers.0.attn.w"] =
      Add(s, DType::kBFloat16, {48, 100}, seed * 31 + 1, false);
  s.dict["model.norm.bias"] =
      Add(s, DType::kFloat32, {100}, seed * 31 + 2, false);
  s.dict["step_counter"] = Add(s, DType::kInt64, {}, seed * 31 + 3, false);
  const std::vector<uint8_t> opt = Bytes(5000, seed, false);
  s.dict["optimizer/state"] = std::string(opt.begin(), opt.end());
  ROCKSDCP_ASSIGN_OR_RETURN(auto writer,
                            store.NewWriter({.max_piece_bytes = 4096}));
  return Save(s.dict, *writer, {.checkpoint_id = id}).status();
}

}  // namespace

Status SavePristineStore(const std::string& path) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto store, Store::Open(path));
  ROCKSDCP_RETURN_IF_ERROR(SaveExample(*store, kBefore, 1));
  {
    VictimState victim = MakeVictimState(false);
    ROCKSDCP_ASSIGN_OR_RETURN(
        auto writer, store->NewWriter({.max_piece_bytes = kVictimPieceBytes}));
    ROCKSDCP_RETURN_IF_ERROR(
        Save(victim.dict, *writer, {.checkpoint_id = kVictim}).status());
  }
  return SaveExample(*store, kAfter, 3);
}

}  // namespace rocksdcp::hostile
