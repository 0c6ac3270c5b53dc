// deepspeed_config.hpp — --deepspeed-config ds_config.json: DeepSpeed's JSON config mapped onto the
// engine's Config. A key the engine does not support is an error naming it (DeepSpeed's own config
// accepts hundreds; silently ignoring one would train something other than what the file says).
//
// Supported (DeepSpeed's names and meanings):
//   train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps  (the batch triple)
//   gradient_clipping, steps_per_print
//   optimizer {type: Adam | AdamW, params {lr, betas, eps, weight_decay, adam_w_mode: true}}
//   scheduler {type: WarmupCosineLR, params {total_num_steps, warmup_num_steps, cos_min_ratio,
//              warmup_min_ratio: 0, warmup_type: linear}}
//             {type: WarmupLR, params {warmup_max_lr, warmup_num_steps, warmup_min_lr: 0, warmup_type: linear}}
//   fp16 {enabled, loss_scale, initial_scale_power, loss_scale_window, hysteresis, min_loss_scale}
//        (enabled: --dtype fp16 with loss_scale 0 = the dynamic scaler, else that fixed scale; the
//        scaler's settings apply with --loss-scale too)
//   bf16 {enabled}                     --dtype bf16
//   zero_optimization {stage: 1 | 2, reduce_scatter: true, contiguous_gradients,
//                      overlap_comm (--overlap on | off; absent: auto),
//                      reduce_bucket_size (stage 2's layer buckets, elements; buckets.hpp)}
//   activation_checkpointing {partition_activations: false, cpu_checkpointing: false,
//                      contiguous_memory_optimization, number_checkpoints: null,
//                      synchronize_checkpoint_boundary: false, profile: false}
//        (--activation-checkpointing: in DeepSpeed the section configures the checkpoints a model's
//        code makes; the engine is that code, and makes one a block when the section is there)
// Command-line flags override its values, wherever they stand (the config is read before them).
#pragma once

#include "config.hpp"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace engine {

struct JsonMember;

/// A JSON value (enough of JSON for a config file: objects keep their keys in order).
struct Json {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> items;
  // Not std::pair<std::string, Json>: a pair of the incomplete Json is instantiated here, which clang
  // refuses (a vector of a declared struct may wait for its definition).
  std::vector<JsonMember> members;
};

/// One member of a JSON object.
struct JsonMember {
  std::string key;
  Json value;
};

namespace detail {

class JsonParser {
 public:
  JsonParser(const std::string& text, std::string where) : t_(text), where_(std::move(where)) {}

