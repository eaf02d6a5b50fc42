// rocksdcp._rocksdcp: the Python binding's native module. It converts and
// calls; every rule lives in the C++ library. A Status that is not OK
// becomes an exception of the class rocksdcp/_errors.py defines for its
// code, with the library's message. Long calls (saves, loads, verify, gc)
// run without the GIL.
//
// The storage steps take and return rocksdcp's own data model (bound
// here, field for field, as in include/rocksdcp/metadata.h); the package's
// Python code maps PyTorch's DCP objects onto it. Data crosses as views:
// a tensor as (data pointer, dtype name, sizes, strides) of memory that the
// caller keeps alive, bytes as Python bytes objects.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "rocksdcp/rocksdcp.h"

namespace py = pybind11;

namespace rocksdcp::python {
namespace {

// ---- Errors ----

// The exception class of each StatusCode, from rocksdcp/_errors.py.
std::map<StatusCode, py::object>& ErrorClasses() {
  static auto* classes = new std::map<StatusCode, py::object>();
  return *classes;
}

[[noreturn]] void Raise(const Status& s) {
  auto& classes = ErrorClasses();
  auto it = classes.find(s.code());
  PyObject* type = it != classes.end() ? it->second.ptr() : PyExc_RuntimeError;
  PyErr_SetString(type, s.message().c_str());
  throw py::error_already_set();
}

void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

template <typename T>
T Unwrap(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}

// ---- Data crossing ----

// A tensor the Python side resolved: its memory stays alive in Python.
TensorView ViewFrom(const py::tuple& t) {
  if (t.size() != 4) {
    throw py::value_error("a tensor view is (data_ptr, dtype, sizes, strides)");
  }
  TensorView v;
  v.data = reinterpret_cast<void*>(t[0].cast<uintptr_t>());
  v.dtype = Unwrap(DTypeFromName(t[1].cast<std::string>()));
  v.sizes = t[2].cast<std::vector<int64_t>>();
  v.strides = t[3].cast<std::vector<int64_t>>();
  return v;
}

// What WriteData resolves each item to: Python's `resolve(i)` for the
// plan's item i, asked only when the writer is about to write it, as torch
// asks of a storage (a planner may copy or allocate in resolve_data), and
// let go of once it is written (ReleaseData): a save holds only the items
// its writer threads are writing. `resolve(i)` returns bytes (any object
// with the buffer protocol) or a tensor view tuple plus the object that
// keeps its memory alive: (data, owner).
class CallbackSavePlanner : public SavePlanner {
 public:
  CallbackSavePlanner(const SavePlan& plan, py::function resolve)
      : resolve_(std::move(resolve)) {
    for (size_t i = 0; i < plan.items.size(); ++i) {
      position_.emplace(plan.items[i].index, i);
    }
  }

  Status SetUpPlanner(const StateDict*, const std::optional<StorageMeta>&,
                      bool) override {
    return Unused();
  }
  Result<SavePlan> CreateLocalPlan() override { return Unused(); }
  Result<GlobalSavePlan> CreateGlobalPlan(std::vector<SavePlan>) override {
    return Unused();
  }
  Result<SavePlan> FinishPlan(SavePlan) override { return Unused(); }
  // Called from the writer's threads, without the GIL.
  Result<ResolvedData> ResolveData(const WriteItem& item) override {
    auto it = position_.find(item.index);
    if (it == position_.end()) {
      return Status::NotFound("write item " + item.index.ToString() +
                              " is not in the plan");
    }
    const size_t i = it->second;
    py::gil_scoped_acquire acquire;
    try {
      py::tuple got = resolve_(i);
      py::object data = got[0];
      ResolvedData resolved;
      if (py::isinstance<py::tuple>(data)) {
        resolved = ViewFrom(data.cast<py::tuple>());
      } else {
        py::buffer_info buffer = py::buffer(data).request();
        resolved = std::string_view(
            static_cast<const char*>(buffer.ptr),
            static_cast<size_t>(buffer.size * buffer.itemsize));
      }
      owners_[i] = got[1];
      return resolved;
    } catch (py::error_already_set& e) {
      // The Python exception itself reaches the caller (Rethrow), not a
      // Status that would lose its type.
      std::string message = e.what();
      if (!error_) error_ = std::move(e);
      return Status::Aborted("resolving write item " + item.index.ToString() +
                             " raised: " + message);
    } catch (const std::exception& e) {
      return Status::InvalidArgument("write item " + item.index.ToString() +
                                     ": " + e.what());
    }
  }
  void ReleaseData(const WriteItem& item) override {
    auto it = position_.find(item.index);
    if (it == position_.end()) return;
    py::gil_scoped_acquire acquire;
    owners_.erase(it->second);
  }
  // Raises what resolve(i) raised, if it did. REQUIRES: the GIL.
  void Rethrow() {
    if (error_) {
      py::error_already_set e = std::move(*error_);
      error_.reset();
      throw e;
    }
  }

