// GGUF reader/writer: round trips of every metadata type and of tensors, the exact layout
// of a small file, the typed getters, open() on real files, and the aidreams260K model.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/quant.h"
#include "io/gguf_bytes.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "support/shared_data.h"

namespace tandem {
namespace {

using test::GgufBytes;

GgufValue u8(uint8_t v) { return {GgufValueType::UInt8, {}, uint64_t{v}}; }
GgufValue i8(int8_t v) { return {GgufValueType::Int8, {}, int64_t{v}}; }
GgufValue u16(uint16_t v) { return {GgufValueType::UInt16, {}, uint64_t{v}}; }
GgufValue i16(int16_t v) { return {GgufValueType::Int16, {}, int64_t{v}}; }
GgufValue i64(int64_t v) { return {GgufValueType::Int64, {}, v}; }
GgufValue f64(double v) { return {GgufValueType::Float64, {}, v}; }

// Every scalar type, strings (empty, non-UTF-8), arrays (empty, nested two deep).
GgufWriter writer_with_every_type() {
  GgufWriter writer;
  writer.set("t.u8", u8(250));
  writer.set("t.i8", i8(-100));
  writer.set("t.u16", u16(65000));
  writer.set("t.i16", i16(-32000));
  writer.set("t.u32", GgufValue::u32(4000000000u));
  writer.set("t.i32", GgufValue::i32(-2000000000));
  writer.set("t.f32", GgufValue::f32(0.1f));
  writer.set("t.bool", GgufValue::boolean(true));
  writer.set("t.string", GgufValue::string("héllo"));
  writer.set("t.empty_string", GgufValue::string(""));
  writer.set("t.binary", GgufValue::string(std::string("\xff\x00\xfe", 3)));
  writer.set("t.u64", GgufValue::u64(~uint64_t{0}));
  writer.set("t.i64", i64(INT64_MIN));
  writer.set("t.f64", f64(1e300));
  writer.set("t.floats", GgufValue::array(GgufValueType::Float32, {GgufValue::f32(1.5f), GgufValue::f32(-2.0f)}));
  writer.set("t.strings", GgufValue::array(GgufValueType::String, {GgufValue::string("a"), GgufValue::string("")}));
  writer.set("t.empty", GgufValue::array(GgufValueType::Int32, {}));
  GgufArray inner1 = {GgufValue::i32(1), GgufValue::i32(-2)};
  GgufArray inner2 = {};
  GgufArray nested = {GgufValue::array(GgufValueType::Int32, inner1), GgufValue::array(GgufValueType::Int32, inner2)};
  writer.set("t.nested", GgufValue::array(GgufValueType::Array, nested));
  return writer;
}

TEST(GgufRoundTrip, EveryMetadataType) {
  const std::vector<uint8_t> bytes = writer_with_every_type().to_bytes();
  const GgufFile file = GgufFile::parse(bytes);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.metadata().size(), 18u);
  EXPECT_EQ(file.tensors().size(), 0u);

