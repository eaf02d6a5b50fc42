#include "workloads.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>

namespace rocksdcp::bench {

namespace {

std::string Layer(int layer, const char* rest) {
  char name[96];
  std::snprintf(name, sizeof(name), "model.layers.%d.%s", layer, rest);
  return name;
}

// W1's shape at `gib` GiB, as workload 0: the --rss_gib and --sizes state
// dicts.
WorkloadSpec SizeSpec(int64_t gib) {
  WorkloadSpec spec = W1Spec(static_cast<uint64_t>(gib) << 30);
  spec.id = 0;
  return spec;
}

// The rows of `rows` that rank `rank` of `ranks` holds: [begin, end).
std::pair<int64_t, int64_t> RowRange(int64_t rows, int rank, int ranks) {
  return {rows * rank / ranks, rows * (rank + 1) / ranks};
}

}  // namespace

uint64_t TensorSpec::nbytes() const {
  uint64_t n = DTypeSize(dtype);
  for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
  return n;
}

uint64_t WorkloadSpec::total_bytes() const {
  uint64_t n = 0;
  for (const TensorSpec& t : tensors) n += t.nbytes();
  for (const BytesSpec& b : byte_items) n += b.size;
  return n;
}

WorkloadSpec W1Spec(uint64_t total_bytes) {
  constexpr int64_t kCols = 1024;
  WorkloadSpec spec;
  spec.id = 1;
  const uint64_t each = total_bytes / 8;
  for (int i = 0; i < 8; ++i) {
    const DType dtype = i < 4 ? DType::kFloat32 : DType::kBFloat16;
    const int64_t rows =
        static_cast<int64_t>(each / DTypeSize(dtype) / uint64_t{kCols});
    spec.tensors.push_back({Layer(i, "weight"), dtype, {rows, kCols}});
  }
  return spec;
}

WorkloadSpec W2Spec(int64_t hidden) {
  const int64_t h = hidden;
  const int64_t mlp = h / 4 * 11;  // 2816 at hidden 1024, as in TinyLlama.
  constexpr DType f32 = DType::kFloat32;
  constexpr DType bf16 = DType::kBFloat16;
  WorkloadSpec spec;
  spec.id = 2;
  spec.tensors.push_back({"model.embed_tokens.weight", bf16, {32 * h, h}});
  for (int l = 0; l < 28; ++l) {
    // 32 MiB per layer at hidden 1024: 4 + 1 + 1 + 4 + 5.5 + 5.5 + 11.
    spec.tensors.push_back({Layer(l, "self_attn.q_proj.weight"), f32, {h, h}});
    spec.tensors.push_back(
        {Layer(l, "self_attn.k_proj.weight"), f32, {h / 4, h}});
    spec.tensors.push_back(
        {Layer(l, "self_attn.v_proj.weight"), f32, {h / 4, h}});
    spec.tensors.push_back({Layer(l, "self_attn.o_proj.weight"), f32, {h, h}});
    spec.tensors.push_back({Layer(l, "mlp.gate_proj.weight"), bf16, {mlp, h}});
    spec.tensors.push_back({Layer(l, "mlp.up_proj.weight"), bf16, {mlp, h}});
    spec.tensors.push_back({Layer(l, "mlp.down_proj.weight"), f32, {h, mlp}});
  }
  spec.tensors.push_back({"lm_head.weight", bf16, {32 * h, h}});
  return spec;
}

WorkloadSpec W3Spec(int tensors, int byte_items) {
  WorkloadSpec spec;
  spec.id = 3;
  uint64_t state = 3;
  char name[64];
  int64_t numel = 0;
  for (int i = 0; i < tensors; ++i) {
    const int param = i / 2;
    // Both of a parameter's moments have its size: 256-4096 fp32 elements.
    if (i % 2 == 0)
      numel = 256 + static_cast<int64_t>(SplitMix64(state) % 3841);
    std::snprintf(name, sizeof(name), "optim.state.%d.%s", param,
                  i % 2 == 0 ? "exp_avg" : "exp_avg_sq");
    spec.tensors.push_back({name, DType::kFloat32, {numel}});
  }
  static constexpr const char* kKinds[] = {"optim.param_groups", "rng_state",
                                           "dataloader.state", "extra_state"};
  for (int i = 0; i < byte_items; ++i) {
    std::snprintf(name, sizeof(name), "%s.%d", kKinds[i % 4], i);
    spec.byte_items.push_back({name, 8 + SplitMix64(state) % 1017});
  }
  return spec;
}

WorkloadSpec W5Spec(int64_t hidden, int64_t lora_rank) {
  const int64_t h = hidden;
  const int64_t r = lora_rank;
  constexpr DType f32 = DType::kFloat32;
  WorkloadSpec spec = W2Spec(hidden);
  spec.id = 5;
  for (int l = 0; l < 28; ++l) {
    // 840 KiB per layer at hidden 1024, rank 64.
    spec.tensors.push_back({Layer(l, "input_layernorm.weight"), f32, {h}});
    spec.tensors.push_back(
        {Layer(l, "post_attention_layernorm.weight"), f32, {h}});
    spec.tensors.push_back(
        {Layer(l, "self_attn.q_proj.lora_A.weight"), f32, {r, h}});
    spec.tensors.push_back(
        {Layer(l, "self_attn.q_proj.lora_B.weight"), f32, {h, r}});
    spec.tensors.push_back(
        {Layer(l, "self_attn.v_proj.lora_A.weight"), f32, {r, h}});
    spec.tensors.push_back(
        {Layer(l, "self_attn.v_proj.lora_B.weight"), f32, {h / 4, r}});
  }
  spec.tensors.push_back({"model.norm.weight", f32, {h}});
  return spec;
}

bool IsW5Trainable(const TensorSpec& tensor) {
  const std::string& f = tensor.fqn;
  return f.find(".lora_") != std::string::npos || f.ends_with("norm.weight");
}

WorkloadSpec W6Spec(int64_t rows) {
  constexpr DType f32 = DType::kFloat32;
  WorkloadSpec spec;
  spec.id = 6;
  spec.tensors.push_back({"embedding.weight", f32, {rows, kW6Cols}});
  spec.tensors.push_back({"dense.0.weight", f32, {1024, 1024}});
  spec.tensors.push_back({"dense.0.bias", f32, {1024}});
  spec.tensors.push_back({"dense.1.weight", f32, {256, 1024}});
  spec.tensors.push_back({"dense.1.bias", f32, {256}});
  spec.tensors.push_back({"dense.2.weight", f32, {1, 256}});
  spec.tensors.push_back({"dense.2.bias", f32, {1}});
  return spec;
}

WorkloadSpec SpecFor(int id, const Config& config) {
  switch (id) {
    case 1:
      return W1Spec(static_cast<uint64_t>(config.large_mib) << 20);
    case 2:
    case 4:
      return W2Spec(config.w2_hidden);
    case 3:
      return W3Spec(config.w3_tensors, config.w3_byte_items);
    case 5:
      return W5Spec(config.w2_hidden, config.w2_hidden / 16);
    case 6:
      return W6Spec(config.w6_rows);
    default:
      return SizeSpec(config.rss_gib);
  }
}

StateData::StateData(const WorkloadSpec& spec, uint64_t seed) : spec_(spec) {
  tensors_.reserve(spec_.tensors.size());
  for (size_t i = 0; i < spec_.tensors.size(); ++i) {
    const uint64_t n = spec_.tensors[i].nbytes();
    tensors_.push_back(std::make_unique_for_overwrite<uint8_t[]>(n));
    if (seed == 0) {
      std::memset(tensors_.back().get(), 0, n);
    } else {
      FillBytes(tensors_.back().get(), n, seed + i);
    }
  }
  for (size_t j = 0; j < spec_.byte_items.size(); ++j) {
    std::string& b = bytes_.emplace_back(spec_.byte_items[j].size, '\0');
    if (seed != 0) {
      FillBytes(reinterpret_cast<uint8_t*>(b.data()), b.size(),
                seed + spec_.tensors.size() + j);
    }
  }
}

StateDict StateData::Dict() {
  StateDict dict;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorSpec& t = spec_.tensors[i];
    dict.emplace(t.fqn,
                 TensorView::Contiguous(t.dtype, t.sizes, tensors_[i].get()));
  }
  for (size_t j = 0; j < bytes_.size(); ++j) {
    dict.emplace(spec_.byte_items[j].fqn, bytes_[j]);
  }
  return dict;
}