 private:
  static Status Unused() {
    return Status::Internal("the binding's save planner only resolves data");
  }
  py::function resolve_;
  std::unordered_map<MetadataIndex, size_t, MetadataIndexHash> position_;
  // What keeps each resolved item's memory alive until it is written.
  // Guarded by the GIL.
  std::map<size_t, py::object> owners_;
  std::optional<py::error_already_set> error_;
};

// A read item's identity: the plan may name one destination in several.
using ReadKey = std::tuple<std::string, std::optional<std::vector<int64_t>>,
                           std::vector<int64_t>, std::string,
                           std::optional<std::vector<int64_t>>,
                           std::vector<int64_t>, std::vector<int64_t>>;
ReadKey KeyOf(const ReadItem& r) {
  return {r.dest_index.fqn,
          r.dest_index.offset,
          r.dest_offsets,
          r.storage_index.fqn,
          r.storage_index.offset,
          r.storage_offsets,
          r.lengths};
}

// What ReadData writes into: the views Python resolved, by read item; byte
// items are kept, by position, for Python's planner to load.
class ResolvedLoadPlanner : public LoadPlanner {
 public:
  ResolvedLoadPlanner(const LoadPlan& plan,
                      const std::vector<std::optional<TensorView>>& views) {
    for (size_t i = 0; i < plan.items.size(); ++i) {
      position_.emplace(KeyOf(plan.items[i]), i);
      if (views[i]) views_.emplace(i, *views[i]);
    }
  }
  Status SetUpPlanner(StateDict*, const Metadata*, bool) override {
    return Unused();
  }
  Result<LoadPlan> CreateLocalPlan() override { return Unused(); }
  Result<std::vector<LoadPlan>> CreateGlobalPlan(
      std::vector<LoadPlan>) override {
    return Unused();
  }
  Result<LoadPlan> FinishPlan(LoadPlan) override { return Unused(); }
  Status LoadBytes(const ReadItem& item, std::string_view data) override {
    ROCKSDCP_ASSIGN_OR_RETURN(size_t i, Position(item));
    std::lock_guard<std::mutex> lock(mu_);
    bytes_[i] = std::string(data);
    return Status::OK();
  }
  Result<TensorView> ResolveTensor(const ReadItem& item) override {
    ROCKSDCP_ASSIGN_OR_RETURN(size_t i, Position(item));
    auto it = views_.find(i);
    if (it == views_.end()) {
      return Status::InvalidArgument("read item " + item.dest_index.ToString() +
                                     " has no destination tensor");
    }
    return it->second;
  }
  Status CommitTensor(const ReadItem&, const TensorView&) override {
    return Status::OK();  // Python's planner commits once all are read.
  }

  std::map<size_t, std::string> TakeBytes() { return std::move(bytes_); }

 private:
  static Status Unused() {
    return Status::Internal("the binding's load planner only resolves reads");
  }
  Result<size_t> Position(const ReadItem& item) const {
    auto it = position_.find(KeyOf(item));
    if (it == position_.end()) {
      return Status::NotFound("read item " + item.dest_index.ToString() +
                              " is not in the plan");
    }
    return it->second;
  }
  std::map<ReadKey, size_t> position_;
  std::map<size_t, TensorView> views_;
  std::mutex mu_;
  std::map<size_t, std::string> bytes_;
};

// ---- Store, writer, reader ----

// The stores this process holds open read-write (or as a follower), by
// path: RocksDB lets one handle per process write a store, so every writer
// and Store object of the process that writes the same path shares it.
std::shared_ptr<Store> OpenShared(const std::string& path,
                                  const StoreOptions& options,
                                  bool share_writable_for_reads) {
  static std::mutex mu;
  static auto* open = new std::map<std::string, std::weak_ptr<Store>>();
  std::error_code ec;
  std::string key =
      std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec)
          .string();
  if (ec) key = std::filesystem::absolute(path).lexically_normal().string();
  const std::string writable = key + (options.follower ? "\n(follower)" : "");
  // Opened under the lock, so that two threads opening one store (two
  // saves of async_save at once) share one handle; without the GIL, which
  // a thread waiting for the lock may hold.
  Result<std::shared_ptr<Store>> store =
      [&]() -> Result<std::shared_ptr<Store>> {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu);
    if (!options.read_only || share_writable_for_reads) {
      if (auto it = open->find(writable); it != open->end()) {
        if (auto shared = it->second.lock()) return shared;
      }
    }
    ROCKSDCP_ASSIGN_OR_RETURN(std::unique_ptr<Store> made,
                              Store::Open(path, options));
    std::shared_ptr<Store> shared(std::move(made));
    if (!options.read_only) (*open)[writable] = shared;
    return shared;
  }();
  return Unwrap(std::move(store));
}

