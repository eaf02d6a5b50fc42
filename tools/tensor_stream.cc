#include "tensor_stream.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <variant>

#include "checkpoint_items.h"

namespace rocksdcp::tools {
namespace {

// The largest element (complex128): a smaller budget could not hold one
// element of every tensor, so a slab could be empty.
constexpr size_t kMinBudgetBytes = 16;

// Checks the items of each Load against the metadata that Load reads
// anyway, so the check costs no metadata read of its own. It is needed:
// with allow_partial_load the default planner skips an fqn the checkpoint
// lacks, which would hand the sink the buffer's stale bytes as the tensor.
class CheckingReader : public StorageReaderWrapper {
 public:
  CheckingReader(StorageReader* target, const std::string& id,
                 const std::vector<StreamItem>& items)
      : StorageReaderWrapper(target), id_(id), items_(items) {}

  // The next Load checks items [first, last).
  void CheckNext(size_t first, size_t last) { first_ = first, last_ = last; }

  Result<Metadata> ReadMetadata() override {
    ROCKSDCP_ASSIGN_OR_RETURN(Metadata md, target()->ReadMetadata());
    for (size_t i = first_; i < last_; ++i) {
      ROCKSDCP_RETURN_IF_ERROR(Check(md, items_[i]));
    }
    return md;
  }

 private:
  Status Check(const Metadata& md, const StreamItem& item) const {
    const std::string what =
        "checkpoint " + Quoted(id_) + ", item " + Quoted(item.fqn);
    const auto it = md.state_dict_metadata.find(item.fqn);
    const auto* tensor = it == md.state_dict_metadata.end()
                             ? nullptr
                             : std::get_if<TensorStorageMetadata>(&it->second);
    if (tensor == nullptr) {
      return Status::NotFound(what + ": the checkpoint has no such tensor");
    }
    if (tensor->properties.dtype != item.dtype) {
      return Status::InvalidArgument(
          what + ": dtype mismatch: checkpoint has " +
          std::string(DTypeName(tensor->properties.dtype)) + ", asked for " +
          std::string(DTypeName(item.dtype)));
    }
    if (tensor->size != item.size) {
      return Status::InvalidArgument(what + ": size mismatch: checkpoint has " +
                                     ShapeText(tensor->size) + ", asked for " +
                                     ShapeText(item.size));
    }
    return Status::OK();
  }

  const std::string& id_;
  const std::vector<StreamItem>& items_;
  size_t first_ = 0;
  size_t last_ = 0;
};

// How a tensor larger than the budget is cut: runs of `rows` rows of dim
// `k`, each row (the dims after k) `row_bytes` long.
struct SlabShape {
  size_t k = 0;
  size_t row_bytes = 0;
  int64_t rows = 0;
};

// The outermost dim whose row fits, for the fewest, largest slabs.
// REQUIRES: every size > 0; budget >= the element size; no overflow.
SlabShape ChooseSlabs(const StreamItem& item, size_t budget) {
  SlabShape s{item.size.size() - 1, DTypeSize(item.dtype), 0};
  while (s.k > 0 &&
         s.row_bytes * static_cast<size_t>(item.size[s.k]) <= budget) {
    s.row_bytes *= static_cast<size_t>(item.size[s.k]);
    --s.k;
  }
  // In uint64_t: a budget past INT64_MAX must not turn negative.
  s.rows = static_cast<int64_t>(std::min<uint64_t>(
      static_cast<uint64_t>(item.size[s.k]), budget / s.row_bytes));
  return s;
}

// One Load's worth of items [first, last), or one item too large for the
// budget, read in slabs; `bytes` is the most of the buffer one Load fills.
struct Group {
  size_t first = 0;
  size_t last = 0;
  size_t bytes = 0;
};

class Streamer {
 public:
  Streamer(StorageReader& reader, const std::string& id,
           const std::vector<StreamItem>& items, size_t budget,
           const StreamSink& sink)
      : reader_(&reader, id, items),
        id_(id),
        items_(items),
        budget_(budget),
        sink_(sink) {}

  Status Run() {
    ROCKSDCP_RETURN_IF_ERROR(Plan());
    for (const Group& g : groups_) {
      if (g.bytes == 0) continue;  // Only zero-byte tensors: nothing to read.
      ROCKSDCP_RETURN_IF_ERROR(nbytes_[g.first] > budget_ ? StreamSlabs(g.first)
                                                          : StreamBatch(g));
    }
    if (!checked_all_ && !items_.empty()) {
      // Nothing to read, but the items must still exist as asked.
      StateDict none;
      return LoadChecked(&none, 0, 0);
    }
    return Status::OK();
  }