StateDict StateData::ShardDict(int rank, int ranks) {
  StateDict dict;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorSpec& t = spec_.tensors[i];
    ShardedTensor st;
    st.dtype = t.dtype;
    st.global_size = t.sizes;
    const auto [begin, end] = RowRange(t.sizes[0], rank, ranks);
    if (end > begin) {
      const uint64_t row_bytes = t.nbytes() / static_cast<uint64_t>(t.sizes[0]);
      std::vector<int64_t> offsets(t.sizes.size(), 0);
      offsets[0] = begin;
      std::vector<int64_t> sizes = t.sizes;
      sizes[0] = end - begin;
      st.local_shards.push_back(
          {std::move(offsets),
           TensorView::Contiguous(t.dtype, std::move(sizes),
                                  tensors_[i].get() + begin * row_bytes)});
    }
    dict.emplace(t.fqn, std::move(st));
  }
  if (rank == 0) {
    for (size_t j = 0; j < bytes_.size(); ++j) {
      dict.emplace(spec_.byte_items[j].fqn, bytes_[j]);
    }
  }
  return dict;
}

void StateData::TakeBytes(StateDict& dict) {
  for (size_t j = 0; j < bytes_.size(); ++j) {
    auto it = dict.find(spec_.byte_items[j].fqn);
    if (it == dict.end()) continue;
    if (auto* s = std::get_if<std::string>(&it->second)) bytes_[j] = *s;
  }
}