// A Store that Python may close while writers and readers it made still
// run: they hold it too.
struct PyStore {
  std::shared_ptr<Store> store;

  Store& Get() const {
    if (!store) Raise(Status::FailedPrecondition("the store is closed"));
    return *store;
  }
};

struct PyWriter {
  std::shared_ptr<Store> store;
  std::unique_ptr<RocksDBStorageWriter> writer;
};

struct PyReader {
  std::shared_ptr<Store> store;
  std::unique_ptr<RocksDBStorageReader> reader;
  // ReadMetadata's result, which SetUpStorageReader requires to outlive
  // the read.
  std::unique_ptr<Metadata> metadata;
};

py::bytes Bytes(const std::string& s) { return py::bytes(s); }

py::dict InfoDict(const CheckpointInfo& c) {
  py::dict d;
  d["id"] = c.id;
  d["column_family"] = c.column_family;
  d["created_unix_micros"] = c.created_unix_micros;
  d["bytes"] = c.bytes;
  d["items"] = c.items;
  d["world_size"] = c.world_size;
  d["metadata_checksum"] = c.metadata_checksum;
  d["referenced_column_families"] = c.referenced_column_families;
  d["referenced_bytes"] = c.referenced_bytes;
  d["stored_bytes"] = c.stored_bytes;
  d["freed_by_delete"] = c.freed_by_delete;
  d["damage"] = c.damage;
  return d;
}

py::dict VerifyDict(const VerifyReport& report) {
  py::list checkpoints;
  for (const CheckpointVerifyReport& c : report.checkpoints) {
    py::list problems, damaged;
    for (const VerifyProblem& p : c.problems) {
      py::dict d;
      d["item"] = p.item ? py::cast(p.item->ToString()) : py::none();
      d["piece"] = p.piece ? py::cast(*p.piece) : py::none();
      d["code"] = std::string(StatusCodeName(p.status.code()));
      d["message"] = p.status.message();
      problems.append(d);
    }
    for (const DamagedItem& item : c.damaged_items) {
      py::dict d;
      d["fqn"] = item.fqn;
      d["bad_pieces"] = item.bad_pieces;
      d["problems"] = item.problems;
      d["first_problem"] = item.first_problem.message();
      damaged.append(d);
    }
    py::dict d;
    d["checkpoint_id"] = c.checkpoint_id;
    d["ok"] = c.ok();
    d["items_checked"] = c.items_checked;
    d["pieces_checked"] = c.pieces_checked;
    d["bytes_checked"] = c.bytes_checked;
    d["problems"] = problems;
    d["unlisted_problems"] = c.unlisted_problems;
    d["damaged_items"] = damaged;
    checkpoints.append(d);
  }
  py::dict out;
  out["ok"] = report.ok();
  out["checkpoints"] = checkpoints;
  return out;
}

// The item types, and MetadataIndex: what names an item.
void BindItemNames(py::module_& m) {
  py::enum_<WriteItemType>(m, "WriteItemType")
      .value("TENSOR", WriteItemType::kTensor)
      .value("SHARD", WriteItemType::kShard)
      .value("BYTE_IO", WriteItemType::kByteIO);
  py::enum_<LoadItemType>(m, "LoadItemType")
      .value("TENSOR", LoadItemType::kTensor)
      .value("BYTE_IO", LoadItemType::kByteIO);

  py::class_<MetadataIndex>(m, "MetadataIndex")
      .def(py::init([](std::string fqn,
                       std::optional<std::vector<int64_t>> offset,
                       std::optional<int32_t> index) {
             MetadataIndex i(std::move(fqn));
             i.offset = std::move(offset);
             i.index = index;
             return i;
           }),
           py::arg("fqn"), py::arg("offset") = py::none(),
           py::arg("index") = py::none())
      .def_readwrite("fqn", &MetadataIndex::fqn)
      .def_readwrite("offset", &MetadataIndex::offset)
      .def_readwrite("index", &MetadataIndex::index)
      .def("__repr__", &MetadataIndex::ToString);
}

