#include "format/fb_util.h"

#include <cstring>
#include <utility>

#include "keys/keys.h"

namespace rocksdcp::format {

std::string Finished(const flatbuffers::FlatBufferBuilder& fbb) {
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                     fbb.GetSize());
}

Status Corrupt(std::string_view what, std::string_view subject,
               const Status& fragment) {
  std::string message(what);
  message += ": ";
  message += subject;
  message += ' ';
  message += fragment.message();
  return Status::Corruption(std::move(message));
}

AlignedBytes::AlignedBytes(std::string_view value) : view_(value) {
  if (reinterpret_cast<uintptr_t>(value.data()) % kBufferAlignment == 0) {
    return;
  }
  // operator new[] aligns for every fundamental type, uint64_t included.
  const size_t words = (value.size() + kBufferAlignment - 1) / kBufferAlignment;
  copy_ = std::make_unique_for_overwrite<uint64_t[]>(words);
  std::memcpy(copy_.get(), value.data(), value.size());
  view_ = std::string_view(reinterpret_cast<const char*>(copy_.get()),
                           value.size());
}

// ---- Vectors ----

std::vector<int64_t> ReadLongs(const LongVector* v) { return ReadScalars(v); }

std::string ReadBytes(const ByteVector* v) {
  if (v == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(VectorElements(v)),
                     ReadVectorLength(v));
}

flatbuffers::Offset<ByteVector> CreateBytes(flatbuffers::FlatBufferBuilder& fbb,
                                            std::string_view bytes) {
  return fbb.CreateVector(reinterpret_cast<const uint8_t*>(bytes.data()),
                          bytes.size());
}

// ---- Names in error messages ----

std::string QuotedFqn(std::string_view fqn) {
  return "\"" + keys::EscapeFqn(fqn) + "\"";
}

std::string QuotedIndex(const MetadataIndex& index) {
  std::string s = QuotedFqn(index.fqn);
  if (index.offset) {
    s += " at [";
    for (size_t i = 0; i < index.offset->size(); ++i) {
      if (i > 0) s += ", ";
      s += std::to_string((*index.offset)[i]);
    }
    s += "]";
  }
  return s;
}

// ---- MetadataIndex ----

flatbuffers::Offset<fb::MetadataIndex> CreateIndex(
    flatbuffers::FlatBufferBuilder& fbb, const MetadataIndex& index) {
  return CreateIndex(fbb, index, fbb.CreateString(index.fqn));
}

flatbuffers::Offset<fb::MetadataIndex> CreateIndex(
    flatbuffers::FlatBufferBuilder& fbb, const MetadataIndex& index,
    flatbuffers::Offset<flatbuffers::String> fqn) {
  flatbuffers::Offset<LongVector> offset;  // Null: absent, a byte item.
  if (index.offset) offset = fbb.CreateVector(*index.offset);
  flatbuffers::Optional<int32_t> hint = flatbuffers::nullopt;
  if (index.index) hint = *index.index;
  return fb::CreateMetadataIndex(fbb, fqn, offset, hint);
}

Result<MetadataIndex> DecodeIndex(const fb::MetadataIndex& index) {
  MetadataIndex out;
  out.fqn = index.fqn()->str();  // Required: the Verifier checked it is there.
  if (index.offset() != nullptr) {
    out.offset = ReadLongs(index.offset());
    for (int64_t o : *out.offset) {
      if (o < 0) {
        return Status::Corruption(QuotedIndex(out) + " has a negative offset");
      }
    }
  }
  if (const auto hint = index.index(); hint.has_value()) out.index = *hint;
  return out;
}

// ---- ChunkStorageMetadata ----

flatbuffers::Offset<fb::ChunkStorageMetadata> CreateChunk(
    flatbuffers::FlatBufferBuilder& fbb, const ChunkStorageMetadata& chunk) {
  const auto offsets = fbb.CreateVector(chunk.offsets);
  const auto sizes = fbb.CreateVector(chunk.sizes);
  return fb::CreateChunkStorageMetadata(fbb, offsets, sizes);
}