void StateData::Zero() {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    std::memset(tensors_[i].get(), 0, spec_.tensors[i].nbytes());
  }
  for (std::string& b : bytes_) std::fill(b.begin(), b.end(), '\0');
}

bool StateData::SameAs(const StateData& other) const {
  if (tensors_.size() != other.tensors_.size() || bytes_ != other.bytes_) {
    return false;
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (std::memcmp(tensors_[i].get(), other.tensors_[i].get(),
                    spec_.tensors[i].nbytes()) != 0) {
      return false;
    }
  }
  return true;
}

bool StateData::MatchesSeed(uint64_t seed) const {
  constexpr uint64_t kChunk = 1 << 20;
  std::vector<uint8_t> expected(kChunk);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const uint64_t n = spec_.tensors[i].nbytes();
    uint64_t state = seed + i;
    for (uint64_t off = 0; off < n; off += kChunk) {
      const uint64_t len = std::min(kChunk, n - off);
      state = FillBytes(expected.data(), len, state);
      if (std::memcmp(expected.data(), tensors_[i].get() + off, len) != 0) {
        return false;
      }
    }
  }
  for (size_t j = 0; j < bytes_.size(); ++j) {
    std::string want(bytes_[j].size(), '\0');
    FillBytes(reinterpret_cast<uint8_t*>(want.data()), want.size(),
              seed + tensors_.size() + j);
    if (want != bytes_[j]) return false;
  }
  return true;
}

std::vector<iovec> StateData::Payload() {
  std::vector<iovec> iov;
  iov.reserve(tensors_.size() + bytes_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    iov.push_back({tensors_[i].get(), spec_.tensors[i].nbytes()});
  }
  for (std::string& b : bytes_) iov.push_back({b.data(), b.size()});
  return iov;
}

namespace {

std::unique_ptr<WorkloadData> g_current;
// What it holds: a workload id and, for id 0, its GiB (0 for the others).
std::pair<int, int64_t> g_current_key{-1, 0};

// The slot's data, built from `spec()` (freeing what the slot held first)
// unless the slot holds `key` already.
WorkloadData& Current(std::pair<int, int64_t> key,
                      const std::function<WorkloadSpec()>& spec) {
  if (g_current == nullptr || g_current_key != key) {
    DropWorkload();
    const int id = key.first;
    g_current = std::make_unique<WorkloadData>(
        spec(), 1'000'003ull * static_cast<uint64_t>(id + 1),
        /*with_dest=*/id != 0 && id != 6);
    g_current_key = key;
  }
  return *g_current;
}

}  // namespace

WorkloadData& GetWorkload(int id, const Config& config) {
  if (id == 4) id = 2;
  return Current({id, id == 0 ? config.rss_gib : 0},
                 [&] { return SpecFor(id, config); });
}

WorkloadData& GetSizeWorkload(int64_t gib) {
  return Current({0, gib}, [gib] { return SizeSpec(gib); });
}

void DropWorkload() {
  g_current.reset();
  g_current_key = {-1, 0};
}

}  // namespace rocksdcp::bench
