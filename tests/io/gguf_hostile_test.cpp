// Malformed GGUF files: every one must end in InputError with a message naming the problem,
// never a crash, an out-of-bounds read (the ASan build checks) or a huge allocation.
#include <gtest/gtest.h>

#include "io/gguf_bytes.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"

namespace tandem {
namespace {

using test::expect_parse_error;
using test::GgufBytes;

constexpr uint32_t kF32 = 0, kQ8_0 = 8;

// A valid header with no metadata, ready for `n_tensors` tensor infos.
GgufBytes header(uint64_t n_tensors, uint64_t n_kv = 0) {
  GgufBytes b;
  b.header(3, n_tensors, n_kv);
  return b;
}

TEST(GgufHostile, EveryTruncationFails) {
  GgufWriter writer;
  writer.set("general.name", GgufValue::string("small"));
  writer.set("list", GgufValue::array(GgufValueType::UInt16, {GgufValue{GgufValueType::UInt16, {}, uint64_t{1}}}));
  writer.add_tensor("a", DType::F32, {3}, std::vector<uint8_t>(12, 1));
  writer.add_tensor("b", DType::F32, {2, 8}, std::vector<uint8_t>(64, 2));
  const std::vector<uint8_t> bytes = writer.to_bytes();
  const GgufFile full = GgufFile::parse(bytes);
  // The last tensor ends exactly at the end of the file (64 bytes, no trailing padding).
  const uint64_t needed = full.data_offset() + full.find_tensor("b")->offset + 64;
  ASSERT_EQ(needed, bytes.size());
  for (size_t length = 0; length < bytes.size(); ++length) {
    SCOPED_TRACE(length);
    EXPECT_THROW(GgufFile::parse(std::span(bytes).first(length)), InputError);
  }
}

TEST(GgufHostile, TruncationMessageSaysWhere) {
  GgufBytes b = header(0, 1);
  b.str("some.key").u32(4).raw("\x01\x02");
  expect_parse_error(b.bytes, "truncated file: some.key needs 4 bytes at offset 44");
}

TEST(GgufHostile, WrongMagic) {
  GgufBytes b;
  b.raw("GGML").u32(3).u64(0).u64(0);
  expect_parse_error(b.bytes, "not a GGUF file");
  expect_parse_error({}, "not a GGUF file");
}

TEST(GgufHostile, UnsupportedVersions) {
  GgufBytes v1;
  v1.header(1, 0, 0);
  expect_parse_error(v1.bytes, "GGUF version 1 is not supported");
  GgufBytes v99;
  v99.header(99, 0, 0);
  expect_parse_error(v99.bytes, "unsupported GGUF version 99");
  GgufBytes big_endian;
  big_endian.raw("GGUF").u32(0x03000000).u64(0).u64(0);
  expect_parse_error(big_endian.bytes, "big-endian GGUF files are not supported");
}

TEST(GgufHostile, AbsurdCounts) {
  expect_parse_error(header(0, uint64_t{1} << 60).bytes, "metadata count 1152921504606846976 is impossible");
  expect_parse_error(header(~uint64_t{0}).bytes, "tensor count 18446744073709551615 is impossible");
}

TEST(GgufHostile, AbsurdStringLengths) {
  GgufBytes key = header(0, 1);
  key.u64(uint64_t{1} << 63).raw("abc").zeros(8);
  expect_parse_error(key.bytes, "string length 9223372036854775808");
  GgufBytes value = header(0, 1);
  value.str("k").u32(8).u64(~uint64_t{0});
  expect_parse_error(value.bytes, "k: string length 18446744073709551615");
  GgufBytes name = header(1);
  name.u64(1000).raw("short").zeros(40);
  expect_parse_error(name.bytes, "tensor 0 name: string length 1000");
}

TEST(GgufHostile, AbsurdArrayCounts) {
  GgufBytes b = header(0, 1);
  b.str("arr").u32(9).u32(4).u64(uint64_t{1} << 62).u32(1).u32(2);
  expect_parse_error(b.bytes, "metadata key 'arr': array of 4611686018427387904 uint32 elements");
  // Nested arrays: each element needs at least 12 bytes.
  GgufBytes nested = header(0, 1);
  nested.str("n").u32(9).u32(9).u64(3).zeros(24);
  expect_parse_error(nested.bytes, "array of 3 array elements cannot fit");
}

TEST(GgufHostile, DeepNestingIsRefused) {
  GgufBytes b = header(0, 1);
  b.str("deep").u32(9);
  for (int i = 0; i < 100; ++i) b.u32(9).u64(1);
  b.u32(4).u64(0);
  expect_parse_error(b.bytes, "nested deeper than");
}

TEST(GgufHostile, BadValueTypes) {
  GgufBytes b = header(0, 1);
  b.str("k").u32(13).u32(0);
  expect_parse_error(b.bytes, "metadata key 'k' has unknown value type 13");
  GgufBytes element = header(0, 1);
  element.str("k").u32(9).u32(77).u64(0);
  expect_parse_error(element.bytes, "unknown array element type 77");
  GgufBytes boolean = header(0, 1);
  boolean.str("flag").u32(7).put<uint8_t>(2);
  expect_parse_error(boolean.bytes, "metadata key 'flag' has invalid bool byte 2");
}

TEST(GgufHostile, DuplicateKeysAndNames) {
  GgufBytes keys = header(0, 2);
  keys.kv_u32("k", 1).kv_u32("k", 2);
  expect_parse_error(keys.bytes, "duplicate metadata key 'k'");
  GgufBytes names = header(2);
  names.tensor("w", {1}, kF32, 0).tensor("w", {1}, kF32, 32).pad_to(32).zeros(64);
  expect_parse_error(names.bytes, "duplicate tensor name 'w'");
}

TEST(GgufHostile, BadDimensions) {
  GgufBytes zero_dims = header(1);
  zero_dims.str("x").u32(0).u32(kF32).u64(0).zeros(64);
  expect_parse_error(zero_dims.bytes, "tensor 'x' has 0 dimensions (must be 1 to 4)");
  GgufBytes five = header(1);
  five.tensor("x", {1, 1, 1, 1, 1}, kF32, 0).zeros(64);
  expect_parse_error(five.bytes, "tensor 'x' has 5 dimensions");
  GgufBytes empty = header(1);
  empty.tensor("x", {4, 0}, kF32, 0).zeros(64);
  expect_parse_error(empty.bytes, "tensor 'x' has dimension 1 of size 0");
  GgufBytes overflow = header(1);
  overflow.tensor("x", {uint64_t{1} << 32, uint64_t{1} << 32, 2}, kF32, 0).zeros(64);
  expect_parse_error(overflow.bytes, "tensor 'x' has an element count that overflows");
  // Fits in 64 bits as an element count, but not as bytes.
  GgufBytes byte_overflow = header(1);
  byte_overflow.tensor("x", {uint64_t{1} << 62}, kF32, 0).zeros(64);
  expect_parse_error(byte_overflow.bytes, "runs past the end of the file");
  GgufBytes huge = header(1);
  huge.tensor("x", {~uint64_t{0}}, kF32, 0).zeros(64);
  expect_parse_error(huge.bytes, "overflows");
}

TEST(GgufHostile, BadTypes) {
  GgufBytes unknown = header(1);
  unknown.tensor("x", {4}, 99, 0).pad_to(32).zeros(32);
  expect_parse_error(unknown.bytes, "unsupported tensor type id 99 for 'x'");
  GgufBytes partial_block = header(1);
  partial_block.tensor("q", {33, 2}, kQ8_0, 0).pad_to(32).zeros(200);
  expect_parse_error(partial_block.bytes, "rows of 33 elements, not a multiple of its block size 32");
}

TEST(GgufHostile, UnsupportedButKnownTypesParse) {
  // Q4_K (id 12): known to GGUF, not computable here; the model loader decides.
  GgufBytes b = header(1);
  b.tensor("k", {256}, 12, 0).pad_to(32).zeros(144);
  const GgufFile file = GgufFile::parse(b.bytes);
  EXPECT_EQ(file.tensors()[0].view.dtype, DType::Q4_K);
  EXPECT_EQ(file.tensors()[0].view.n_bytes(), 144);
}

TEST(GgufHostile, BadOffsets) {
  GgufBytes misaligned = header(1);
  misaligned.tensor("x", {4}, kF32, 1).pad_to(32).zeros(64);
  expect_parse_error(misaligned.bytes, "tensor 'x' has offset 1, not a multiple of the alignment 32");
  GgufBytes past_end = header(1);
  past_end.tensor("x", {16}, kF32, 0).pad_to(32).zeros(63);
  expect_parse_error(past_end.bytes, "tensor 'x' (F32 [16]) at data offset 0 runs past the end");
  GgufBytes far = header(1);
  far.tensor("x", {1}, kF32, ~uint64_t{0} - 31).pad_to(32).zeros(32);
  expect_parse_error(far.bytes, "runs past the end of the file");
}

TEST(GgufHostile, BadAlignment) {
  for (uint32_t alignment : {0u, 3u, 48u}) {
    GgufBytes b = header(0, 1);
    b.kv_u32("general.alignment", alignment);
    expect_parse_error(b.bytes, fmt::format("general.alignment is {}, but must be a power of two", alignment));
  }
  GgufBytes text = header(0, 1);
  text.str("general.alignment").u32(8).str("64");
  expect_parse_error(text.bytes, "general.alignment must be an integer, not string");
  // A good non-default alignment moves the data section.
  GgufBytes good = header(1, 1);
  good.kv_u32("general.alignment", 8).tensor("x", {2}, kF32, 8).pad_to(8).zeros(16);
  const GgufFile file = GgufFile::parse(good.bytes);
  EXPECT_EQ(file.alignment(), 8u);
  EXPECT_EQ(file.data_offset() % 8, 0u);
}

}  // namespace
}  // namespace tandem
