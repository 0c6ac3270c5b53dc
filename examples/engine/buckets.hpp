// buckets.hpp — ZeRO stage 2's gradient buckets: which ranges of the flat gradient buffer backward
// completes together, and where each range lives in its bucket's memory.
//
// Backward completes the gradients a tensor (a "unit") at a time, last layer first; per layer, in this
// order: mlp.c_proj, mlp.c_fc, ln_2 (weight and bias), attn.c_proj, attn.c_attn, ln_1. A layer bucket
// gathers consecutive units: one layer's six by default, or as many as fit the bound
// (--reduce-bucket-size, DeepSpeed's zero_optimization.reduce_bucket_size, in elements; a tensor larger
// than the bound is a bucket of its own). A bucket's tensors, sorted by offset and merged where they
// touch, are its ranges (a whole layer: two, its Linear weights in the decay group and its LayerNorms).
// The embedding bucket holds wte, wpe and ln_f: the tied wte takes the LM head's gradient at the start
// of backward and the embedding's at its end, so that bucket lives through the whole backward and is
// reduced last.
//
// The partition stays the flat, contiguous one of data_parallel.hpp (rank r owns [r x shard,
// (r+1) x shard)), and each bucket is reduced to the owners of the ranges it covers (DeepSpeed's
// stage 2 does the same: a reduce per partition a bucket touches). The other choice, every rank owning
// 1/R of every bucket (even reduce-scatters), would change the shard's layout: the checkpoints'
// per-rank files and their re-partitioning, the zero-to-fp32 export, --deterministic's norm blocks
// and the two fused Adam launches over contiguous groups would all need a per-bucket interleave. Over a
// whole backward the reduce-to-owners moves the same bytes as one reduce-scatter.
#pragma once

#include "layout.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

namespace engine {

/// Elements [begin, end) of the flat buffer, at element `pos` of its bucket's memory.
struct GradRange {
  std::int64_t begin = 0, end = 0, pos = 0;
};

struct Bucket {
  std::vector<GradRange> ranges;  // by offset
  std::int64_t size = 0;          // elements of memory (the ranges, one after the other)
  int first_unit = -1;            // layer buckets: the unit backward writes first ...
  int last_unit = -1;             // ... and last: the bucket is complete after it
};

class BucketPlan {
 public:
  /// The units of a layer, in backward's order.
  enum Unit : int { fc_proj = 0, fc, ln2, attn_proj, qkv, ln1, units_per_layer };

  /// Unit k of layer `layer` in backward's order over the model (the last layer's first).
  static int unit_index(int layers, int layer, int k) { return (layers - 1 - layer) * units_per_layer + k; }

  /// `bound`: the most elements a layer bucket gathers (0: one layer per bucket).
  BucketPlan(const ParamLayout& P, std::int64_t bound) {
    const int L = static_cast<int>(P.layers.size());
    if (L == 0) throw std::logic_error("BucketPlan: a model without layers");
    const auto range_of = [&](int view) {
      const auto& v = P.views[static_cast<std::size_t>(view)];
      return std::pair<std::int64_t, std::int64_t>{v.offset, v.offset + align16(v.numel)};
    };
    // The units: their views, in backward's order.
    std::vector<std::vector<int>> units;
    for (int l = L - 1; l >= 0; --l) {
      const auto& W = P.layers[static_cast<std::size_t>(l)];
      units.push_back({W.fcproj_w});
      units.push_back({W.fc_w});
      units.push_back({W.ln2_w, W.ln2_b});
      units.push_back({W.proj_w});
      units.push_back({W.qkv_w});
      units.push_back({W.ln1_w, W.ln1_b});
    }
    const auto size_of = [&](const std::vector<int>& views) {
      std::int64_t n = 0;
      for (const int v : views) n += range_of(v).second - range_of(v).first;
      return n;
    };
    // Layer buckets: consecutive units, a layer each, or up to the bound.
    std::vector<std::vector<int>> views_of;  // per bucket
    unit_bucket.assign(units.size(), -1);
    std::int64_t filling = 0;
    for (std::size_t u = 0; u < units.size(); ++u) {
      const std::int64_t n = size_of(units[u]);
      const bool fresh = layers.empty() || (bound <= 0 ? u % units_per_layer == 0 : filling + n > bound);
      if (fresh) {
        layers.emplace_back();
        layers.back().first_unit = static_cast<int>(u);
        views_of.emplace_back();
        filling = 0;
      }
      filling += n;
      layers.back().last_unit = static_cast<int>(u);
      views_of.back().insert(views_of.back().end(), units[u].begin(), units[u].end());
      unit_bucket[u] = static_cast<int>(layers.size()) - 1;
    }
    view_bucket.assign(P.views.size(), -2);
    view_pos.assign(P.views.size(), 0);
    const auto lay_out = [&](Bucket& b, std::vector<int> views, int index) {
      std::sort(views.begin(), views.end(), [&](int x, int y) { return range_of(x).first < range_of(y).first; });
      for (const int v : views) {
        const auto [begin, end] = range_of(v);
        if (!b.ranges.empty() && b.ranges.back().end == begin) {
          b.ranges.back().end = end;  // touching: one range
        } else {
          b.ranges.push_back({begin, end, b.size});
        }
        view_bucket[static_cast<std::size_t>(v)] = index;
        view_pos[static_cast<std::size_t>(v)] = b.size;
        b.size += end - begin;
      }
    };
    lay_out(embed, {P.wte, P.wpe, P.lnf_w, P.lnf_b}, -1);
    for (std::size_t i = 0; i < layers.size(); ++i) lay_out(layers[i], views_of[i], static_cast<int>(i));
    for (const auto& b : layers) cap = std::max(cap, b.size);
    for (const int b : view_bucket) {
      if (b == -2) throw std::logic_error("BucketPlan: a tensor in no bucket");
    }
  }

  /// Elements of bucket memory with `buffers` layer-bucket buffers (2 when reductions overlap backward).
  [[nodiscard]] std::int64_t elements(int buffers) const { return embed.size + buffers * cap; }

  Bucket embed;                        // wte, wpe, ln_f: reduced after the embedding's backward
  std::vector<Bucket> layers;          // the layer buckets, in backward's order
  std::vector<int> unit_bucket;        // unit -> its index in `layers`
  std::int64_t cap = 0;                // the largest layer bucket (elements)
  std::vector<int> view_bucket;        // view -> its bucket (-1: embed)
  std::vector<std::int64_t> view_pos;  // view -> its first element in the bucket's memory
};

}  // namespace engine