  EXPECT_EQ(file.get_int("t.u8"), 250);
  EXPECT_EQ(file.find("t.u8")->type, GgufValueType::UInt8);
  EXPECT_EQ(file.get_int("t.i8"), -100);
  EXPECT_EQ(file.find("t.i8")->type, GgufValueType::Int8);
  EXPECT_EQ(file.get_int("t.u16"), 65000);
  EXPECT_EQ(file.find("t.u16")->type, GgufValueType::UInt16);
  EXPECT_EQ(file.get_int("t.i16"), -32000);
  EXPECT_EQ(file.get_int("t.u32"), 4000000000);
  EXPECT_EQ(file.find("t.u32")->type, GgufValueType::UInt32);
  EXPECT_EQ(file.get_int("t.i32"), -2000000000);
  EXPECT_EQ(file.get_float("t.f32"), double{0.1f});
  EXPECT_EQ(file.find("t.f32")->type, GgufValueType::Float32);
  EXPECT_EQ(file.get_bool("t.bool"), true);
  EXPECT_EQ(file.get_string("t.string"), "héllo");
  EXPECT_EQ(file.get_string("t.empty_string"), "");
  EXPECT_EQ(file.get_string("t.binary"), std::string("\xff\x00\xfe", 3));
  // uint64 max does not fit as_int, but the raw value survives.
  EXPECT_EQ(std::get<uint64_t>(file.find("t.u64")->data), ~uint64_t{0});
  EXPECT_EQ(file.find("t.u64")->as_int(), std::nullopt);
  EXPECT_EQ(file.get_int("t.i64"), INT64_MIN);
  EXPECT_EQ(file.get_float("t.f64"), 1e300);
  EXPECT_EQ(file.find("t.f64")->type, GgufValueType::Float64);
  EXPECT_EQ(file.get_float_array("t.floats"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(file.get_string_array("t.strings"), (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(file.get_int_array("t.empty"), std::vector<int64_t>{});
  EXPECT_EQ(file.find("t.empty")->array_type, GgufValueType::Int32);

  const GgufValue* nested = file.find("t.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->array_type, GgufValueType::Array);
  const GgufArray& outer = *nested->as_array();
  ASSERT_EQ(outer.size(), 2u);
  EXPECT_EQ(outer[0].array_type, GgufValueType::Int32);
  ASSERT_EQ(outer[0].as_array()->size(), 2u);
  EXPECT_EQ((*outer[0].as_array())[1].as_int(), -2);
  EXPECT_TRUE(outer[1].as_array()->empty());
}

bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type || a.data.index() != b.data.index()) return false;
  if (const GgufArray* x = a.as_array()) {
    const GgufArray& y = *b.as_array();
    if (a.array_type != b.array_type || x->size() != y.size()) return false;
    for (size_t i = 0; i < x->size(); ++i)
      if (!same_value((*x)[i], y[i])) return false;
    return true;
  }
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, GgufArray>)
          return false;
        else
          return x == std::get<T>(b.data);
      },
      a.data);
}

TEST(GgufRoundTrip, ReWritingParsedMetadataKeepsEveryValue) {
  const std::vector<uint8_t> bytes = writer_with_every_type().to_bytes();
  const GgufFile first = GgufFile::parse(bytes);
  GgufWriter again;
  for (const auto& [key, value] : first.metadata()) again.set(key, value);
  const std::vector<uint8_t> bytes_again = again.to_bytes();
  EXPECT_EQ(bytes_again.size(), bytes.size());
  const GgufFile second = GgufFile::parse(bytes_again);
  ASSERT_EQ(second.metadata().size(), first.metadata().size());
  for (const auto& [key, value] : first.metadata()) EXPECT_TRUE(same_value(value, *second.find(key))) << key;
}

TEST(GgufRoundTrip, TensorsAreAlignedAndViewed) {
  GgufWriter writer;
  writer.set("general.alignment", GgufValue::u32(64));
  std::vector<float> values = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> f32_bytes(values.size() * 4);
  std::memcpy(f32_bytes.data(), values.data(), f32_bytes.size());
  writer.add_tensor("a", DType::F32, {2, 3}, f32_bytes);
  std::vector<float> row(64);
  for (int i = 0; i < 64; ++i) row[i] = static_cast<float>(i - 32) / 8.0f;
  std::vector<uint8_t> q8_bytes(dtype_row_bytes(DType::Q8_0, 64));
  quantize_row(DType::Q8_0, row.data(), q8_bytes.data(), 64);
  writer.add_tensor("b", DType::Q8_0, {1, 1, 1, 64}, q8_bytes);
  // A streamed tensor.
  writer.add_tensor("c", DType::F16, {5}, [](std::span<uint8_t> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i);
  });

  const std::vector<uint8_t> bytes = writer.to_bytes();
  const GgufFile file = GgufFile::parse(bytes);
  EXPECT_EQ(file.alignment(), 64u);
  EXPECT_EQ(file.data_offset() % 64, 0u);
  ASSERT_EQ(file.tensors().size(), 3u);
  EXPECT_EQ(file.tensors()[0].name, "a");  // file order is kept

  const GgufTensorInfo* a = file.find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->view.dtype, DType::F32);
  EXPECT_EQ(a->view.shape_string(), "[2, 3]");
  EXPECT_EQ(a->offset, 0u);
  EXPECT_EQ(std::memcmp(a->view.data, f32_bytes.data(), f32_bytes.size()), 0);

  const GgufTensorInfo* b = file.find_tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->view.shape_string(), "[1, 1, 1, 64]");
  EXPECT_EQ(b->offset, 64u);  // 24 bytes of "a", padded to 64
  EXPECT_EQ(b->view.n_bytes(), 68);
  EXPECT_EQ(std::memcmp(b->view.data, q8_bytes.data(), q8_bytes.size()), 0);

  const GgufTensorInfo* c = file.find_tensor("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->offset, 192u);  // 64 + 68 padded to 64
  EXPECT_EQ(static_cast<const uint8_t*>(c->view.data)[9], 9);
  EXPECT_EQ(bytes.size(), file.data_offset() + 192 + 64);  // trailing padding too
  EXPECT_EQ(file.find_tensor("missing"), nullptr);
}

