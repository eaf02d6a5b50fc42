// The staging protocol of an AsyncCheckpointer save, between the caller's
// thread, which copies tensors into the pool, and the storage's threads,
// which read them through the planner: Session holds the state of one
// save, which both share.
//
// Each tensor of the dict (a dense tensor, or one local shard) moves
// through these states, under Session::mu_:
//
//   unstaged --room in the pool--> staging --copied--> staged
//   unstaged --the storage resolves it first, no room--> live
//   staged, live, unstaged --its fqn released--> released
//
// The caller copies tensors in the dict's order. Until it is done or first
// has to wait for room, the storage waits (Save's blocking time is that
// copy; it should have the CPU). After that, they overlap, and a tensor the
// storage resolves before the caller reaches it is copied by the storage
// itself if there is room, or read from the caller's memory otherwise.
//
// Save returns when no tensor is unstaged, staging or live: every byte the
// storage may still read is then in the pool. The storage waits for the
// caller only for a copy in progress or while the caller stages without
// waiting, both of which end without waiting on the storage; the caller
// waits for room only until the storage frees some or claims that very
// tensor. So neither side can wait for the other for ever, whatever the
// budget.
//
// Memory is released per fqn, once every item of that fqn in this rank's
// final plan is released (SavePlanner::ReleaseData), because a planner may
// resolve any item of an fqn from any of the fqn's tensors. Everything is
// released when the storage's WriteData completes: by then it has read
// every item, whether or not it calls ReleaseData.

#ifndef ROCKSDCP_SRC_CORE_STAGING_SESSION_H_
#define ROCKSDCP_SRC_CORE_STAGING_SESSION_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rocksdcp/planner.h"
#include "rocksdcp/state_dict.h"
#include "util/staging_pool.h"

namespace rocksdcp::staging {

using util::StagingPool;

enum class State { kUnstaged, kStaging, kStaged, kLive, kReleased };

// The bytes a view's elements occupy, [lo, hi).
struct Span {
  const std::byte* lo;
  const std::byte* hi;
};

// REQUIRES: view.Validate().ok(), view.numel() > 0.
Span SpanOf(const TensorView& view) {
  const int64_t elem = static_cast<int64_t>(DTypeSize(view.dtype));
  const std::vector<int64_t> strides = view.EffectiveStrides();
  int64_t lo = 0;
  int64_t hi = elem;
  for (size_t d = 0; d < view.sizes.size(); ++d) {
    const int64_t reach = (view.sizes[d] - 1) * strides[d] * elem;
    (reach < 0 ? lo : hi) += reach;
  }
  const auto* data = static_cast<const std::byte*>(view.data);
  return Span{data + lo, data + hi};
}

// One tensor of the state dict: a dense tensor or one local shard.
struct Value {
  TensorView source;  // The caller's memory.
  Span span;
  uint64_t nbytes;
  // Staged as its contiguous projection, because its elements don't fill
  // their span (a slice of a larger buffer). Otherwise (contiguous, or
  // dense in another order, such as a transpose) the span is copied byte
  // for byte, one memcpy that keeps any view into it valid at the same
  // offset.
  bool packed;
  size_t fqn;  // Index into Session::fqns_.
  State state = State::kUnstaged;
  StagingPool::Block block;  // While staging or staged.
};

struct Fqn {
  std::vector<size_t> values;
  // Items of this fqn in the rank's final plan not yet released; -1 until
  // the plan is final.
  int64_t pending_items = -1;
  bool released = false;
};

// The state of one save, shared by the caller's thread and the worker's.
class Session {
 public:
  Session(const StateDict& state_dict, StagingPool* pool)
      : dict_(state_dict), pool_(pool) {
    for (const auto& [name, value] : dict_) {
      if (const auto* view = std::get_if<TensorView>(&value)) {
        Add(name, *view);
      } else if (const auto* st = std::get_if<ShardedTensor>(&value)) {
        for (const Shard& shard : st->local_shards) Add(name, shard.tensor);
      } else {
        staged_bytes_ += std::get<std::string>(value).size();
      }
    }
  }

  const StateDict& dict() const { return dict_; }

  // ---- The caller's thread ----

  // Copies every tensor the storage has not claimed into the pool, in the
  // dict's order, waiting for room as needed.
  void StageAll() {
    for (Value& v : values_) {
      std::unique_lock<std::mutex> lock(mu_);
      if (v.state != State::kUnstaged) continue;
      // Never fits: the storage will read it live.
      if (v.nbytes > pool_->capacity()) continue;
      const uint64_t touched = pool_->touched_bytes();
      std::optional<StagingPool::Block> block = pool_->Allocate(v.nbytes);
      if (!block) {
        // From now on staging and writing overlap: the storage frees room.
        LetStorageProceed();
        cv_.wait(lock, [&] {
          if (v.state != State::kUnstaged) return true;
          block = pool_->Allocate(v.nbytes);
          return block.has_value();
        });
      }
      if (block) CopyIn(v, *block, touched, lock);
    }
  }

