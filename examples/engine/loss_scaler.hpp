// loss_scaler.hpp — DeepSpeed's dynamic loss scaler (fp16 training), backend-independent.
//
// The loss is multiplied by the scale before backward (the cross-entropy's gradient is), the reduced
// gradients divided by it before the norm; a step whose gradients hold an inf or NaN is skipped (the
// optimizer and the learning-rate schedule do not step). DeepSpeed's rules (runtime/fp16/loss_scaler.py,
// reimplemented): the scale starts at 2^initial_scale_power; an overflow spends one unit of hysteresis,
// and once none is left halves the scale (not below min_loss_scale); every loss_scale_window steps
// without an overflow double it and refill the hysteresis. A fixed scale (--loss-scale X) never
// changes but still skips overflowing steps. The decision is the same on every rank because the
// overflow is read from the global gradient norm, which every rank computes from all ranks' blocks.
#pragma once

#include "config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>

namespace engine {

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(const Config& c)
      : enabled_(c.loss_scale != 1.0),
        dynamic_(c.loss_scale == 0.0),
        scale_(c.loss_scale == 0.0 ? std::ldexp(1.0, static_cast<int>(c.initial_scale_power)) : c.loss_scale),
        window_(c.loss_scale_window),
        hysteresis_(c.hysteresis),
        cur_hysteresis_(c.hysteresis),
        min_scale_(c.min_loss_scale),
        verbose_(c.rank == 0 && !c.quiet) {}

  [[nodiscard]] bool enabled() const noexcept { return enabled_; }
  [[nodiscard]] bool dynamic() const noexcept { return dynamic_; }
  /// The scale the next step runs with (1 when disabled).
  [[nodiscard]] double scale() const noexcept { return enabled_ ? scale_ : 1.0; }
  [[nodiscard]] std::int64_t skipped() const noexcept { return skipped_; }
  [[nodiscard]] int hysteresis_left() const noexcept { return cur_hysteresis_; }

  /// After a step's overflow check: skips count, the scale moves (dynamic only).
  void update(bool overflow) {
    if (!enabled_) return;
    if (overflow) {
      ++skipped_;
      const double attempted = scale_;
      if (dynamic_) {
        if (hysteresis_ == 1 || cur_hysteresis_ == 1) {
          scale_ = std::max(scale_ / 2, min_scale_);
        } else {
          --cur_hysteresis_;
        }
      }
      last_overflow_iter_ = iter_;
      if (verbose_) {
        std::printf("[engine] OVERFLOW! Skipping step. Attempted loss scale: %.17g, reducing to %.17g\n", attempted, scale_);
      }
    } else if (dynamic_ && (iter_ - last_overflow_iter_) % window_ == 0) {
      cur_hysteresis_ = hysteresis_;
      scale_ *= 2;
    }
    ++iter_;
  }

  /// For checkpoints: "scale iter last_overflow_iter hysteresis skipped".
  [[nodiscard]] std::string state() const {
    std::ostringstream o;
    o.precision(17);
    o << scale_ << ',' << iter_ << ',' << last_overflow_iter_ << ',' << cur_hysteresis_ << ',' << skipped_;
    return o.str();
  }
  /// What is wrong with a checkpoint's loss_scale value ("" when nothing): state()'s five numbers.
  [[nodiscard]] static std::string state_error(const std::string& text) {
    State s;
    return parse(text, s);
  }
  void restore(const std::string& text) {
    State s;
    if (const std::string why = parse(text, s); !why.empty()) {
      throw UsageError("checkpoint: bad 'loss_scale' value '" + text + "': " + why);
    }
    scale_ = s.scale;
    iter_ = s.iter;
    last_overflow_iter_ = s.last_overflow_iter;
    cur_hysteresis_ = s.hysteresis;
    skipped_ = s.skipped;
  }

 private:
  bool enabled_, dynamic_;
  double scale_;
  std::int64_t window_;
  int hysteresis_, cur_hysteresis_;
  double min_scale_;
  bool verbose_;
  std::int64_t iter_ = 0, last_overflow_iter_ = -1, skipped_ = 0;

  struct State {
    double scale = 0;
    std::int64_t iter = 0, last_overflow_iter = 0;
    int hysteresis = 0;
    std::int64_t skipped = 0;
  };
  static std::string parse(const std::string& text, State& s) {
    std::istringstream in(text);
    char c[4] = {};
    in >> s.scale >> c[0] >> s.iter >> c[1] >> s.last_overflow_iter >> c[2] >> s.hysteresis >> c[3] >> s.skipped;
    if (!in || std::string(c, 4) != ",,,," || in.peek() != std::char_traits<char>::eof()) {
      return "expected 'scale,iteration,last overflow iteration,hysteresis left,skipped steps'";
    }
    if (!std::isfinite(s.scale) || s.scale <= 0) return "the scale is not a positive finite number";
    // Counts as update() keeps them: the last overflow before this iteration (-1: none yet; so the
    // iteration is not negative), at least one unit of hysteresis left, at most one skipped step per
    // iteration.
    if (s.last_overflow_iter < -1 || s.last_overflow_iter >= s.iter || s.hysteresis < 1 || s.skipped < 0 ||
        s.skipped > s.iter) {
      return "the counts are not ones training reaches";
    }
    return "";
  }
};

}  // namespace engine
