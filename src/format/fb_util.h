// Helpers shared by the FlatBuffers codecs of src/format: finishing and
// verifying a root, copying vectors out of untrusted buffers, and the
// encoding of the DCP types that several roots embed (MetadataIndex,
// ChunkStorageMetadata, TensorProperties).
//
// Error messages. The checks below can't name what they check: the same
// MetadataIndex is a "storage_data index" in Metadata and an "item 3" in a
// SavePlan. So they return Corruption whose message continues a sentence
// that the caller starts, such as "has a negative offset", and the caller
// writes "<value>: <subject> <message>" (see Corrupt()). Nothing is built
// unless a check fails: a value can hold millions of chunks.

#ifndef ROCKSDCP_SRC_FORMAT_FB_UTIL_H_
#define ROCKSDCP_SRC_FORMAT_FB_UTIL_H_

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rocksdcp/metadata.h"
#include "rocksdcp/status.h"
#include "schema/checkpoint_generated.h"

namespace rocksdcp::format {

using LongVector = flatbuffers::Vector<int64_t>;
using ByteVector = flatbuffers::Vector<uint8_t>;

// The Verifier's own default. Values whose table count grows with the
// checkpoint (Metadata, plans) pass a larger cap.
inline constexpr flatbuffers::uoffset_t kDefaultMaxTables =
    flatbuffers::Verifier::Options().max_tables;

// The finished buffer of `fbb`, copied out.
std::string Finished(const flatbuffers::FlatBufferBuilder& fbb);

// "<what>: <subject> <fragment.message()>", as Corruption.
Status Corrupt(std::string_view what, std::string_view subject,
               const Status& fragment);

// Runs the checks every root shares, in order: the size limit, the
// identifier (first, so that a value of another kind says so rather than
// failing verification), then the Verifier with at most `max_tables`
// tables. `what` starts every error message ("metadata: ...").
//
// `max_tables` bounds the work a crafted buffer can cause by pointing many
// offsets at one shared subtree, which the Verifier visits each time.
template <typename T>
Result<const T*> VerifiedRoot(
    std::string_view value, const char* identifier, std::string_view what,
    flatbuffers::uoffset_t max_tables = kDefaultMaxTables) {
  // The Verifier asserts on larger buffers instead of failing.
  if (value.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return Status::Corruption(std::string(what) + ": value of " +
                              std::to_string(value.size()) +
                              " bytes exceeds the FlatBuffers limit of 2 GiB");
  }
  const auto* buf = reinterpret_cast<const uint8_t*>(value.data());
  if (value.size() < 2 * sizeof(flatbuffers::uoffset_t) ||
      !flatbuffers::BufferHasIdentifier(buf, identifier)) {
    return Status::Corruption(std::string(what) +
                              ": wrong file identifier (expected \"" +
                              std::string(identifier) + "\")");
  }
  flatbuffers::Verifier::Options options;
  options.max_tables = max_tables;
  flatbuffers::Verifier verifier(buf, value.size(), options);
  if (!verifier.VerifyBuffer<T>(identifier)) {
    return Status::Corruption(std::string(what) +
                              ": FlatBuffers verification failed");
  }
  return flatbuffers::GetRoot<T>(buf);
}

// ---- Vectors ----

// Copies a [long] out with memcpy: a value handed over by RocksDB or a
// Collective need not be 8-byte aligned in memory, so the elements are
// never read as int64_t in place. Absent reads as empty.
std::vector<int64_t> ReadLongs(const LongVector* v);

// Absent reads as empty.
std::string ReadBytes(const ByteVector* v);

flatbuffers::Offset<ByteVector> CreateBytes(flatbuffers::FlatBufferBuilder& fbb,
                                            std::string_view bytes);

// ---- Names in error messages ----

// An fqn escaped as in keys, so a damaged value can't put control bytes
// into a log, and quoted: "\"layer%0A.w\"".
std::string QuotedFqn(std::string_view fqn);

// QuotedFqn(index.fqn), then " at [o0, o1]" when it has an offset.
std::string QuotedIndex(const MetadataIndex& index);

// ---- MetadataIndex ----

// `offset` absent stays absent (a byte item), empty stays empty (a 0-d
// tensor's chunk).
flatbuffers::Offset<fb::MetadataIndex> CreateIndex(
    flatbuffers::FlatBufferBuilder& fbb, const MetadataIndex& index);

// Corruption ("<quoted index> has a negative offset") for a negative
// offset: offsets address chunks of a tensor.
Result<MetadataIndex> DecodeIndex(const fb::MetadataIndex& index);

// ---- ChunkStorageMetadata ----

flatbuffers::Offset<fb::ChunkStorageMetadata> CreateChunk(
    flatbuffers::FlatBufferBuilder& fbb, const ChunkStorageMetadata& chunk);

// Copies the chunk out, unchecked: what makes a chunk valid depends on the
// tensor it belongs to (see CheckChunkShape, CheckChunkWithin).
ChunkStorageMetadata DecodeChunk(const fb::ChunkStorageMetadata& chunk);

// Corruption unless offsets and sizes have the same rank and no negative
// entry. Enough for a chunk whose bounds another layer checks.
Status CheckChunkShape(const ChunkStorageMetadata& chunk);

// Corruption unless the chunk has the tensor's rank, no negative entry, and
// lies within `size` in every dimension (no overflow). A loader sizes its
// copies from these numbers, so an out-of-range chunk would become an
// out-of-bounds write.
// REQUIRES: every entry of `size` is >= 0 (CheckTensorSize).
Status CheckChunkWithin(const ChunkStorageMetadata& chunk,
                        const std::vector<int64_t>& size);

// ---- TensorProperties and tensor sizes ----

flatbuffers::Offset<fb::TensorProperties> CreateProperties(
    flatbuffers::FlatBufferBuilder& fbb, const TensorProperties& properties);

// Corruption for a dtype, layout or memory format this build doesn't know.
Result<TensorProperties> DecodeProperties(const fb::TensorProperties& p);

// Corruption if a size is negative or the tensor has 2^63 bytes or more, so
// that byte counts derived from it (or from a chunk within it) can't
// overflow.
Status CheckTensorSize(const std::vector<int64_t>& size, DType dtype);

}  // namespace rocksdcp::format

#endif  // ROCKSDCP_SRC_FORMAT_FB_UTIL_H_