// Metadata and what it holds of each item.
void BindMetadata(py::module_& m) {
  py::class_<ChunkStorageMetadata>(m, "ChunkStorageMetadata")
      .def(py::init([](std::vector<int64_t> offsets,
                       std::vector<int64_t> sizes) {
             return ChunkStorageMetadata{std::move(offsets), std::move(sizes)};
           }),
           py::arg("offsets"), py::arg("sizes"))
      .def_readwrite("offsets", &ChunkStorageMetadata::offsets)
      .def_readwrite("sizes", &ChunkStorageMetadata::sizes);

  // dtype by torch's name ("float32", "bfloat16"); the memory format as
  // torch's MEM_FORMAT_ENCODING numbers it; layout is strided.
  py::class_<TensorProperties>(m, "TensorProperties")
      .def(py::init([](const std::string& dtype, bool requires_grad,
                       int memory_format, bool pin_memory) {
             TensorProperties p;
             p.dtype = Unwrap(DTypeFromName(dtype));
             p.requires_grad = requires_grad;
             if (memory_format < 0 || memory_format > 2) {
               Raise(Status::InvalidArgument("memory format " +
                                             std::to_string(memory_format) +
                                             " is not 0, 1 or 2"));
             }
             p.memory_format = static_cast<MemoryFormat>(memory_format);
             p.pin_memory = pin_memory;
             return p;
           }),
           py::arg("dtype"), py::arg("requires_grad") = false,
           py::arg("memory_format") = 0, py::arg("pin_memory") = false)
      .def_property_readonly("dtype",
                             [](const TensorProperties& p) {
                               return std::string(DTypeName(p.dtype));
                             })
      .def_readonly("requires_grad", &TensorProperties::requires_grad)
      .def_property_readonly("memory_format",
                             [](const TensorProperties& p) {
                               return static_cast<int>(p.memory_format);
                             })
      .def_readonly("pin_memory", &TensorProperties::pin_memory);

  py::class_<TensorStorageMetadata>(m, "TensorStorageMetadata")
      .def(py::init([](TensorProperties properties, std::vector<int64_t> size,
                       std::vector<ChunkStorageMetadata> chunks) {
             return TensorStorageMetadata{properties, std::move(size),
                                          std::move(chunks)};
           }),
           py::arg("properties"), py::arg("size"), py::arg("chunks"))
      .def_readwrite("properties", &TensorStorageMetadata::properties)
      .def_readwrite("size", &TensorStorageMetadata::size)
      .def_readwrite("chunks", &TensorStorageMetadata::chunks);
  py::class_<BytesStorageMetadata>(m, "BytesStorageMetadata").def(py::init<>());

  py::class_<StorageMeta>(m, "StorageMeta")
      .def(py::init<>())
      .def_readwrite("checkpoint_id", &StorageMeta::checkpoint_id)
      .def_readwrite("save_id", &StorageMeta::save_id)
      .def_readwrite("load_id", &StorageMeta::load_id)
      .def_readwrite("modules", &StorageMeta::modules);

  py::class_<Metadata>(m, "Metadata")
      .def(py::init<>())
      .def_readwrite("state_dict_metadata", &Metadata::state_dict_metadata)
      .def_property(
          "planner_data",
          [](const Metadata& md) { return Bytes(md.planner_data); },
          [](Metadata& md, const py::bytes& b) { md.planner_data = b; })
      .def_readwrite("storage_meta", &Metadata::storage_meta)
      .def_readonly("version", &Metadata::version);
}