  Json parse() {
    Json v = value();
    ws();
    if (i_ != t_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    std::size_t line = 1;
    for (std::size_t k = 0; k < i_ && k < t_.size(); ++k) line += t_[k] == '\n';
    throw UsageError(where_ + ":" + std::to_string(line) + ": not valid JSON: " + what);
  }
  void ws() {
    while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_]))) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string string_lit() {
    expect('"');
    std::string out;
    while (i_ < t_.size() && t_[i_] != '"') {
      char c = t_[i_++];
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character in a string (write it as an escape)");
      if (c == '\\') {
        if (i_ >= t_.size()) fail("an unfinished escape");
        const char e = t_[i_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case '"': case '\\': case '/': c = e; break;
          case 'u': fail("\\u escapes are not supported in a config");
          default: fail(std::string("an unknown escape '\\") + e + "'");
        }
      }
      out += c;
    }
    if (i_ >= t_.size()) fail("an unterminated string");
    ++i_;
    return out;
  }
  /// The length of the JSON number at i_ (0: none): -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? —
  /// not strtod's wider forms (hex, "nan", "inf", "+1", ".5"), which DeepSpeed's json.load refuses.
  [[nodiscard]] std::size_t number_length() const {
    const auto digit = [&](std::size_t k) { return k < t_.size() && t_[k] >= '0' && t_[k] <= '9'; };
    std::size_t k = i_;
    if (k < t_.size() && t_[k] == '-') ++k;
    if (!digit(k)) return 0;
    if (t_[k] == '0') {
      ++k;
    } else {
      while (digit(k)) ++k;
    }
    if (k < t_.size() && t_[k] == '.') {
      if (!digit(k + 1)) return 0;
      for (++k; digit(k); ++k) {}
    }
    if (k < t_.size() && (t_[k] == 'e' || t_[k] == 'E')) {
      std::size_t e = k + 1;
      if (e < t_.size() && (t_[e] == '+' || t_[e] == '-')) ++e;
      if (!digit(e)) return 0;
      for (k = e; digit(k); ++k) {}
    }
    return k - i_;
  }
  Json value() {
    ws();
    if (i_ >= t_.size()) fail("unexpected end");
    Json v;
    const char c = t_[i_];
    if (c == '{') {
      ++i_;
      v.kind = Json::Kind::object;
      if (eat('}')) return v;
      do {
        ws();
        std::string k = string_lit();
        expect(':');
        v.members.push_back(JsonMember{std::move(k), value()});
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++i_;
      v.kind = Json::Kind::array;
      if (eat(']')) return v;
      do {
        v.items.push_back(value());
      } while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::Kind::string;
      v.str = string_lit();
    } else if (t_.compare(i_, 4, "true") == 0 || t_.compare(i_, 5, "false") == 0) {
      v.kind = Json::Kind::boolean;
      v.b = t_[i_] == 't';
      i_ += v.b ? 4 : 5;
    } else if (t_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else {
      const std::size_t length = number_length();
      if (length == 0) fail("expected a value");
      v.num = std::strtod(t_.substr(i_, length).c_str(), nullptr);
      v.kind = Json::Kind::number;
      i_ += length;
    }
    return v;
  }

  const std::string& t_;
  std::string where_;
  std::size_t i_ = 0;
};

/// Reads the members of an object, each through its handler; a member without one is an error.
class ConfigObject {
 public:
  ConfigObject(const Json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (j.kind != Json::Kind::object) throw UsageError("--deepspeed-config: " + where() + " must be an object");
    // DeepSpeed refuses a key given twice (dict_raise_error_on_duplicate_keys): which one counts is a guess.
    for (std::size_t i = 0; i < j.members.size(); ++i) {
      for (std::size_t k = 0; k < i; ++k) {
        if (j.members[k].key == j.members[i].key) {
          throw UsageError("--deepspeed-config: duplicate key '" + name(j.members[i].key) + "'");
        }
      }
    }
  }
  [[nodiscard]] const Json* get(const std::string& key) {
    for (const auto& [k, v] : j_.members) {
      if (k == key) {
        used_.push_back(key);
        return &v;
      }
    }
    return nullptr;
  }
  double number(const std::string& key, double fallback) {
    const Json* v = get(key);
    if (v == nullptr || v->kind == Json::Kind::null) return fallback;
    if (v->kind != Json::Kind::number) throw UsageError("--deepspeed-config: " + name(key) + " must be a number");
    return v->num;
  }
  /// A number in [lo, hi] (the bounds of the matching command-line flag).
  double number(const std::string& key, double fallback, double lo, double hi) {
    const double x = number(key, fallback);
    check_range(name(key), x, lo, hi);
    return x;
  }
  static void check_range(const std::string& what, double x, double lo, double hi) {
    if (!(x >= lo && x <= hi)) {
      char text[96];
      std::snprintf(text, sizeof text, " must be a number in [%g, %g], got %g", lo, hi, x);
      throw UsageError("--deepspeed-config: " + what + text);
    }
  }
  bool boolean(const std::string& key, bool fallback) {
    const Json* v = get(key);
    if (v == nullptr) return fallback;
    if (v->kind != Json::Kind::boolean) throw UsageError("--deepspeed-config: " + name(key) + " must be true or false");
    return v->b;
  }
  std::string string(const std::string& key, const std::string& fallback) {
    const Json* v = get(key);
    if (v == nullptr) return fallback;
    if (v->kind != Json::Kind::string) throw UsageError("--deepspeed-config: " + name(key) + " must be a string");
    return v->str;
  }
  /// Every member was read: else the first unknown one is the error.
  void finish() const {
    for (const auto& [k, v] : j_.members) {
      bool known = false;
      for (const auto& u : used_) known = known || u == k;
      if (!known) throw UsageError("--deepspeed-config: unsupported key '" + name(k) + "' (see examples/engine/deepspeed_config.hpp)");
    }
  }
  [[nodiscard]] std::string name(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  [[nodiscard]] std::string where() const { return path_.empty() ? "the top level" : "'" + path_ + "'"; }

 private:
  const Json& j_;
  std::string path_;
  std::vector<std::string> used_;
};

/// An integer in [lo, hi] (hi: the matching command-line flag's bound); checked before any cast.
inline std::int64_t whole(const ConfigObject& o, const std::string& key, const Json& j, double lo, double hi = 1099511627776.0) {
  const double v = j.num;
  if (j.kind != Json::Kind::number || !(v >= lo) || v != std::floor(v)) {
    throw UsageError("--deepspeed-config: " + o.name(key) + " must be an integer >= " + std::to_string(static_cast<long long>(lo)));
  }
  if (v > hi) {
    char got[32];
    std::snprintf(got, sizeof got, "%.15g", v);  // 1048577 as written, not %g's 1.04858e+06
    throw UsageError("--deepspeed-config: " + o.name(key) + " must be at most " + std::to_string(static_cast<long long>(hi)) +
                     ", got " + got);
  }
  return static_cast<std::int64_t>(v);
}

}  // namespace detail

inline Json parse_json(const std::string& text, const std::string& where) { return detail::JsonParser(text, where).parse(); }

/// Applies a DeepSpeed config's settings to `c` (see the top of this header).
inline void apply_deepspeed_config(Config& c, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--deepspeed-config: cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const Json root = parse_json(ss.str(), path);
  using detail::ConfigObject;
  using detail::whole;
  ConfigObject top(root, "");
  if (const Json* v = top.get("train_batch_size")) {
    c.global_batch = whole(top, "train_batch_size", *v, 1, 1 << 24);
  }
  if (const Json* v = top.get("train_micro_batch_size_per_gpu")) {
    c.batch = static_cast<int>(whole(top, "train_micro_batch_size_per_gpu", *v, 1, 1 << 20));
    c.batch_given = true;
  }
  if (const Json* v = top.get("gradient_accumulation_steps")) {
    c.accum = static_cast<int>(whole(top, "gradient_accumulation_steps", *v, 1, 1 << 16));
    c.accum_given = true;
  }
  c.clip = top.number("gradient_clipping", c.clip, 0, 1e9);
  if (const Json* v = top.get("steps_per_print")) c.print_every = whole(top, "steps_per_print", *v, 1);
  if (const Json* v = top.get("optimizer")) {
    ConfigObject o(*v, "optimizer");
    const std::string type = o.string("type", "");
    if (type != "Adam" && type != "AdamW" && type != "adam" && type != "adamw") {
      throw UsageError("--deepspeed-config: optimizer.type '" + type + "' is not supported (Adam, AdamW: the fused AdamW)");
    }
    if (const Json* p = o.get("params")) {
      ConfigObject q(*p, "optimizer.params");
      c.lr = q.number("lr", c.lr, 0, 10);
      c.eps = q.number("eps", c.eps, 0, 1);
      c.weight_decay = q.number("weight_decay", c.weight_decay, 0, 10);
      if (!q.boolean("adam_w_mode", true)) throw UsageError("--deepspeed-config: optimizer.params.adam_w_mode false (L2-regularised Adam) is not supported");
      if (const Json* b = q.get("betas")) {
        if (b->kind != Json::Kind::array || b->items.size() != 2) throw UsageError("--deepspeed-config: optimizer.params.betas must be [beta1, beta2]");
        for (const Json& beta : b->items) {
          if (beta.kind != Json::Kind::number) throw UsageError("--deepspeed-config: optimizer.params.betas must be [beta1, beta2]");
          ConfigObject::check_range("optimizer.params.betas", beta.num, 0, 0.999999);
        }
        c.beta1 = b->items[0].num;
        c.beta2 = b->items[1].num;
      }
      q.finish();
    }
    o.finish();
  }
  if (const Json* v = top.get("scheduler")) {
    ConfigObject o(*v, "scheduler");
    const std::string type = o.string("type", "");
    const Json* p = o.get("params");
    static const Json empty_object = [] {
      Json j;
      j.kind = Json::Kind::object;
      return j;
    }();
    ConfigObject q(p != nullptr ? *p : empty_object, "scheduler.params");
    if (q.string("warmup_type", "linear") != "linear") throw UsageError("--deepspeed-config: scheduler.params.warmup_type must be linear");
    if (type == "WarmupCosineLR") {
      c.schedule = "cosine";
      if (const Json* s = q.get("total_num_steps")) c.steps = whole(q, "total_num_steps", *s, 1);
      if (const Json* s = q.get("warmup_num_steps")) c.warmup = whole(q, "warmup_num_steps", *s, 0);
      c.min_lr = c.lr * q.number("cos_min_ratio", 0.0001, 0, 1);
      if (q.number("warmup_min_ratio", 0.0) != 0.0) throw UsageError("--deepspeed-config: scheduler.params.warmup_min_ratio other than 0 is not supported");
    } else if (type == "WarmupLR") {
      c.schedule = "constant";
      c.lr = q.number("warmup_max_lr", c.lr, 0, 10);
      if (const Json* s = q.get("warmup_num_steps")) c.warmup = whole(q, "warmup_num_steps", *s, 0);
      if (q.number("warmup_min_lr", 0.0) != 0.0) throw UsageError("--deepspeed-config: scheduler.params.warmup_min_lr other than 0 is not supported");
    } else {
      throw UsageError("--deepspeed-config: scheduler.type '" + type + "' is not supported (WarmupCosineLR, WarmupLR)");
    }
    q.finish();
    o.finish();
  }
  if (const Json* v = top.get("fp16")) {
    ConfigObject o(*v, "fp16");
    const bool enabled = o.boolean("enabled", false);
    const double ls = o.number("loss_scale", 0);
    if (!(ls >= 0 && ls <= 1e30)) throw UsageError("--deepspeed-config: fp16.loss_scale must be >= 0 (0: dynamic)");
    c.initial_scale_power = o.number("initial_scale_power", c.initial_scale_power, 0, 64);
    if (const Json* w = o.get("loss_scale_window"); w != nullptr && w->kind != Json::Kind::null) {
      c.loss_scale_window = static_cast<int>(whole(o, "loss_scale_window", *w, 1, 1 << 30));
    }
    if (const Json* h = o.get("hysteresis"); h != nullptr && h->kind != Json::Kind::null) {
      c.hysteresis = static_cast<int>(whole(o, "hysteresis", *h, 1, 1 << 20));
    }
    c.min_loss_scale = o.number("min_loss_scale", c.min_loss_scale, 1e-30, 1e30);
    if (enabled) {
      c.dtype = "fp16";
      c.loss_scale = ls;  // 0: dynamic
    }
    o.finish();
  }
  if (const Json* v = top.get("bf16")) {
    ConfigObject o(*v, "bf16");
    if (o.boolean("enabled", false)) {
      if (c.dtype == "fp16") throw UsageError("--deepspeed-config: fp16.enabled and bf16.enabled are both true");
      c.dtype = "bf16";
    }
    o.finish();
  }
  if (const Json* v = top.get("zero_optimization")) {
    ConfigObject o(*v, "zero_optimization");
    const double stage = o.number("stage", 1);
    if (stage != 1 && stage != 2) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", stage);
      throw UsageError("--deepspeed-config: zero_optimization.stage " + std::string(text) +
                       " is not supported (1: optimizer state partitioned, 2: and gradients)");
    }
    c.zero_stage = static_cast<int>(stage);
    if (!o.boolean("reduce_scatter", true)) throw UsageError("--deepspeed-config: zero_optimization.reduce_scatter false is not supported");
    (void)o.boolean("contiguous_gradients", true);  // the gradients are one flat buffer either way
    if (o.get("overlap_comm") != nullptr) c.overlap = o.boolean("overlap_comm", false) ? "on" : "off";  // absent: auto
    const double bucket = o.number("reduce_bucket_size", static_cast<double>(c.reduce_bucket));
    if (!(bucket >= 0 && bucket <= 1e15) || bucket != std::floor(bucket)) {
      throw UsageError("--deepspeed-config: zero_optimization.reduce_bucket_size must be an integer >= 0");
    }
    c.reduce_bucket = static_cast<std::int64_t>(bucket);
    o.finish();
  }
  if (const Json* v = top.get("activation_checkpointing")) {
    ConfigObject o(*v, "activation_checkpointing");
    const auto refuse_true = [&](const char* key, const char* why) {
      if (o.boolean(key, false)) {
        throw UsageError(std::string("--deepspeed-config: activation_checkpointing.") + key + " true is not supported (" + why + ")");
      }
    };
    refuse_true("partition_activations", "it splits checkpoints over model-parallel ranks; the engine has none");
    refuse_true("cpu_checkpointing", "the checkpoints stay in the device's memory");
    refuse_true("synchronize_checkpoint_boundary", "the engine's stream orders the recomputation");
    refuse_true("profile", "--trace shows each layer's recomputation as a span");
    (void)o.boolean("contiguous_memory_optimization", false);  // the kept outputs are one buffer either way
    if (const Json* n = o.get("number_checkpoints"); n != nullptr && n->kind != Json::Kind::null) {
      throw UsageError("--deepspeed-config: activation_checkpointing.number_checkpoints is not supported (null: the "
                       "engine keeps one checkpoint a block)");
    }
    c.activation_checkpointing = true;
    o.finish();
  }
  top.finish();
}

}  // namespace engine