 private:
  // Sizes every item and groups them into Loads; sizes the buffer.
  Status Plan() {
    for (const StreamItem& item : items_) {
      const std::optional<size_t> n = TensorBytes(item.dtype, item.size);
      if (!n) {
        return Status::Corruption(
            "checkpoint " + Quoted(id_) + ", item " + Quoted(item.fqn) +
            ": size " + ShapeText(item.size) + " is negative or too large");
      }
      nbytes_.push_back(*n);
    }
    for (size_t i = 0; i < items_.size(); i = groups_.back().last) {
      Group g{i, i, 0};
      if (nbytes_[i] > budget_) {
        const SlabShape s = ChooseSlabs(items_[i], budget_);
        g = {i, i + 1, static_cast<size_t>(s.rows) * s.row_bytes};
      } else {
        // A state dict holds an fqn once: a repeated one starts a new Load.
        std::unordered_set<std::string_view> fqns;
        while (g.last < items_.size() && nbytes_[g.last] <= budget_ - g.bytes &&
               fqns.insert(items_[g.last].fqn).second) {
          g.bytes += nbytes_[g.last++];
        }
      }
      buffer_bytes_ = std::max(buffer_bytes_, g.bytes);
      groups_.push_back(g);
    }
    return Status::OK();
  }

  // Not zero-filled: every byte handed to the sink was loaded first, and
  // first touch of fresh pages costs more than the read.
  char* Buffer() {
    if (buffer_ == nullptr) {
      buffer_ = std::make_unique_for_overwrite<char[]>(buffer_bytes_);
    }
    return buffer_.get();
  }

  // The first Load checks every item, before any byte reaches the sink;
  // later ones check the items they read (a checkpoint may be replaced
  // between Loads).
  Status LoadChecked(StateDict* sd, size_t first, size_t last) {
    reader_.CheckNext(checked_all_ ? first : 0,
                      checked_all_ ? last : items_.size());
    checked_all_ = true;
    LoadOptions options;
    options.checkpoint_id = id_;
    options.allow_partial_load = true;
    return Load(sd, reader_, options);
  }

  Status StreamBatch(const Group& g) {
    StateDict sd;
    size_t offset = 0;
    for (size_t i = g.first; i < g.last; ++i) {
      if (nbytes_[i] == 0) continue;
      sd[items_[i].fqn] = TensorView::Contiguous(
          items_[i].dtype, items_[i].size, Buffer() + offset);
      offset += nbytes_[i];
    }
    ROCKSDCP_RETURN_IF_ERROR(LoadChecked(&sd, g.first, g.last));
    offset = 0;
    for (size_t i = g.first; i < g.last; ++i) {
      if (nbytes_[i] == 0) continue;
      ROCKSDCP_RETURN_IF_ERROR(
          sink_(i, std::string_view(Buffer() + offset, nbytes_[i])));
      offset += nbytes_[i];
    }
    return Status::OK();
  }

  // Slab offsets are {i0, ..., i_{k-1}, j, 0, ...} and sizes {1, ..., 1,
  // rows, d_{k+1}, ...}: indices of dims before k vary slowest, so the
  // slabs come in C order.
  Status StreamSlabs(size_t i) {
    const StreamItem& item = items_[i];
    const SlabShape s = ChooseSlabs(item, budget_);
    const size_t k = s.k;
    std::vector<int64_t> offsets(item.size.size(), 0);
    std::vector<int64_t> sizes = item.size;
    std::fill(sizes.begin(), sizes.begin() + static_cast<ptrdiff_t>(k), 1);
    while (true) {
      for (int64_t j = 0; j < item.size[k]; j += s.rows) {
        offsets[k] = j;
        sizes[k] = std::min(s.rows, item.size[k] - j);
        StateDict sd;
        sd[item.fqn] = ShardedTensor{
            item.dtype,
            item.size,
            {Shard{offsets,
                   TensorView::Contiguous(item.dtype, sizes, Buffer())}}};
        ROCKSDCP_RETURN_IF_ERROR(LoadChecked(&sd, i, i + 1));
        ROCKSDCP_RETURN_IF_ERROR(sink_(
            i, std::string_view(Buffer(),
                                static_cast<size_t>(sizes[k]) * s.row_bytes)));
      }
      // The next index of dims 0..k-1, odometer-wise; done once it wraps.
      size_t d = k;
      while (d > 0 && ++offsets[d - 1] == item.size[d - 1]) {
        offsets[--d] = 0;
      }
      if (d == 0) return Status::OK();
    }
  }

  CheckingReader reader_;
  const std::string& id_;
  const std::vector<StreamItem>& items_;
  const size_t budget_;
  const StreamSink& sink_;
  std::vector<size_t> nbytes_;
  std::vector<Group> groups_;
  size_t buffer_bytes_ = 0;
  std::unique_ptr<char[]> buffer_;
  bool checked_all_ = false;
};

}  // namespace

Status StreamTensors(StorageReader& reader, const std::string& id,
                     const std::vector<StreamItem>& items, size_t budget_bytes,
                     const StreamSink& sink) {
  if (budget_bytes < kMinBudgetBytes) {
    return Status::InvalidArgument(
        "tensor stream: budget of " + std::to_string(budget_bytes) +
        " bytes is below " + std::to_string(kMinBudgetBytes) +
        ", the largest element");
  }
  return Streamer(reader, id, items, budget_bytes, sink).Run();
}

}  // namespace rocksdcp::tools