// A save's plans and what write_data reports.
void BindSavePlans(py::module_& m) {
  py::class_<TensorWriteData>(m, "TensorWriteData")
      .def(py::init([](ChunkStorageMetadata chunk, TensorProperties properties,
                       std::vector<int64_t> size) {
             return TensorWriteData{std::move(chunk), properties,
                                    std::move(size)};
           }),
           py::arg("chunk"), py::arg("properties"), py::arg("size"))
      .def_readwrite("chunk", &TensorWriteData::chunk)
      .def_readwrite("properties", &TensorWriteData::properties)
      .def_readwrite("size", &TensorWriteData::size);

  py::class_<WriteItem>(m, "WriteItem")
      .def(py::init([](MetadataIndex index, WriteItemType type,
                       std::optional<TensorWriteData> tensor_data) {
             return WriteItem{std::move(index), type, std::move(tensor_data)};
           }),
           py::arg("index"), py::arg("type"),
           py::arg("tensor_data") = py::none())
      .def_readwrite("index", &WriteItem::index)
      .def_readwrite("type", &WriteItem::type)
      .def_readwrite("tensor_data", &WriteItem::tensor_data);

  py::class_<SavePlan>(m, "SavePlan")
      .def(py::init([](std::vector<WriteItem> items,
                       const py::bytes& storage_data,
                       const py::bytes& planner_data, bool usable) {
             return SavePlan{std::move(items), storage_data, planner_data,
                             usable};
           }),
           py::arg("items"), py::arg("storage_data") = py::bytes(),
           py::arg("planner_data") = py::bytes(), py::arg("usable") = true)
      .def_readwrite("items", &SavePlan::items)
      .def_property_readonly(
          "storage_data",
          [](const SavePlan& p) { return Bytes(p.storage_data); })
      .def_property_readonly(
          "planner_data",
          [](const SavePlan& p) { return Bytes(p.planner_data); })
      .def_readwrite("usable", &SavePlan::usable);

  py::class_<WriteResult>(m, "WriteResult")
      .def(py::init([](MetadataIndex index, uint64_t size_in_bytes,
                       const py::bytes& storage_data) {
             return WriteResult{std::move(index), size_in_bytes, storage_data};
           }),
           py::arg("index"), py::arg("size_in_bytes"), py::arg("storage_data"))
      .def_readwrite("index", &WriteResult::index)
      .def_readwrite("size_in_bytes", &WriteResult::size_in_bytes)
      .def_property_readonly("storage_data", [](const WriteResult& r) {
        return Bytes(r.storage_data);
      });
}

// A load's plans.
void BindLoadPlans(py::module_& m) {
  py::class_<ReadItem>(m, "ReadItem")
      .def(py::init([](LoadItemType type, MetadataIndex dest_index,
                       std::vector<int64_t> dest_offsets,
                       MetadataIndex storage_index,
                       std::vector<int64_t> storage_offsets,
                       std::vector<int64_t> lengths) {
             return ReadItem{type,
                             std::move(dest_index),
                             std::move(dest_offsets),
                             std::move(storage_index),
                             std::move(storage_offsets),
                             std::move(lengths)};
           }),
           py::arg("type"), py::arg("dest_index"), py::arg("dest_offsets"),
           py::arg("storage_index"), py::arg("storage_offsets"),
           py::arg("lengths"))
      .def_readwrite("type", &ReadItem::type)
      .def_readwrite("dest_index", &ReadItem::dest_index)
      .def_readwrite("dest_offsets", &ReadItem::dest_offsets)
      .def_readwrite("storage_index", &ReadItem::storage_index)
      .def_readwrite("storage_offsets", &ReadItem::storage_offsets)
      .def_readwrite("lengths", &ReadItem::lengths);

  py::class_<LoadPlan>(m, "LoadPlan")
      .def(py::init([](std::vector<ReadItem> items,
                       const py::bytes& storage_data,
                       const py::bytes& planner_data) {
             return LoadPlan{std::move(items), storage_data, planner_data};
           }),
           py::arg("items"), py::arg("storage_data") = py::bytes(),
           py::arg("planner_data") = py::bytes())
      .def_readwrite("items", &LoadPlan::items)
      .def_property_readonly(
          "storage_data",
          [](const LoadPlan& p) { return Bytes(p.storage_data); })
      .def_property_readonly("planner_data", [](const LoadPlan& p) {
        return Bytes(p.planner_data);
      });
}

void BindDataModel(py::module_& m) {
  BindItemNames(m);
  BindMetadata(m);
  BindSavePlans(m);
  BindLoadPlans(m);
}

py::dict GcDict(const GcReport& r) {
  py::dict d;
  d["dropped_column_families"] = r.dropped_column_families;
  d["deleted_staging_files"] = r.deleted_staging_files;
  d["freed_bytes"] = r.freed_bytes;
  return d;
}

// Store.verify: Store::Verify of `ids` (every checkpoint if empty), with
// `progress(bytes_done, bytes_total)` called as it goes (None: not).
py::dict VerifyStore(const PyStore& s, std::vector<std::string> ids,
                     uint64_t max_problems, const py::object& progress) {
  Store& store = s.Get();
  VerifyOptions options;
  options.checkpoint_ids = std::move(ids);
  options.max_problems = max_problems;
  if (!progress.is_none()) {
    // Called with the GIL released: take it for the call.
    options.progress = [progress](const Progress& p) {
      py::gil_scoped_acquire acquire;
      try {
        progress(p.bytes_done, p.bytes_total);
      } catch (py::error_already_set& e) {
        // Nothing may unwind through the library: report it as Python
        // reports errors it can't raise, and go on.
        e.discard_as_unraisable("rocksdcp verify's progress callback");
      }
    };
  }
  Result<VerifyReport> r = [&] {
    py::gil_scoped_release release;
    return store.Verify(options);
  }();
  return VerifyDict(Unwrap(std::move(r)));
}