ChunkStorageMetadata DecodeChunk(const fb::ChunkStorageMetadata& chunk) {
  ChunkStorageMetadata out;
  out.offsets = ReadLongs(chunk.offsets());
  out.sizes = ReadLongs(chunk.sizes());
  return out;
}

Status CheckChunkShape(const ChunkStorageMetadata& chunk) {
  if (chunk.offsets.size() != chunk.sizes.size()) {
    return Status::Corruption(
        "has offsets of rank " + std::to_string(chunk.offsets.size()) +
        " but sizes of rank " + std::to_string(chunk.sizes.size()));
  }
  for (size_t d = 0; d < chunk.offsets.size(); ++d) {
    if (chunk.offsets[d] < 0 || chunk.sizes[d] < 0) {
      return Status::Corruption("has a negative offset or size in dimension " +
                                std::to_string(d));
    }
  }
  return Status::OK();
}

Status CheckChunkWithin(const ChunkStorageMetadata& chunk,
                        const std::vector<int64_t>& size) {
  if (chunk.offsets.size() != size.size() ||
      chunk.sizes.size() != size.size()) {
    return Status::Corruption(
        "has offsets of rank " + std::to_string(chunk.offsets.size()) +
        " and sizes of rank " + std::to_string(chunk.sizes.size()) +
        ", the tensor has rank " + std::to_string(size.size()));
  }
  for (size_t d = 0; d < size.size(); ++d) {
    const int64_t offset = chunk.offsets[d];
    const int64_t length = chunk.sizes[d];
    if (offset < 0 || length < 0) {
      return Status::Corruption("has a negative offset or size in dimension " +
                                std::to_string(d));
    }
    // Both are non-negative and at most size[d], so nothing here overflows.
    if (length > size[d] || offset > size[d] - length) {
      return Status::Corruption(
          "exceeds the tensor in dimension " + std::to_string(d) + ": offset " +
          std::to_string(offset) + " + size " + std::to_string(length) + " > " +
          std::to_string(size[d]));
    }
  }
  return Status::OK();
}

// ---- TensorProperties and tensor sizes ----

flatbuffers::Offset<fb::TensorProperties> CreateProperties(
    flatbuffers::FlatBufferBuilder& fbb, const TensorProperties& p) {
  return fb::CreateTensorProperties(
      fbb, static_cast<fb::DType>(p.dtype), static_cast<uint8_t>(p.layout),
      p.requires_grad, static_cast<uint8_t>(p.memory_format), p.pin_memory);
}

Result<TensorProperties> DecodeProperties(const fb::TensorProperties& p) {
  TensorProperties out;
  const auto dtype = static_cast<uint8_t>(p.dtype());
  if (!IsValidDType(dtype)) {
    return Status::Corruption("has unknown dtype " + std::to_string(dtype));
  }
  out.dtype = static_cast<DType>(dtype);
  if (p.layout() != static_cast<uint8_t>(TensorLayout::kStrided)) {
    return Status::Corruption("has unknown layout " +
                              std::to_string(p.layout()));
  }
  out.layout = TensorLayout::kStrided;
  if (p.memory_format() > static_cast<uint8_t>(MemoryFormat::kPreserve)) {
    return Status::Corruption("has unknown memory_format " +
                              std::to_string(p.memory_format()));
  }
  out.memory_format = static_cast<MemoryFormat>(p.memory_format());
  out.requires_grad = p.requires_grad();
  out.pin_memory = p.pin_memory();
  return out;
}

Status CheckTensorSize(const std::vector<int64_t>& size, DType dtype) {
  uint64_t bytes = DTypeSize(dtype);
  for (int64_t s : size) {
    if (s < 0) return Status::Corruption("has a negative size");
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(s), &bytes) ||
        bytes > static_cast<uint64_t>(INT64_MAX)) {
      return Status::Corruption("is larger than 2^63 bytes");
    }
  }
  return Status::OK();
}

}  // namespace rocksdcp::format
