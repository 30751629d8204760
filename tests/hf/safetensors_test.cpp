// Issue 5, evidence 4: the safetensors reader and the HF loader on broken input — bad header
// length, bad JSON, offsets out of range, overlapping tensors, a size that does not match the
// shape, unknown dtypes, a missing shard, config shapes that disagree with the tensors — each
// ends in one InputError naming the problem (run under ASan/UBSan: never a crash).
#include <gtest/gtest.h>

#include <algorithm>

#include "hf/hf_model_writer.h"
#include "hf/hf_test_support.h"
#include "io/safetensors_file.h"

namespace tandem {
namespace {

using namespace test_support;

std::vector<uint8_t> with_header(const std::string& header, size_t data_bytes) {
  // Sized once and copied into (vector::insert here trips GCC 12's false -Warray-bounds).
  std::vector<uint8_t> bytes(8 + header.size() + data_bytes, 0);
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  return bytes;
}

void expect_parse_error(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  try {
    SafetensorsFile::parse(bytes);
    ADD_FAILURE() << "parsed without error; expected '" << fragment << "'";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(Safetensors, ParsesTensorsAndMetadata) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8};
  const std::vector<uint8_t> bytes = safetensors_bytes({{"a", {2, 3}, &a}, {"b", {2}, &b}}, DType::F32, false);
  const SafetensorsFile file = SafetensorsFile::parse(bytes);
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  const SafetensorsTensor* found = file.find("a");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->view.shape_string(), "[2, 3]");
  EXPECT_EQ(found->view.dtype, DType::F32);
  float value = 0;
  std::memcpy(&value, found->view.row(1), sizeof value);
  EXPECT_EQ(value, 4.0f);
  EXPECT_EQ(file.find("missing"), nullptr);
}

// U8 (gpt-oss's MXFP4 blocks and scales) is read as bytes: typed I8 (one byte an element, no kernel
// takes it) and named U8, so loaders can tell it from a float tensor.
TEST(Safetensors, ReadsU8AsBytes) {
  const std::vector<uint8_t> codes = {0x00, 0x7f, 0x80, 0xff, 0x12, 0x34};
  const std::vector<float> f = {1, 2};
  const std::vector<uint8_t> bytes =
      safetensors_bytes({{"codes", {2, 3}, nullptr, &codes}, {"f", {2}, &f}}, DType::BF16, false);
  const SafetensorsFile file = SafetensorsFile::parse(bytes);
  const SafetensorsTensor* found = file.find("codes");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->stored_dtype, "U8");
  EXPECT_FALSE(found->is_float());
  EXPECT_EQ(found->view.dtype, DType::I8);
  EXPECT_FALSE(dtype_is_computable(found->view.dtype));
  EXPECT_EQ(found->view.shape_string(), "[2, 3]");
  EXPECT_EQ(found->view.n_bytes(), 6);
  EXPECT_EQ(static_cast<const uint8_t*>(found->view.data)[3], 0xff);
  EXPECT_EQ(file.find("f")->stored_dtype, "BF16");
  EXPECT_TRUE(file.find("f")->is_float());
}

// The map a tensor's data lies in (what the MXFP4 loader releases pages of after repacking).
TEST(Safetensors, CheckpointNamesEachTensorsMapping) {
  TempDir tmp;
  const std::vector<float> a = {1, 2};
  write_bytes(make_dir(tmp.file("folder")) + "/model.safetensors",
              safetensors_bytes({{"a", {2}, &a}}, DType::F32, false));
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(make_dir(tmp.file("folder")));
  ASSERT_EQ(checkpoint.mappings().size(), 1u);
  EXPECT_EQ(checkpoint.mapping_of("a"), checkpoint.mappings()[0]);
  const auto* data = static_cast<const uint8_t*>(checkpoint.find("a")->view.data);
  EXPECT_TRUE(data >= checkpoint.mapping_of("a")->bytes().data() &&
              data < checkpoint.mapping_of("a")->bytes().data() + checkpoint.mapping_of("a")->bytes().size());
  EXPECT_EQ(checkpoint.mapping_of("missing"), nullptr);
}