// Store.new_writer. 0 for max_piece_bytes, memory_budget and
// writable_file_max_buffer_size: the library's default.
PyWriter NewWriter(const PyStore& s, bool overwrite, uint64_t max_piece_bytes,
                   const std::string& base, bool base_on_newest,
                   const std::string& compress, int write_threads,
                   bool use_direct_writes, uint64_t memory_budget,
                   uint64_t writable_file_max_buffer_size) {
  RocksDBWriterOptions options;
  options.overwrite = overwrite;
  if (max_piece_bytes != 0) options.max_piece_bytes = max_piece_bytes;
  options.write_threads = write_threads;
  options.use_direct_writes = use_direct_writes;
  if (memory_budget != 0) options.memory_budget = memory_budget;
  if (writable_file_max_buffer_size != 0) {
    options.writable_file_max_buffer_size = writable_file_max_buffer_size;
  }
  options.base = base;
  options.base_on_newest = base_on_newest;
  // "", "always" or "when_disk_bound" (CompressionPolicy).
  if (compress == "always" || compress == "when_disk_bound") {
    options.compression = Compression::kBytePlaneZstd;
    options.compression_policy = compress == "always"
                                     ? CompressionPolicy::kAlways
                                     : CompressionPolicy::kWhenDiskBound;
  } else if (!compress.empty()) {
    throw py::value_error(
        "compress must be '', 'always' or 'when_disk_bound', not '" + compress +
        "'");
  }
  return PyWriter{s.store, Unwrap(s.Get().NewWriter(options))};
}

// Reader.check_destinations: (fqn, dtype name or None for bytes, global
// size, whether the dtype must match) of each destination, checked against
// read_metadata's result.
void CheckDestinations(
    PyReader& r,
    const std::vector<std::tuple<std::string, std::optional<std::string>,
                                 std::vector<int64_t>, bool>>& dests) {
  if (!r.metadata) {
    Raise(Status::FailedPrecondition(
        "check_destinations called before read_metadata"));
  }
  std::vector<LoadDestination> out;
  for (const auto& [fqn, dtype, size, check_dtype] : dests) {
    LoadDestination d;
    d.fqn = fqn;
    d.is_bytes = !dtype.has_value();
    d.check_dtype = check_dtype;
    if (dtype) d.dtype = Unwrap(DTypeFromName(*dtype));
    d.size = size;
    out.push_back(std::move(d));
  }
  Check(CheckLoadDestinations(*r.metadata, out));
}

// Reader.read_data: `views[i]` is the destination of plan.items[i], a
// tensor view, or None for a byte item. Returns {position: bytes} of the
// byte items.
py::dict ReadData(PyReader& r, const LoadPlan& plan, const py::list& views) {
  if (views.size() != plan.items.size()) {
    throw py::value_error("one destination per plan item");
  }
  std::vector<std::optional<TensorView>> dests;
  for (const py::handle& v : views) {
    if (v.is_none()) {
      dests.emplace_back();
    } else {
      dests.emplace_back(ViewFrom(v.cast<py::tuple>()));
    }
  }
  ResolvedLoadPlanner planner(plan, dests);
  Status s = [&] {
    py::gil_scoped_release release;
    return r.reader->ReadData(plan, planner).get();
  }();
  Check(s);
  py::dict out;
  for (auto& [i, bytes] : planner.TakeBytes()) {
    out[py::int_(i)] = py::bytes(bytes);
  }
  return out;
}

