// A reranker's classification head (see rank_head.h).
#include "server/rank_head.h"

#include <cmath>

#include "base/error.h"
#include "base/half.h"
#include "io/gguf_file.h"

namespace tandem::server {

namespace {

// A tensor of `rows` x `columns` elements as floats; empty when absent.
std::vector<float> floats_of(const GgufFile& file, const std::string& name, int64_t rows, int64_t columns) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (info == nullptr) return {};
  const TensorView& view = info->view;
  TANDEM_CHECK_INPUT(view.n_elements() == rows * columns && view.row_length() == columns,
                     "{} is {}, not {} x {} (the reranker head's shape)", name, view.shape_string(), rows, columns);
  std::vector<float> out(static_cast<size_t>(rows * columns));
  if (view.dtype == DType::F32) {
    const float* data = view.f32();
    out.assign(data, data + out.size());
  } else {
    TANDEM_CHECK_INPUT(view.dtype == DType::F16, "{}: a reranker head of type {} is not supported (F32 or F16)", name,
                       dtype_name(view.dtype));
    const auto* data = static_cast<const uint16_t*>(view.data);
    for (size_t i = 0; i < out.size(); ++i) out[i] = f16_to_f32(data[i]);
  }
  return out;
}

}  // namespace

std::vector<float> RankHead::scores(std::span<const float> pooled) const {
  TANDEM_ASSERT(static_cast<int64_t>(pooled.size()) == d_model && !empty());
  std::vector<double> h(pooled.begin(), pooled.end());
  if (!dense.empty()) {
    std::vector<double> hidden(static_cast<size_t>(d_model));
    for (int64_t r = 0; r < d_model; ++r) {
      double sum = dense_bias.empty() ? 0.0 : dense_bias[static_cast<size_t>(r)];
      for (int64_t c = 0; c < d_model; ++c)
        sum += dense[static_cast<size_t>(r * d_model + c)] * h[static_cast<size_t>(c)];
      hidden[static_cast<size_t>(r)] = std::tanh(sum);
    }
    h = std::move(hidden);
  }
  std::vector<float> scores(static_cast<size_t>(n_out));
  for (int64_t r = 0; r < n_out; ++r) {
    double sum = out_bias.empty() ? 0.0 : out_bias[static_cast<size_t>(r)];
    for (int64_t c = 0; c < d_model; ++c) sum += out[static_cast<size_t>(r * d_model + c)] * h[static_cast<size_t>(c)];
    scores[static_cast<size_t>(r)] = static_cast<float>(sum);
  }
  return scores;
}

RankHead read_rank_head(const std::string& path, int64_t d_model) {
  const GgufFile file = GgufFile::open(path);
  RankHead head;
  const GgufTensorInfo* out = file.find_tensor("cls.output.weight");
  if (out == nullptr) return head;
  head.d_model = d_model;
  head.n_out = out->view.n_rows();
  head.out = floats_of(file, "cls.output.weight", head.n_out, d_model);
  head.out_bias = floats_of(file, "cls.output.bias", 1, head.n_out);
  head.dense = floats_of(file, "cls.weight", d_model, d_model);
  head.dense_bias = floats_of(file, "cls.bias", 1, d_model);
  return head;
}

}  // namespace tandem::server