TEST(Safetensors, RejectsBadHeaders) {
  expect_parse_error({1, 2, 3}, "too short");
  std::vector<uint8_t> huge = with_header("{}", 0);
  huge[7] = 0x80;  // header length 2^63 + 2
  expect_parse_error(huge, "runs past the end");
  std::vector<uint8_t> long_by_one = with_header("{}", 0);
  long_by_one[0] = 3;
  expect_parse_error(long_by_one, "runs past the end");
  expect_parse_error(with_header("{\"a\": {", 0), "not well-formed JSON");
  expect_parse_error(with_header("[1, 2]", 0), "not a JSON object");
  expect_parse_error(with_header("{\"a\": 5}", 0), "not an object");
  expect_parse_error(with_header(R"({"__metadata__": {"k": 1}})", 0), "not a string");
}

TEST(Safetensors, RejectsBadEntries) {
  auto entry = [](const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return "{\"w\": {\"dtype\": \"" + dtype + "\", \"shape\": " + shape + ", \"data_offsets\": " + offsets + "}}";
  };
  expect_parse_error(with_header(entry("F32", "[2]", "[0, 16]"), 8), "outside the data section");
  expect_parse_error(with_header(entry("F32", "[2]", "[8, 4]"), 8), "outside the data section");
  expect_parse_error(with_header(entry("F32", "[3]", "[0, 8]"), 8), "needs 12 bytes");
  expect_parse_error(with_header(entry("F16", "[3]", "[0, 8]"), 8), "needs 6 bytes");
  expect_parse_error(with_header(entry("F32", "[2]", "[0, 8]"), 12), "4 bytes after the last tensor");
  expect_parse_error(with_header(entry("Q9", "[2]", "[0, 8]"), 8), "unknown dtype 'Q9'");
  expect_parse_error(with_header(entry("I64", "[1]", "[0, 8]"), 8), "dtype I64, which Tandem does not read");
  expect_parse_error(with_header(entry("U8", "[3]", "[0, 4]"), 4), "needs 3 bytes");
  expect_parse_error(with_header(entry("F32", "[-2]", "[0, 8]"), 8), "non-negative integers");
  expect_parse_error(with_header(entry("F32", "[2]", "[0]"), 8), "[begin, end]");
  expect_parse_error(with_header(entry("F32", "[0]", "[0, 0]"), 0), "dimension of size 0");
  expect_parse_error(with_header(entry("F32", "[1, 1, 1, 1, 2]", "[0, 8]"), 8), "dimensions");
  // 2^32 x 2^32 elements: the size check must not overflow into a small number.
  expect_parse_error(with_header(entry("F32", "[4294967296, 4294967296]", "[0, 8]"), 8), "too many elements");
  expect_parse_error(with_header(R"({"w": {"dtype": "F32", "shape": [2]}})", 8), "data_offsets");
}

TEST(Safetensors, RejectsOverlapsAndGaps) {
  const std::string overlap = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                              R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
  expect_parse_error(with_header(overlap, 12), "overlap");
  const std::string same = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                           R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  expect_parse_error(with_header(same, 8), "overlap");
  const std::string gap = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                          R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})";
  expect_parse_error(with_header(gap, 12), "gap of 4 bytes");
}

TEST(Safetensors, OpenNamesThePath) {
  TempDir tmp;
  write_bytes(tmp.file("bad.safetensors"), with_header("{\"a\":", 0));
  try {
    SafetensorsFile::open(tmp.file("bad.safetensors"));
    ADD_FAILURE() << "expected an error";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("bad.safetensors: header is not well-formed JSON"), std::string::npos)
        << error.what();
  }
}