  // Waits until the storage can read nothing more of the caller's memory,
  // then tells the worker the caller is done with the session.
  void WaitUntilSafe(AsyncSaveHandle* handle) {
    std::unique_lock<std::mutex> lock(mu_);
    LetStorageProceed();
    cv_.wait(lock, [&] { return unsafe_ == 0; });
    handle->staged_bytes = staged_bytes_;
    handle->live_bytes = live_bytes_;
    handle->first_touch_bytes = first_touch_bytes_;
    caller_done_ = true;
    cv_.notify_all();
  }

  // ---- The worker's thread and the storage's I/O threads ----

  // The final plan is known: tensors of fqns this rank does not write are
  // not needed (another rank writes them).
  void PlanFinished(const SavePlan& plan) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Fqn& f : fqns_) f.pending_items = 0;
    for (const WriteItem& item : plan.items) {
      auto it = fqn_index_.find(item.index.fqn);
      if (it != fqn_index_.end()) ++fqns_[it->second].pending_items;
    }
    for (Fqn& f : fqns_) {
      if (f.pending_items == 0) Release(f);
    }
    cv_.notify_all();
  }

  // Where the storage should read `item`, which the wrapped planner
  // resolved to `resolved`: the staged copy, or the caller's memory if the
  // tensor is not staged yet.
  Result<ResolvedData> Resolve(const WriteItem& item, ResolvedData resolved) {
    auto* view = std::get_if<TensorView>(&resolved);
    // Bytes live in dict_; an empty tensor reads nothing.
    if (view == nullptr || view->numel() == 0) return resolved;
    const auto* data = static_cast<const std::byte*>(view->data);
    std::unique_lock<std::mutex> lock(mu_);
    auto it = fqn_index_.find(item.index.fqn);
    if (it == fqn_index_.end()) return resolved;
    Value* v = nullptr;
    for (size_t i : fqns_[it->second].values) {
      if (data >= values_[i].span.lo && data < values_[i].span.hi) {
        v = &values_[i];
        break;
      }
    }
    // Memory the planner owns.
    if (v == nullptr) return resolved;
    // While the caller copies without waiting for room, the storage waits:
    // writing would take CPU and memory bandwidth from the copy, which is
    // what Save blocks on. (With 2 busy cores, writing at once made the copy
    // of 1 GiB take 2-3x as long.) A tensor the pool can't hold is read at
    // once, since Save waits for it anyway.
    cv_.wait(lock, [&] {
      switch (v->state) {
        case State::kStaging:
          return false;
        case State::kUnstaged:
        case State::kStaged:
          return storage_may_proceed_ || v->nbytes > pool_->capacity();
        case State::kLive:
        case State::kReleased:
          break;
      }
      return true;
    });
    if (v->state == State::kUnstaged) {
      // The storage got here before the caller. Copy the tensor here if
      // there is room: Save then waits for this memcpy only, where a live
      // tensor would hold it until the storage has written it.
      const uint64_t touched = pool_->touched_bytes();
      std::optional<StagingPool::Block> block;
      if (v->nbytes <= pool_->capacity()) block = pool_->Allocate(v->nbytes);
      if (block) CopyIn(*v, *block, touched, lock);
    }
    switch (v->state) {
      case State::kUnstaged:
        live_bytes_ += v->nbytes;
        SetState(*v, State::kLive);
        cv_.notify_all();
        return resolved;
      case State::kLive:
        return resolved;
      case State::kStaged:
        return Translate(item, *v, *view);
      case State::kStaging:
      case State::kReleased:
        break;
    }
    return Status::FailedPrecondition(
        "item '" + item.index.ToString() +
        "' was resolved after the storage released it");
  }

  void ReleaseItem(const WriteItem& item) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = fqn_index_.find(item.index.fqn);
    if (it == fqn_index_.end()) return;
    Fqn& f = fqns_[it->second];
    if (f.pending_items <= 0) return;
    if (--f.pending_items == 0) {
      Release(f);
      cv_.notify_all();
    }
  }

  // The storage reads nothing more: its WriteData completed, or the save
  // ended before it began.
  void ReleaseAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (Fqn& f : fqns_) Release(f);
    cv_.notify_all();
  }

  // Ends the session on the worker: afterwards no one uses the pool.
  void Finish() {
    ReleaseAll();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return caller_done_; });
  }

 private:
  void Add(const std::string& name, const TensorView& view) {
    // An invalid view fails planning (or the storage's own checks); an
    // empty one has nothing to copy. Neither is staged nor waited for.
    if (!view.Validate(name).ok() || view.numel() == 0) return;
    auto [it, inserted] = fqn_index_.try_emplace(name, fqns_.size());
    if (inserted) fqns_.emplace_back();
    fqns_[it->second].values.push_back(values_.size());
    Value v;
    v.source = view;
    v.span = SpanOf(view);
    v.nbytes = view.nbytes();
    v.packed = static_cast<uint64_t>(v.span.hi - v.span.lo) != v.nbytes;
    v.fqn = it->second;
    values_.push_back(std::move(v));
    ++unsafe_;
  }

  // Copies unstaged `v` into `block`, which was allocated for it after the
  // pool had `touched_before` touched bytes. The copy runs without mu_, so
  // that others proceed meanwhile; `v` is kStaging until it is done.
  // REQUIRES: `lock` holds mu_.
  void CopyIn(Value& v, const StagingPool::Block& block,
              uint64_t touched_before, std::unique_lock<std::mutex>& lock) {
    first_touch_bytes_ += pool_->touched_bytes() - touched_before;
    v.block = block;
    SetState(v, State::kStaging);
    lock.unlock();

    void* dst = v.block.data;
    if (!v.packed) {
      std::memcpy(dst, v.span.lo, v.nbytes);
    } else {
      CopyTensor(v.source,
                 TensorView::Contiguous(v.source.dtype, v.source.sizes, dst));
    }

    lock.lock();
    staged_bytes_ += v.nbytes;
    if (fqns_[v.fqn].released) {
      pool_->Free(v.block);
      SetState(v, State::kReleased);
    } else {
      SetState(v, State::kStaged);
    }
    cv_.notify_all();
  }

  // REQUIRES: mu_ held.
  void LetStorageProceed() {
    if (storage_may_proceed_) return;
    storage_may_proceed_ = true;
    cv_.notify_all();
  }

  static bool IsUnsafe(State s) {
    return s == State::kUnstaged || s == State::kStaging || s == State::kLive;
  }

  void SetState(Value& v, State s) {
    unsafe_ += static_cast<int64_t>(IsUnsafe(s)) -
               static_cast<int64_t>(IsUnsafe(v.state));
    v.state = s;
  }

  // REQUIRES: mu_ held. A tensor being copied is freed by the caller once
  // the copy is done.
  void Release(Fqn& f) {
    f.released = true;
    for (size_t i : f.values) {
      Value& v = values_[i];
      if (v.state == State::kStaged) pool_->Free(v.block);
      if (v.state != State::kStaging) SetState(v, State::kReleased);
    }
  }

  // The staged counterpart of `view`, a view into `v.source`.
  static Result<ResolvedData> Translate(const WriteItem& item, const Value& v,
                                        const TensorView& view) {
    std::byte* staged = v.block.data;
    if (!v.packed) {
      const Span span = SpanOf(view);
      if (span.lo < v.span.lo || span.hi > v.span.hi) {
        return Status::InvalidArgument(
            "item '" + item.index.ToString() +
            "': the planner resolved it to memory that starts inside a "
            "tensor of its fqn but runs past its end");
      }
      TensorView out = view;
      out.data =
          staged + (static_cast<const std::byte*>(view.data) - v.span.lo);
      return ResolvedData(std::move(out));
    }
    // A packed copy is the whole tensor's contiguous projection: only the
    // whole view maps into it.
    if (view.data == v.source.data && view.dtype == v.source.dtype &&
        view.sizes == v.source.sizes &&
        view.EffectiveStrides() == v.source.EffectiveStrides()) {
      return ResolvedData(
          TensorView::Contiguous(view.dtype, view.sizes, staged));
    }
    return Status::NotSupported(
        "item '" + item.index.ToString() +
        "': the planner resolved it to part of a tensor with gaps between "
        "its elements (a slice of a larger buffer), which is staged packed; "
        "only the whole tensor can be read from the copy");
  }

  const StateDict dict_;
  StagingPool* const pool_;

  std::mutex mu_;
  std::condition_variable cv_;
  // The constructor fixes which values and fqns there are and what each
  // is; their states, blocks and counts are guarded by mu_, like the rest.
  std::vector<Value> values_;
  std::vector<Fqn> fqns_;
  std::unordered_map<std::string, size_t> fqn_index_;
  int64_t unsafe_ = 0;  // Values unstaged, staging or live.
  // The caller has finished staging or has waited for room: the storage
  // may then take unstaged tensors instead of waiting for the caller.
  bool storage_may_proceed_ = false;
  bool caller_done_ = false;
  uint64_t staged_bytes_ = 0;
  uint64_t live_bytes_ = 0;
  uint64_t first_touch_bytes_ = 0;
};

}  // namespace rocksdcp::staging

#endif  // ROCKSDCP_SRC_CORE_STAGING_SESSION_H_