TEST(GgufWriter, ExactLayoutOfASmallFile) {
  GgufWriter writer;
  writer.set("k", GgufValue::u32(7));
  writer.add_tensor("w", DType::F32, {1, 2}, std::vector<uint8_t>(8, 0xab));
  GgufBytes expected;
  expected.header(3, 1, 1).kv_u32("k", 7).tensor("w", {2, 1}, 0, 0).pad_to(32);
  expected.bytes.insert(expected.bytes.end(), 8, 0xab);
  expected.pad_to(32);
  EXPECT_EQ(writer.to_bytes(), expected.bytes);
}

TEST(GgufWriter, SetReplacesInPlace) {
  GgufWriter writer;
  writer.set("first", GgufValue::u32(1));
  writer.set("second", GgufValue::u32(2));
  writer.set("first", GgufValue::string("one"));
  GgufBytes expected;
  expected.header(3, 0, 2).str("first").u32(8).str("one").kv_u32("second", 2).pad_to(32);
  EXPECT_EQ(writer.to_bytes(), expected.bytes);
}

TEST(GgufFile, ReadsVersion2) {
  GgufBytes file;
  file.header(2, 0, 1).kv_u32("x", 5);
  EXPECT_EQ(GgufFile::parse(file.bytes).version(), 2u);
  EXPECT_EQ(GgufFile::parse(file.bytes).get_int("x"), 5);
}

TEST(GgufFile, GettersRejectWrongTypes) {
  const std::vector<uint8_t> bytes = writer_with_every_type().to_bytes();
  const GgufFile file = GgufFile::parse(bytes);
  EXPECT_EQ(file.get_int("absent"), std::nullopt);
  EXPECT_EQ(file.get_string_array("absent"), std::nullopt);
  EXPECT_THROW(file.get_int("t.string"), InputError);
  EXPECT_THROW(file.get_int("t.f32"), InputError);
  EXPECT_EQ(file.get_float("t.i32"), -2000000000.0);  // integers widen to float
  EXPECT_THROW(file.get_float("t.bool"), InputError);
  EXPECT_THROW(file.get_bool("t.u8"), InputError);
  EXPECT_THROW(file.get_string("t.u8"), InputError);
  EXPECT_THROW(file.get_string_array("t.floats"), InputError);
  EXPECT_THROW(file.get_string_array("t.string"), InputError);
  EXPECT_THROW(file.get_int_array("t.floats"), InputError);
  EXPECT_EQ(file.get_float_array("t.empty"), std::vector<float>{});
  try {
    file.get_int("t.string");
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "metadata key 't.string' is a string, expected an integer");
  }
}

TEST(GgufFile, WriteThenOpen) {
  const std::string path = ::testing::TempDir() + "tandem_gguf_write_open.gguf";
  GgufWriter writer;
  writer.set("general.name", GgufValue::string("x"));
  writer.add_tensor("w", DType::F32, {4}, std::vector<uint8_t>(16, 1));
  writer.write(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  const GgufFile file = GgufFile::open(path);
  EXPECT_NE(file.mapping(), nullptr);
  EXPECT_EQ(file.get_string("general.name"), "x");
  EXPECT_EQ(file.find_tensor("w")->view.n_bytes(), 16);
  std::remove(path.c_str());
}

TEST(GgufFile, OpenErrorsNameThePath) {
  const std::string path = ::testing::TempDir() + "tandem_gguf_bad.gguf";
  std::ofstream(path) << "GGUF\x01";
  try {
    GgufFile::open(path);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()).rfind(path + ": truncated file", 0), 0u) << error.what();
  }
  std::remove(path.c_str());
  EXPECT_THROW(GgufFile::open(::testing::TempDir() + "does-not-exist.gguf"), InputError);
}

TEST(GgufFile, ReadsAidreams260K) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const std::string path = testing::shared_path(testing::kAidreamsGguf);
  const GgufFile file = GgufFile::open(path);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
  EXPECT_EQ(file.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(file.get_int("llama.block_count"), 4);
  const auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(tokens->size(), 512u);
  const GgufTensorInfo* embed = file.find_tensor("token_embd.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->view.n_dims, 2);
  EXPECT_EQ(embed->view.dim(0), 512);
  EXPECT_EQ(embed->view.dim(1), 64);
  // Every view lies inside the mapping.
  const auto map = file.mapping()->bytes();
  for (const GgufTensorInfo& info : file.tensors()) {
    const auto* start = static_cast<const uint8_t*>(info.view.data);
    EXPECT_GE(start, map.data() + file.data_offset());
    EXPECT_LE(start + info.view.n_bytes(), map.data() + map.size()) << info.name;
  }
}

}  // namespace
}  // namespace tandem