// Loads `dir` with load_model and expects an InputError containing `fragment`.
void expect_load_error(const std::string& dir, const std::string& fragment) {
  try {
    load_model(dir);
    ADD_FAILURE() << "loaded without error; expected '" << fragment << "'";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(HfLoader, MissingShardIsNamed) {
  TempDir tmp;
  HfModelSpec spec;
  spec.n_shards = 3;
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(spec, random_hf_weights(spec), dir);
  std::filesystem::remove(dir + "/model-00002-of-00003.safetensors");
  expect_load_error(dir, "missing shard '" + dir + "/model-00002-of-00003.safetensors'");
  // The binary says the same in one line.
  const testing::CommandResult result = tandem_convert(dir, tmp.file("out.gguf"), "F16");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("tandem: error:"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("missing shard"), std::string::npos) << result.err;
}

TEST(HfLoader, IndexProblems) {
  TempDir tmp;
  HfModelSpec spec;
  spec.n_shards = 2;
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(spec, random_hf_weights(spec), dir);
  write_text(dir + "/model.safetensors.index.json", R"({"weight_map": {"model.norm.weight": "../evil.safetensors"}})");
  expect_load_error(dir, "is not a file name in the model folder");
  write_text(dir + "/model.safetensors.index.json",
             R"({"weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors"}})");
  expect_load_error(dir, "tensor 'lm_head.weight' is not in shard");
  write_text(dir + "/model.safetensors.index.json", "{not json");
  expect_load_error(dir, "not a well-formed JSON object");
  std::filesystem::remove(dir + "/model.safetensors.index.json");
  expect_load_error(dir, "neither model.safetensors nor model.safetensors.index.json");
}

TEST(HfLoader, ConfigThatDisagreesWithTensors) {
  TempDir tmp;
  HfModelSpec spec;
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(spec, random_hf_weights(spec), dir);
  HfModelSpec wrong = spec;
  wrong.d_ff = 41;  // the tensors say 40
  const std::string bad = make_dir(tmp.file("bad"));
  write_hf_model(wrong, random_hf_weights(spec), bad);
  expect_load_error(
      bad, "tensor 'model.layers.0.mlp.gate_proj.weight' has shape [40, 48], but config.json implies [41, 48]");

  write_text(dir + "/config.json", R"({"model_type": "gpt_neox", "hidden_size": 48})");
  expect_load_error(dir, "model_type 'gpt_neox' is not supported");
  write_text(dir + "/config.json", R"({"model_type": "llama", "hidden_size": 48})");
  expect_load_error(dir, "config.json is missing 'num_hidden_layers'");
  write_text(dir + "/config.json", R"({"model_type": "llama", "hidden_size": "48"})");
  expect_load_error(dir, "'hidden_size' is not an integer");
  write_text(dir + "/config.json", "{");
  expect_load_error(dir, "is not a well-formed JSON object");
}

TEST(HfLoader, QwenWithoutBiasesAndMissingHead) {
  TempDir tmp;
  HfModelSpec llama;
  HfModelSpec qwen = llama;
  qwen.model_type = "qwen2";
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(qwen, random_hf_weights(llama), dir);  // a qwen2 config over bias-less tensors
  expect_load_error(dir, "missing tensor 'model.layers.0.self_attn.q_proj.bias'");

  HfModelSpec tied = llama;
  tied.tied = true;
  const std::string tied_dir = make_dir(tmp.file("tied"));
  write_hf_model(tied, random_hf_weights(tied), tied_dir);
  EXPECT_NO_THROW(load_model(tied_dir));
  std::string config = testing::read_text_file(tied_dir + "/config.json");
  const size_t at = config.find("\"tie_word_embeddings\": true");
  ASSERT_NE(at, std::string::npos) << config;
  config.replace(at, 27, "\"tie_word_embeddings\": false");
  write_text(tied_dir + "/config.json", config);
  expect_load_error(tied_dir, "missing tensor 'lm_head.weight'");
}

}  // namespace
}  // namespace tandem