// Store's calls on its checkpoints as a whole: list, info, delete, gc,
// keep_last, verify.
void BindStoreCatalog(py::class_<PyStore>& store_class) {
  store_class
      .def("list",
           [](const PyStore& s) {
             Store& store = s.Get();
             Result<std::vector<CheckpointInfo>> list = [&] {
               py::gil_scoped_release release;
               return store.List();
             }();
             py::list out;
             for (const CheckpointInfo& c : Unwrap(std::move(list))) {
               out.append(InfoDict(c));
             }
             return out;
           })
      .def("info",
           [](const PyStore& s, const std::string& id) {
             Store& store = s.Get();
             Result<CheckpointInfo> info = [&] {
               py::gil_scoped_release release;
               return store.Info(id);
             }();
             return InfoDict(Unwrap(std::move(info)));
           })
      .def("delete",
           [](const PyStore& s, const std::string& id) {
             Store& store = s.Get();
             Status st = [&] {
               py::gil_scoped_release release;
               return store.Delete(id);
             }();
             Check(st);
           })
      .def(
          "gc",
          [](const PyStore& s, bool dry_run) {
            Store& store = s.Get();
            Result<GcReport> gc = [&] {
              py::gil_scoped_release release;
              return store.CollectGarbage(dry_run);
            }();
            return GcDict(Unwrap(std::move(gc)));
          },
          py::arg("dry_run") = false)
      .def(
          "keep_last",
          [](const PyStore& s, uint64_t n) {
            Store& store = s.Get();
            Result<RetentionReport> r = [&] {
              py::gil_scoped_release release;
              return store.KeepLast(n);
            }();
            RetentionReport report = Unwrap(std::move(r));
            py::dict d;
            d["kept"] = report.kept;
            d["deleted"] = report.deleted;
            return d;
          },
          py::arg("n"))
      .def("verify", &VerifyStore, py::arg("ids") = std::vector<std::string>(),
           py::arg("max_problems") = 10000, py::arg("progress") = py::none());
}

// Store's reads: byte items, metadata, and a reader.
void BindStoreReads(py::class_<PyStore>& store_class) {
  store_class
      .def("load_bytes",
           // The byte items `fqns` of checkpoint `id`, as bytes: Load() of
           // checkpoint.h on one rank.
           [](const PyStore& s, const std::string& id,
              const std::vector<std::string>& fqns) {
             Store& store = s.Get();
             StateDict dict;
             for (const std::string& fqn : fqns) dict[fqn] = std::string();
             Status st = [&] {
               py::gil_scoped_release release;
               ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store.NewReader());
               return Load(&dict, *reader, {.checkpoint_id = id});
             }();
             Check(st);
             py::dict out;
             for (const auto& [fqn, value] : dict) {
               out[py::str(fqn)] = py::bytes(std::get<std::string>(value));
             }
             return out;
           })
      .def("metadata",
           // Checkpoint `id`'s metadata, as its reader reads it.
           [](const PyStore& s, const std::string& id) {
             Store& store = s.Get();
             Result<Metadata> md = [&]() -> Result<Metadata> {
               py::gil_scoped_release release;
               ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store.NewReader());
               ROCKSDCP_RETURN_IF_ERROR(reader->Reset(id));
               return reader->ReadMetadata();
             }();
             return Unwrap(std::move(md));
           })
      .def("new_reader", [](const PyStore& s) {
        return PyReader{s.store, Unwrap(s.Get().NewReader()), nullptr};
      });
}

void BindWriter(py::module_& m) {
  py::class_<PyWriter>(m, "Writer")
      .def_static("validate_checkpoint_id",
                  [](const std::string& id) {
                    Check(RocksDBStorageWriter::ValidateCheckpointId(id));
                  })
      .def(
          "reset",
          [](PyWriter& w, const std::string& id, const std::string& save_id) {
            Check(save_id.empty() ? w.writer->Reset(id)
                                  : w.writer->ResetWithSaveId(id, save_id));
          },
          py::arg("checkpoint_id"), py::arg("save_id") = "")
      .def("set_up",
           [](PyWriter& w, bool is_coordinator, int rank, int world_size) {
             Status s = [&] {
               py::gil_scoped_release release;
               return w.writer->SetUpStorageWriter(is_coordinator, rank,
                                                   world_size);
             }();
             Check(s);
           })
      .def("prepare_local_plan",
           [](PyWriter& w, SavePlan plan) {
             return Unwrap(w.writer->PrepareLocalPlan(std::move(plan)));
           })
      .def("prepare_global_plan",
           [](PyWriter& w, std::vector<SavePlan> plans) {
             return Unwrap(w.writer->PrepareGlobalPlan(std::move(plans)));
           })
      .def("write_data",
           // `resolve(i)` gives plan.items[i]'s data when the writer needs
           // it (CallbackSavePlanner).
           [](PyWriter& w, const SavePlan& plan, py::function resolve) {
             CallbackSavePlanner planner(plan, std::move(resolve));
             Result<std::vector<WriteResult>> results = [&] {
               py::gil_scoped_release release;
               return w.writer->WriteData(plan, planner).get();
             }();
             planner.Rethrow();
             return Unwrap(std::move(results));
           })
      .def("finish",
           [](PyWriter& w, Metadata metadata,
              const std::vector<std::vector<WriteResult>>& results) {
             Status s = [&] {
               py::gil_scoped_release release;
               return w.writer->Finish(&metadata, results);
             }();
             Check(s);
             return metadata;
           })
      .def("storage_meta",
           [](PyWriter& w) { return w.writer->GetStorageMeta(); });
}

