// Request bodies' JSON in linear time (see json_body.h). nlohmann's own DOM parser is not:
// an ordered_json object is a vector of pairs with a const key, which the vector copies
// (deeply: the whole subtree) each time it grows, and each key is looked up by a linear
// scan before it is added. Here nlohmann's SAX parser feeds a builder that gathers an
// object's members in a vector of movable pairs and builds the object once, at its end.
#include "server/json_body.h"

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tandem::server {
namespace {

// Values between two calls of `abandoned` (a few microseconds of parsing).
constexpr int64_t kAbandonCheckInterval = 4096;

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string json_error_text(std::string_view what) {
  const size_t close = what.find("] ");
  return std::string(what.substr(close == std::string_view::npos ? 0 : close + 2));
}

// Duplicate keys: the first position keeps the last value (what nlohmann's operator[] does).
// Small objects compare their keys pairwise; larger ones through a hash map (linear).
void merge_duplicate_keys(std::vector<std::pair<std::string, RequestJson>>& members) {
  if (members.size() < 2) return;
  std::vector<bool> dropped(members.size(), false);
  bool any = false;
  const auto merge = [&](size_t first, size_t later) {
    members[first].second = std::move(members[later].second);
    dropped[later] = true;
    any = true;
  };
  if (members.size() <= 8) {
    for (size_t i = 1; i < members.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (!dropped[j] && members[j].first == members[i].first) {
          merge(j, i);
          break;
        }
  } else {
    // Views of the keys: the vector does not grow while they are used.
    std::unordered_map<std::string_view, size_t> first_of;
    first_of.reserve(members.size());
    for (size_t i = 0; i < members.size(); ++i)
      if (const auto [it, fresh] = first_of.try_emplace(members[i].first, i); !fresh) merge(it->second, i);
  }
  if (!any) return;
  size_t kept = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (dropped[i]) continue;
    if (kept != i) members[kept] = std::move(members[i]);  // never onto itself: that empties a string
    ++kept;
  }
  members.resize(kept);
}

// nlohmann's SAX interface (json_sax.hpp), building the value as it is read.
class Builder {
 public:
  Builder(const JsonBodyLimits& limits, const std::function<bool()>& abandoned)
      : limits_(limits), abandoned_(abandoned) {}

  bool null() { return add(RequestJson(nullptr)); }
  bool boolean(bool value) { return add(RequestJson(value)); }
  bool number_integer(RequestJson::number_integer_t value) { return add(RequestJson(value)); }
  bool number_unsigned(RequestJson::number_unsigned_t value) { return add(RequestJson(value)); }
  bool number_float(RequestJson::number_float_t value, const std::string& /*text*/) { return add(RequestJson(value)); }
  bool string(std::string& value) { return add(RequestJson(std::move(value))); }
  bool binary(RequestJson::binary_t& /*value*/) { return false; }  // not in JSON text

  bool start_object(size_t /*size*/) { return open(/*object=*/true); }
  bool key(std::string& key) {
    Frame& frame = stack_.back();
    if (static_cast<int64_t>(frame.members.size()) >= limits_.max_object_keys)
      return refuse(
          fmt::format("an object in the request body has more than {} keys (the limit)", limits_.max_object_keys));
    if (static_cast<int64_t>(key.size()) > limits_.max_key_bytes)
      return refuse(
          fmt::format("a key in the request body is longer than {} bytes (the limit)", limits_.max_key_bytes));
    frame.members.emplace_back(std::move(key), nullptr);
    return true;
  }
  bool end_object() {
    Frame frame = std::move(stack_.back());
    stack_.pop_back();
    merge_duplicate_keys(frame.members);
    RequestJson object(RequestJson::value_t::object);
    auto& map = object.get_ref<RequestJson::object_t&>();
    map.reserve(frame.members.size());  // no growth below: each pair is moved in once
    for (auto& [key, value] : frame.members) map.emplace_back(std::move(key), std::move(value));
    return place(std::move(object));
  }
  bool start_array(size_t /*size*/) { return open(/*object=*/false); }
  bool end_array() {
    Frame frame = std::move(stack_.back());
    stack_.pop_back();
    RequestJson array(RequestJson::value_t::array);
    array.get_ref<RequestJson::array_t&>() = std::move(frame.items);
    return place(std::move(array));
  }

  template <class Exception>
  bool parse_error(size_t /*position*/, const std::string& /*last_token*/, const Exception& error) {
    syntax_error_ = json_error_text(error.what());
    return false;
  }

  // After sax_parse: the value, or the exception that explains why there is none.
  RequestJson result() {
    if (!limit_error_.empty()) bad(limit_error_);
    if (abandoned_now_) throw BodyAbandoned();
    if (!syntax_error_.empty()) bad("the request body is not valid JSON: " + syntax_error_);
    return std::move(root_);
  }

 private:
  struct Frame {
    bool object = false;
    std::vector<std::pair<std::string, RequestJson>> members;  // object: keys in order, duplicates too
    std::vector<RequestJson> items;                            // array
  };

  bool refuse(std::string message) {
    limit_error_ = std::move(message);
    return false;
  }

  // Every value (containers when they open) counts once against max_values.
  bool count() {
    if (++values_ > limits_.max_values)
      return refuse(fmt::format("the request body holds more than {} values (the limit)", limits_.max_values));
    if (values_ % kAbandonCheckInterval == 0 && abandoned_ && abandoned_()) {
      abandoned_now_ = true;
      return false;
    }
    return true;
  }

  bool open(bool object) {
    if (!count()) return false;
    if (static_cast<int64_t>(stack_.size()) >= limits_.max_depth)
      return refuse(fmt::format("the request body nests deeper than {} levels (the limit)", limits_.max_depth));
    stack_.push_back(Frame{object, {}, {}});
    return true;
  }

  bool add(RequestJson value) { return count() && place(std::move(value)); }

  // A finished value goes into the container being read, or is the whole body.
  bool place(RequestJson value) {
    if (stack_.empty()) {
      root_ = std::move(value);
    } else if (Frame& frame = stack_.back(); frame.object) {
      frame.members.back().second = std::move(value);
    } else {
      frame.items.push_back(std::move(value));
    }
    return true;
  }

  const JsonBodyLimits& limits_;
  const std::function<bool()>& abandoned_;
  std::vector<Frame> stack_;  // the containers being read, outermost first
  RequestJson root_;
  int64_t values_ = 0;
  std::string limit_error_;
  std::string syntax_error_;
  bool abandoned_now_ = false;
};

}  // namespace

RequestJson parse_json_body(std::string_view text, const JsonBodyLimits& limits,
                            const std::function<bool()>& abandoned) {
  Builder builder(limits, abandoned);
  RequestJson::sax_parse(text.begin(), text.end(), &builder);
  return builder.result();
}

RequestJson parse_json_object(std::string_view text, const JsonBodyLimits& limits,
                              const std::function<bool()>& abandoned) {
  RequestJson body = parse_json_body(text, limits, abandoned);
  if (!body.is_object()) bad("the request body must be a JSON object");
  return body;
}

}  // namespace tandem::server