void BindReader(py::module_& m) {
  py::class_<PyReader>(m, "Reader")
      .def_static("validate_checkpoint_id",
                  [](const std::string& id) {
                    Check(RocksDBStorageReader::ValidateCheckpointId(id));
                  })
      .def("reset", [](PyReader& r,
                       const std::string& id) { Check(r.reader->Reset(id)); })
      .def("read_metadata",
           [](PyReader& r) {
             Result<Metadata> md = [&] {
               py::gil_scoped_release release;
               return r.reader->ReadMetadata();
             }();
             r.metadata = std::make_unique<Metadata>(Unwrap(std::move(md)));
             return *r.metadata;
           })
      .def("set_up",
           [](PyReader& r, bool is_coordinator, int rank, int world_size) {
             if (!r.metadata) {
               Raise(Status::FailedPrecondition(
                   "set_up called before read_metadata"));
             }
             Check(r.reader->SetUpStorageReader(*r.metadata, is_coordinator,
                                                rank, world_size));
           })
      .def("check_destinations", &CheckDestinations)
      .def("prepare_local_plan",
           [](PyReader& r, LoadPlan plan) {
             return Unwrap(r.reader->PrepareLocalPlan(std::move(plan)));
           })
      .def("prepare_global_plan",
           [](PyReader& r, std::vector<LoadPlan> plans) {
             return Unwrap(r.reader->PrepareGlobalPlan(std::move(plans)));
           })
      .def("read_data", &ReadData);
}

void BindStore(py::module_& m) {
  py::class_<PyStore> store_class(m, "Store");
  store_class
      // With `share_writable_for_reads`, a read-only open of a path this
      // process holds read-write returns that store: it sees every commit.
      .def(
          py::init([](const std::string& path, bool read_only, bool follower,
                      bool create_if_missing, bool share_writable_for_reads,
                      bool reclaim_torn_saves) {
            StoreOptions options;
            options.read_only = read_only;
            options.follower = follower;
            options.create_if_missing = create_if_missing;
            options.reclaim_torn_saves = reclaim_torn_saves;
            return PyStore{OpenShared(path, options, share_writable_for_reads)};
          }),
          py::arg("path"), py::arg("read_only") = false,
          py::arg("follower") = false, py::arg("create_if_missing") = true,
          py::arg("share_writable_for_reads") = false,
          py::arg("reclaim_torn_saves") = true)
      // StoreOptions::reclaim_torn_saves: what the open reclaimed, as gc's.
      .def_property_readonly(
          "reclaimed_on_open",
          [](const PyStore& s) { return GcDict(s.Get().ReclaimedOnOpen()); })
      .def("close", [](PyStore& s) { s.store.reset(); })
      .def_property_readonly("closed",
                             [](const PyStore& s) { return !s.store; })
      .def_property_readonly("path",
                             [](const PyStore& s) { return s.Get().path(); });
  BindStoreCatalog(store_class);
  BindStoreReads(store_class);
  store_class.def("new_writer", &NewWriter, py::arg("overwrite") = false,
                  py::arg("max_piece_bytes") = 0, py::arg("base") = "",
                  py::arg("base_on_newest") = false, py::arg("compress") = "",
                  py::arg("write_threads") = 0,
                  py::arg("use_direct_writes") = false,
                  py::arg("memory_budget") = 0,
                  py::arg("writable_file_max_buffer_size") = 0);
  BindWriter(m);
  BindReader(m);
}

}  // namespace

void InitModule(py::module_& m) {
  m.doc() = "rocksdcp's native module; use the rocksdcp package instead.";
  py::module_ errors = py::module_::import("rocksdcp._errors");
  for (int code = 1; code <= static_cast<int>(kLastStatusCode); ++code) {
    const std::string_view name = StatusCodeName(static_cast<StatusCode>(code));
    ErrorClasses()[static_cast<StatusCode>(code)] =
        errors.attr("error_class")(std::string(name));
  }
  BindDataModel(m);
  BindStore(m);
  m.def("dtype_names", [] {
    std::vector<std::string> names;
    for (int v = 1; v <= kMaxDType; ++v) {
      names.emplace_back(DTypeName(static_cast<DType>(v)));
    }
    return names;
  });
}

}  // namespace rocksdcp::python

PYBIND11_MODULE(_rocksdcp, m) { rocksdcp::python::InitModule(m); }
