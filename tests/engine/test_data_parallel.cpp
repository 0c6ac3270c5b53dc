// The data-parallel engine's pieces that need no second rank: DeepSpeed's batch triple
// (resolve_batch), the ZeRO partition (shard_size), DeepSpeed's dynamic loss scaler, the DeepSpeed
// JSON config, and a checkpoint of one rank re-partitioned for four. The runs on several ranks are
// run_dp.cmake's (under mpiexec).
#include "buckets.hpp"
#include "checkpoint.hpp"
#include "config.hpp"
#include "data_parallel.hpp"
#include "deepspeed_config.hpp"
#include "engine_test_support.hpp"
#include "loss_scaler.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;

using engine_test::temp_dir;

engine::Config with_batch(int batch, int accum, std::int64_t global, bool det = false) {
  engine::Config c;
  c.batch = batch;
  c.accum = accum;
  c.global_batch = global;
  c.deterministic = det;
  return c;
}

std::string error_of(engine::Config c, int ranks) {
  try {
    engine::resolve_batch(c, ranks);
  } catch (const engine::UsageError& e) {
    return e.what();
  }
  return "";
}

fs::path write_json(const fs::path& dir, const std::string& text) {
  const fs::path p = dir / "ds.json";
  std::ofstream(p) << text;
  return p;
}

std::string ds_error(const fs::path& dir, const std::string& text) {
  engine::Config c;
  try {
    engine::apply_deepspeed_config(c, write_json(dir, text).string());
  } catch (const engine::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("resolve_batch: the global batch is fixed; each rank runs it as micro-batches of at most --batch") {
  engine::Config c = with_batch(12, 1, 0);  // the one-rank run: 12 x 1
  engine::resolve_batch(c, 4);
  CHECK(c.global_batch == 12);
  CHECK(c.batch == 3);
  CHECK(c.accum == 1);
  CHECK(c.draw_chunk == 12);
  CHECK(c.eval_rows == 12);

  c = with_batch(4, 1, 48);  // --global-batch 48 --batch 4 on 3 ranks: 16 each, 4 x 4
  engine::resolve_batch(c, 3);
  CHECK(c.batch == 4);
  CHECK(c.accum == 4);
  CHECK(c.draw_chunk == 48);

  c = with_batch(5, 1, 12);  // 12 / 2 = 6 per rank: the largest divisor of 6 up to 5 is 3
  engine::resolve_batch(c, 2);
  CHECK(c.batch == 3);
  CHECK(c.accum == 2);

  c = with_batch(12, 3, 24);  // --global-batch 24 --accum 3 (no --batch): micro = 24 / 2 / 3 = 4
  c.accum_given = true;
  engine::resolve_batch(c, 2);
  CHECK(c.batch == 4);
  CHECK(c.accum == 3);

  CHECK(error_of(with_batch(3, 1, 12), 5) ==
        "the global batch of 12 sequences does not split over 5 ranks (give --global-batch a multiple of the rank count)");
  engine::Config all = with_batch(3, 2, 12);
  all.batch_given = all.accum_given = true;
  CHECK(error_of(all, 1) == "the batch triple does not hold: global batch 12 != micro-batch 3 x gradient accumulation 2 x 1 ranks");
  CHECK(error_of(all, 2).empty());
  CHECK(error_of(with_batch(4, 1, 12, true), 2) ==
        "--deterministic keeps the micro-batch at --batch 4, and 2 ranks get 6 sequences each of the global batch 12, not a multiple of it");
}

TEST_CASE("shard_size: a multiple of the norm block covering the model; ranks x shard >= total") {
  CHECK(engine::shard_size(800768, 1) == 802816);  // 196 blocks of 4096
  CHECK(engine::shard_size(800768, 2) == 401408);
  CHECK(engine::shard_size(800768, 4) == 200704);
  CHECK(engine::shard_size(800768, 3) == 270336);
  CHECK(engine::shard_size(800768, 3) * 3 >= 800768);
  CHECK(engine::shard_size(10, 4) == engine::norm_block);
}

TEST_CASE("DynamicLossScaler: DeepSpeed's rules (2^16, window, hysteresis, min scale, skipped steps)") {
  engine::Config c;
  c.loss_scale = 0;  // dynamic
  c.loss_scale_window = 3;
  c.quiet = true;
  engine::DynamicLossScaler s(c);
  REQUIRE(s.enabled());
  CHECK(s.scale() == 65536.0);
  s.update(false);  // iter 0
  s.update(false);  // iter 1
  CHECK(s.scale() == 65536.0);
  s.update(false);  // iter 2: (2 - (-1)) % 3 == 0 -> doubled
  CHECK(s.scale() == 131072.0);
  s.update(true);  // an overflow spends one unit of hysteresis (2 -> 1): the scale stays
  CHECK(s.scale() == 131072.0);
  CHECK(s.hysteresis_left() == 1);
  s.update(true);  // none left: halved
  CHECK(s.scale() == 65536.0);
  CHECK(s.skipped() == 2);
  s.update(false);  // iter 5: 5 - 4 = 1
  s.update(false);  // iter 6: 2
  CHECK(s.scale() == 65536.0);
  s.update(false);  // iter 7: 3 -> doubled, hysteresis refilled
  CHECK(s.scale() == 131072.0);
  CHECK(s.hysteresis_left() == 2);

  // The state survives a checkpoint.
  engine::DynamicLossScaler r(c);
  CHECK(engine::DynamicLossScaler::state_error(s.state()).empty());
  r.restore(s.state());
  CHECK(r.scale() == s.scale());
  CHECK(r.skipped() == 2);
  CHECK(r.state() == s.state());

  // Never below min_loss_scale.
  c.initial_scale_power = 1;
  c.hysteresis = 1;
  c.min_loss_scale = 1;
  engine::DynamicLossScaler m(c);
  m.update(true);
  m.update(true);
  m.update(true);
  CHECK(m.scale() == 1.0);
  CHECK(m.skipped() == 3);

  // Disabled: scale 1, nothing counted.
  engine::DynamicLossScaler off{engine::Config{}};
  CHECK_FALSE(off.enabled());
  off.update(true);
  CHECK(off.scale() == 1.0);
  CHECK(off.skipped() == 0);
}

TEST_CASE("DynamicLossScaler: a fixed scale (--loss-scale X) skips overflowing steps and never moves; the state's text") {
  engine::Config c;
  c.loss_scale = 128;
  c.loss_scale_window = 2;
  c.quiet = true;
  engine::DynamicLossScaler s(c);
  CHECK(s.enabled());
  CHECK_FALSE(s.dynamic());
  CHECK(s.scale() == 128.0);
  for (int i = 0; i < 5; ++i) s.update(false);  // no window doubles it
  s.update(true);
  s.update(true);  // nor do overflows halve it, whatever the hysteresis
  s.update(true);
  CHECK(s.scale() == 128.0);
  CHECK(s.skipped() == 3);
  CHECK(s.hysteresis_left() == 2);
  CHECK(s.state() == "128,8,7,2,3");  // scale, iteration, last overflow, hysteresis left, skipped
  c.loss_scale = 0.1;  // in full: a checkpoint keeps the exact double
  CHECK(engine::DynamicLossScaler(c).state() == "0.10000000000000001,0,-1,2,0");

  // Dynamic: the state in that order, as update() leaves it.
  engine::Config d;
  d.loss_scale = 0;
  d.loss_scale_window = 2;
  d.initial_scale_power = 3;
  d.hysteresis = 3;
  d.quiet = true;
  engine::DynamicLossScaler g(d);
  CHECK(g.scale() == 8.0);  // 2^initial_scale_power
  g.update(false);          // iteration 0: (0 - -1) % 2 = 1
  g.update(false);          // iteration 1: doubled
  g.update(true);           // iteration 2: hysteresis 3 -> 2
  CHECK(g.state() == "16,3,2,2,1");

  // Hysteresis 1 (DeepSpeed's delayed_shift 1) halves at every overflow, whatever a checkpoint's count.
  d.hysteresis = 1;
  engine::DynamicLossScaler h(d);
  h.restore("64,5,2,2,1");
  h.update(true);
  CHECK(h.scale() == 32.0);
  CHECK(h.hysteresis_left() == 2);

  // Disabled (--loss-scale 1): the scale is 1 even after a scaled run's state is restored.
  engine::DynamicLossScaler off{engine::Config{}};
  off.restore("65536,4,-1,2,0");
  CHECK(off.scale() == 1.0);
}

TEST_CASE("--deepspeed-config: DeepSpeed's keys set the engine's settings; an unsupported key is an error naming it") {
  const fs::path dir = temp_dir("ds");
  engine::Config c;
  engine::apply_deepspeed_config(c, write_json(dir, R"({
    "train_batch_size": 48, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 6,
    "gradient_clipping": 0.5, "steps_per_print": 7,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 900, "warmup_num_steps": 30, "cos_min_ratio": 0.2}},
    "fp16": {"enabled": false, "initial_scale_power": 12, "loss_scale_window": 500, "hysteresis": 3, "min_loss_scale": 2},
    "bf16": {"enabled": true},
    "zero_optimization": {"stage": 2, "overlap_comm": false, "contiguous_gradients": true, "reduce_bucket_size": 5e8}
  })").string());
  CHECK(c.global_batch == 48);
  CHECK(c.batch == 4);
  CHECK(c.accum == 6);
  CHECK((c.batch_given && c.accum_given));
  CHECK(c.clip == 0.5);
  CHECK(c.print_every == 7);
  CHECK(c.lr == 3e-4);
  CHECK(c.beta1 == 0.8);
  CHECK(c.beta2 == 0.95);
  CHECK(c.eps == 1e-6);
  CHECK(c.weight_decay == 0.01);
  CHECK(c.schedule == "cosine");
  CHECK(c.steps == 900);
  CHECK(c.warmup == 30);
  CHECK(std::fabs(c.min_lr - 6e-5) < 1e-18);
  CHECK(c.initial_scale_power == 12);
  CHECK(c.loss_scale_window == 500);
  CHECK(c.hysteresis == 3);
  CHECK(c.min_loss_scale == 2);
  CHECK(c.dtype == "bf16");
  CHECK(c.zero_stage == 2);
  CHECK(c.reduce_bucket == 500000000);
  CHECK(c.overlap == "off");  // overlap_comm false: DeepSpeed's setting, not the engine's auto
  engine::Config on;
  engine::apply_deepspeed_config(on, write_json(dir, R"({"zero_optimization": {"stage": 1, "overlap_comm": true}})").string());
  CHECK(on.overlap == "on");
  engine::Config absent;
  engine::apply_deepspeed_config(absent, write_json(dir, R"({"zero_optimization": {"stage": 1}})").string());
  CHECK(absent.overlap == "auto");
  CHECK(ds_error(dir, R"({"zero_optimization": {"overlap_comm": 1}})") ==
        "--deepspeed-config: zero_optimization.overlap_comm must be true or false");
  CHECK(ds_error(dir, R"({"zero_optimization": {"stage": 2, "reduce_bucket_size": -1}})") ==
        "--deepspeed-config: zero_optimization.reduce_bucket_size must be an integer >= 0");

  // activation_checkpointing: the section turns --activation-checkpointing on; what the engine cannot do is named.
  engine::Config ac;
  CHECK_FALSE(ac.activation_checkpointing);
  engine::apply_deepspeed_config(ac, write_json(dir, R"({"activation_checkpointing": {"partition_activations": false,
      "contiguous_memory_optimization": true, "number_checkpoints": null, "cpu_checkpointing": false}})").string());
  CHECK(ac.activation_checkpointing);
  CHECK(ds_error(dir, R"({"activation_checkpointing": {"partition_activations": true}})") ==
        "--deepspeed-config: activation_checkpointing.partition_activations true is not supported (it splits "
        "checkpoints over model-parallel ranks; the engine has none)");
  CHECK(ds_error(dir, R"({"activation_checkpointing": {"cpu_checkpointing": true}})") ==
        "--deepspeed-config: activation_checkpointing.cpu_checkpointing true is not supported (the checkpoints stay in "
        "the device's memory)");
  CHECK(ds_error(dir, R"({"activation_checkpointing": {"number_checkpoints": 12}})") ==
        "--deepspeed-config: activation_checkpointing.number_checkpoints is not supported (null: the engine keeps one "
        "checkpoint a block)");
  CHECK(ds_error(dir, R"({"activation_checkpointing": {"partition_activation": false}})") ==
        "--deepspeed-config: unsupported key 'activation_checkpointing.partition_activation' (see "
        "examples/engine/deepspeed_config.hpp)");

  CHECK(ds_error(dir, R"({"train_batch_size": 8, "wall_clock_breakdown": true})") ==
        "--deepspeed-config: unsupported key 'wall_clock_breakdown' (see examples/engine/deepspeed_config.hpp)");
  CHECK(ds_error(dir, R"({"optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": true}}})") ==
        "--deepspeed-config: unsupported key 'optimizer.params.torch_adam' (see examples/engine/deepspeed_config.hpp)");
  CHECK(ds_error(dir, R"({"zero_optimization": {"stage": 3}})") ==
        "--deepspeed-config: zero_optimization.stage 3 is not supported (1: optimizer state partitioned, 2: and gradients)");
  CHECK(ds_error(dir, R"({"optimizer": {"type": "Lamb"}})") ==
        "--deepspeed-config: optimizer.type 'Lamb' is not supported (Adam, AdamW: the fused AdamW)");
  CHECK(ds_error(dir, R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})") ==
        "--deepspeed-config: fp16.enabled and bf16.enabled are both true");
  engine::Config h;
  engine::apply_deepspeed_config(h, write_json(dir, R"({"fp16": {"enabled": true, "initial_scale_power": 20}})").string());
  CHECK(h.dtype == "fp16");
  CHECK(h.loss_scale == 0.0);  // DeepSpeed's loss_scale 0: the dynamic scaler
  CHECK(h.initial_scale_power == 20);
  engine::Config fixed;
  engine::apply_deepspeed_config(fixed, write_json(dir, R"({"fp16": {"enabled": true, "loss_scale": 128}})").string());
  CHECK(fixed.dtype == "fp16");
  CHECK(fixed.loss_scale == 128.0);
  // Values in the command line's bounds, checked before any cast; a key given twice refused (as DeepSpeed does).
  CHECK(ds_error(dir, R"({"optimizer": {"type": "AdamW", "params": {"lr": -1}}})") ==
        "--deepspeed-config: optimizer.params.lr must be a number in [0, 10], got -1");
  CHECK(ds_error(dir, R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9, 1.5]}}})") ==
        "--deepspeed-config: optimizer.params.betas must be a number in [0, 0.999999], got 1.5");
  CHECK(ds_error(dir, R"({"optimizer": {"type": "AdamW", "params": {"betas": ["0.9", 0.99]}}})") ==
        "--deepspeed-config: optimizer.params.betas must be [beta1, beta2]");
  CHECK(ds_error(dir, R"({"gradient_clipping": -0.5})") ==
        "--deepspeed-config: gradient_clipping must be a number in [0, 1e+09], got -0.5");
  CHECK(ds_error(dir, R"({"train_batch_size": 1e30})") == "--deepspeed-config: train_batch_size must be at most 16777216, got 1e+30");
  CHECK(ds_error(dir, R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": "8"}}})") ==
        "--deepspeed-config: scheduler.params.warmup_num_steps must be an integer >= 0");
  CHECK(ds_error(dir, R"({"fp16": {"enabled": true, "hysteresis": 0.5}})") ==
        "--deepspeed-config: fp16.hysteresis must be an integer >= 1");
  CHECK(ds_error(dir, R"({"zero_optimization": {"stage": 1e300}})") ==
        "--deepspeed-config: zero_optimization.stage 1e+300 is not supported (1: optimizer state partitioned, 2: and gradients)");
  CHECK(ds_error(dir, R"({"train_batch_size": 12, "train_batch_size": 24})") ==
        "--deepspeed-config: duplicate key 'train_batch_size'");
  CHECK(ds_error(dir, R"({"optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "lr": 1e-4}}})") ==
        "--deepspeed-config: duplicate key 'optimizer.params.lr'");
  CHECK(ds_error(dir, R"({"train_batch_size": 8.5})") == "--deepspeed-config: train_batch_size must be an integer >= 1");
  CHECK(ds_error(dir, R"({"train_batch_size": "8"})") == "--deepspeed-config: train_batch_size must be an integer >= 1");
  CHECK(ds_error(dir, "{\"train_batch_size\": 8,\n \"steps_per_print\" 1}").find(":2: not valid JSON: expected ':'") !=
        std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("checkpoints: shards written by 2 ranks read back as 1, 3 or 4 ranks' shards (re-partitioned)") {
  const fs::path dir = temp_dir("shards");
  // Shards are multiples of the 4096-element norm block: on 2 ranks 12288, on 3 8192, so rank 1 of 3
  // reads the end of old shard 0 and the start of old shard 1.
  const std::int64_t total = 20000;
  const auto value = [](int k, std::int64_t i) { return static_cast<float>(k * 100000 + i); };
  // Two ranks' shards as write_checkpoint lays them out (format 2): zero_rank_R.f32 = the master
  // weights, exp_avg and exp_avg_sq of elements [R x shard, (R+1) x shard), padding zero.
  const std::int64_t s2 = engine::shard_size(total, 2);
  const fs::path ck = dir / "step_00000005";
  fs::create_directories(ck);
  std::vector<float> full(static_cast<std::size_t>(total));
  for (std::int64_t i = 0; i < total; ++i) full[static_cast<std::size_t>(i)] = value(0, i);
  for (int r = 0; r < 2; ++r) {
    std::vector<float> v;
    for (int k = 0; k < 3; ++k) {
      for (std::int64_t i = 0; i < s2; ++i) v.push_back(r * s2 + i < total ? value(k, r * s2 + i) : 0.0f);
    }
    engine::detail::write_file_synced(ck / engine::detail::shard_file_name(r), v.data(), v.size() * 4);
  }
  engine::detail::write_file_synced(ck / "params.f32", full.data(), full.size() * 4);
  std::ofstream(ck / "manifest.txt") << "format accel-engine-checkpoint/2\nstep 5\nranks 2\nshard " << s2 << "\ntotal "
                                      << total << "\n";
  REQUIRE(s2 == 12288);
  REQUIRE(engine::shard_size(total, 3) == 8192);
  for (int ranks : {1, 3, 4}) {
    const std::int64_t s = engine::shard_size(total, ranks);
    for (int r = 0; r < ranks; ++r) {
      engine::CheckpointState st = engine::read_checkpoint_manifest(ck);
      CHECK(st.ranks == 2);
      engine::read_checkpoint_tensors(ck, total, st, r, s);
      REQUIRE(st.params.size() == static_cast<std::size_t>(s));
      for (std::int64_t i = 0; i < s; ++i) {
        const std::int64_t g = r * s + i;
        CAPTURE(ranks);
        CAPTURE(g);
        const auto at = static_cast<std::size_t>(i);
        if (g < total) {
          REQUIRE(st.params[at] == value(0, g));
          REQUIRE(st.exp_avg[at] == value(1, g));
          REQUIRE(st.exp_avg_sq[at] == value(2, g));
        } else {
          REQUIRE(st.params[at] == 0.0f);  // padding beyond the old shards reads as zeros
        }
      }
    }
  }
  const std::vector<float> consolidated = engine::consolidate_fp32(ck, total);
  CHECK(consolidated == full);
  // Shards that cannot hold the model (an edited manifest) are refused.
  {
    engine::CheckpointState st = engine::read_checkpoint_manifest(ck);
    st.shard = total / 4;
    CHECK_THROWS_WITH_AS(engine::read_checkpoint_tensors(ck, total, st, 0, total),
                         ("checkpoint: " + ck.string() + " has an inconsistent partition (ranks 2, shard " +
                          std::to_string(total / 4) + ", total " + std::to_string(total) + ")")
                             .c_str(),
                         engine::UsageError);
  }
  // With checksums: every old shard a rank's range reads is checked, and only those.
  {
    std::ofstream m(ck / "manifest.txt", std::ios::app);
    for (int r = 0; r < 2; ++r) {
      const std::string f = engine::detail::shard_file_name(r);
      std::ifstream in(ck / f, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), {});
      m << "checksum " << f << " " << engine::detail::checksum_text(engine::detail::fnv1a64(bytes.data(), bytes.size()))
        << "\n";
    }
  }
  {
    std::fstream f(ck / "zero_rank_00001.f32", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-4, std::ios::end);
    const float one = 1.0f;
    f.write(reinterpret_cast<const char*>(&one), 4);  // the last exp_avg_sq of shard 1
  }
  {
    engine::CheckpointState st = engine::read_checkpoint_manifest(ck);
    engine::read_checkpoint_tensors(ck, total, st, 0, s2);  // rank 0 of 2 reads shard 0 only
    CHECK(st.params[0] == value(0, 0));
  }
  {
    engine::CheckpointState st = engine::read_checkpoint_manifest(ck);
    CHECK_THROWS_WITH_AS(engine::read_checkpoint_tensors(ck, total, st, 1, s2),
                         doctest::Contains(((ck / "zero_rank_00001.f32").string() + " is corrupt: its checksum is").c_str()),
                         engine::UsageError);
  }
  // A shard of another size than the manifest's is refused, naming it.
  fs::resize_file(ck / "zero_rank_00001.f32", static_cast<std::uintmax_t>(3 * s2 - 1) * 4);
  {
    engine::CheckpointState st = engine::read_checkpoint_manifest(ck);
    CHECK_THROWS_WITH_AS(engine::read_checkpoint_tensors(ck, total, st, 0, engine::shard_size(total, 1)),
                         ("checkpoint: " + (ck / "zero_rank_00001.f32").string() + " is missing or does not hold 3 x " +
                          std::to_string(s2) + " floats")
                             .c_str(),
                         engine::UsageError);
  }
  // A missing shard is an error naming it.
  fs::remove(ck / "zero_rank_00001.f32");
  engine::CheckpointState st = engine::read_checkpoint_manifest(ck);
  CHECK_THROWS_WITH_AS(engine::read_checkpoint_tensors(ck, total, st, 0, engine::shard_size(total, 1)),
                       doctest::Contains("zero_rank_00001.f32"), engine::UsageError);
  fs::remove_all(dir);
}

TEST_CASE("DynamicLossScaler: a checkpoint's state is five numbers as update() leaves them, else refused naming what is wrong") {
  const std::string fields = "expected 'scale,iteration,last overflow iteration,hysteresis left,skipped steps'";
  const auto error = [](const std::string& text) { return engine::DynamicLossScaler::state_error(text); };
  CHECK(error("65536,0,-1,2,0").empty());  // a fresh scaler's
  CHECK(error("0.5,7,6,1,7").empty());     // every step skipped so far
  CHECK(error("65536,0,-1,2") == fields);
  CHECK(error("65536,0,-1,2,0 ") == fields);
  CHECK(error("65536,0,-1,2,0x") == fields);
  CHECK(error("65536;0;-1;2;0") == fields);
  CHECK(error("") == fields);
  const std::string scale = "the scale is not a positive finite number", counts = "the counts are not ones training reaches";
  CHECK(error("0,0,-1,2,0") == scale);
  CHECK(error("-2,0,-1,2,0") == scale);
  CHECK(error("1e999,0,-1,2,0") == fields);  // out of a double's range: the stream fails
  CHECK(error("2,-1,-2,2,0") == counts);   // a negative iteration
  CHECK(error("2,3,-2,2,0") == counts);    // before "none yet"
  CHECK(error("2,3,3,2,0") == counts);     // an overflow at an iteration not yet run
  CHECK(error("2,3,2,0,0") == counts);     // no hysteresis left
  CHECK(error("2,3,2,1,-1") == counts);    // negative skips
  CHECK(error("2,3,2,1,4") == counts);     // more skips than iterations
  engine::Config c;
  c.loss_scale = 0;
  engine::DynamicLossScaler r(c);
  CHECK_THROWS_WITH_AS(r.restore("2,3,3,2,0"), ("checkpoint: bad 'loss_scale' value '2,3,3,2,0': " + counts).c_str(),
                       engine::UsageError);
  CHECK(r.scale() == 65536.0);  // a refused state changes nothing
  r.restore("0.5,7,6,1,7");
  CHECK(r.scale() == 0.5);
  CHECK(r.skipped() == 7);
  CHECK(r.hysteresis_left() == 1);
}

TEST_CASE("checkpoints: an older engine's format 1 (the whole model in params, exp_avg and exp_avg_sq files) reads as 1 or 3 ranks' shards") {
  const fs::path dir = temp_dir("format1");
  const std::int64_t total = 10000;  // 3 shards of 4096 elements: rank 1 reads from element 4096
  const auto value = [](int k, std::int64_t i) { return static_cast<float>(k * 100000 + i); };
  const fs::path ck = dir / "step_00000007";
  fs::create_directories(ck);
  const char* files[3] = {"params.f32", "exp_avg.f32", "exp_avg_sq.f32"};
  std::vector<float> params;
  for (int k = 0; k < 3; ++k) {
    std::vector<float> v;
    for (std::int64_t i = 0; i < total; ++i) v.push_back(value(k, i));
    engine::detail::write_file_synced(ck / files[k], v.data(), v.size() * 4);
    if (k == 0) params = v;
  }
  // Format 1 predates shards and checksums: no ranks, shard or checksum lines.
  std::ofstream(ck / "manifest.txt") << "format accel-engine-checkpoint/1\nstep 7\ntotal 10000\n";
  REQUIRE(engine::shard_size(total, 3) == 4096);
  for (int ranks : {1, 3}) {
    const std::int64_t s = engine::shard_size(total, ranks);
    CAPTURE(ranks);
    for (int r = 0; r < ranks; ++r) {
      engine::CheckpointState st = engine::read_checkpoint_manifest(ck);
      CHECK(st.format == 1);
      CHECK(st.step == 7);
      engine::read_checkpoint_tensors(ck, total, st, r, s);
      CHECK(st.ranks == 1);
      CHECK(st.shard == total);
      REQUIRE(st.exp_avg_sq.size() == static_cast<std::size_t>(s));
      for (std::int64_t i = 0; i < s; ++i) {
        const std::int64_t g = r * s + i;
        CAPTURE(g);
        const auto at = static_cast<std::size_t>(i);
        REQUIRE(st.params[at] == (g < total ? value(0, g) : 0.0f));  // beyond the model: padding, zeros
        REQUIRE(st.exp_avg[at] == (g < total ? value(1, g) : 0.0f));
        REQUIRE(st.exp_avg_sq[at] == (g < total ? value(2, g) : 0.0f));
      }
    }
  }
  CHECK(engine::consolidate_fp32(ck, total) == params);
  // A file that does not hold the whole model is refused, naming it.
  fs::resize_file(ck / "exp_avg.f32", (total - 1) * 4);
  engine::CheckpointState st = engine::read_checkpoint_manifest(ck);
  CHECK_THROWS_WITH_AS(engine::read_checkpoint_tensors(ck, total, st, 0, total),
                       ("checkpoint: " + (ck / "exp_avg.f32").string() + " does not hold 10000 floats").c_str(),
                       engine::UsageError);
  fs::remove_all(dir);
}

TEST_CASE("BucketPlan: stage 2's buckets cover the flat buffer once, in backward's order, within the bound") {
  const engine::ModelShape shape{4, 4, 128, 32, 1};
  const engine::ParamLayout P(shape, 62);  // the tiny model on hamlet_act1: 800768 elements
  REQUIRE(P.total == 800768);
  const std::int64_t layer = 12 * 128 * 128 + 4 * 128;  // qkv, proj, fc, fc proj; two LayerNorms
  const auto check_cover = [&](const engine::BucketPlan& plan) {
    std::vector<int> hits(static_cast<std::size_t>(P.total), 0);
    std::int64_t sum = 0;
    std::vector<const engine::Bucket*> all{&plan.embed};
    for (const auto& x : plan.layers) all.push_back(&x);
    for (const engine::Bucket* b : all) {
      std::int64_t pos = 0;
      for (const auto& r : b->ranges) {
        CHECK(r.pos == pos);  // the ranges one after the other in the bucket's memory
        pos += r.end - r.begin;
        for (std::int64_t i = r.begin; i < r.end; ++i) ++hits[static_cast<std::size_t>(i)];
      }
      CHECK(b->size == pos);
      sum += pos;
    }
    CHECK(sum == P.total);
    CHECK(std::count(hits.begin(), hits.end(), 1) == P.total);  // every element in exactly one bucket
  };
  // The default: one layer per bucket, the last layer's first; wte, wpe and ln_f in the embedding bucket.
  const engine::BucketPlan one(P, 0);
  check_cover(one);
  REQUIRE(one.layers.size() == 4);
  CHECK(one.cap == layer);
  CHECK(one.embed.size == 62 * 128 + 32 * 128 + 2 * 128);
  CHECK(one.elements(1) == one.embed.size + layer);
  CHECK(one.elements(2) == one.embed.size + 2 * layer);
  for (int i = 0; i < 4; ++i) {  // bucket i: layer 3 - i's six units
    const auto& b = one.layers[static_cast<std::size_t>(i)];
    CHECK(b.first_unit == 6 * i);
    CHECK(b.last_unit == 6 * i + 5);
    CHECK(b.first_unit == engine::BucketPlan::unit_index(4, 3 - i, engine::BucketPlan::fc_proj));
    CHECK(b.ranges.size() == 2);  // the layer's Linear weights, its LayerNorms
    CHECK(one.unit_bucket[static_cast<std::size_t>(6 * i + 3)] == i);
  }
  CHECK(one.view_bucket[static_cast<std::size_t>(P.wte)] == -1);
  CHECK(one.view_pos[static_cast<std::size_t>(P.wte)] == 0);
  CHECK(one.view_bucket[static_cast<std::size_t>(P.lnf_b)] == -1);
  CHECK(one.view_pos[static_cast<std::size_t>(P.lnf_b)] == 62 * 128 + 32 * 128 + 128);
  const auto& L3 = P.layers[3];
  CHECK(one.view_bucket[static_cast<std::size_t>(L3.qkv_w)] == 0);
  CHECK(one.view_pos[static_cast<std::size_t>(L3.qkv_w)] == 0);
  CHECK(one.view_pos[static_cast<std::size_t>(L3.ln1_w)] == 12 * 128 * 128);  // after the layer's weights
  // A bound of two layers: two buckets of two layers each (layers 3-2, then 1-0), each two ranges
  // (the layers' weights touch, and so do their LayerNorms).
  const engine::BucketPlan two(P, 2 * layer);
  check_cover(two);
  REQUIRE(two.layers.size() == 2);
  CHECK(two.cap == 2 * layer);
  CHECK(two.layers[0].first_unit == 0);
  CHECK(two.layers[0].last_unit == 11);
  CHECK(two.layers[1].first_unit == 12);
  CHECK(two.layers[1].ranges.size() == 2);
  // A bound of one 4C x C matrix (65536): four buckets a layer, mlp.c_proj | mlp.c_fc | ln_2 +
  // attn.c_proj | attn.c_attn + ln_1 (ln_2 + attn.c_proj + attn.c_attn would be 65792).
  const engine::BucketPlan small(P, 4 * 128 * 128);
  check_cover(small);
  CHECK(small.layers.size() == 16);
  CHECK(small.cap == 4 * 128 * 128);
  CHECK(small.layers[2].first_unit == 2);
  CHECK(small.layers[2].last_unit == 3);
  CHECK(small.layers[3].first_unit == 4);
  CHECK(small.layers[3].last_unit == 5);
  CHECK(small.layers[0].first_unit == 0);  // mlp.c_proj alone
  CHECK(small.layers[0].last_unit == 0);
  CHECK(small.layers[1].first_unit == 1);  // mlp.c_fc alone
  CHECK(small.layers[1].last_unit == 1);
  CHECK(small.elements(1) == small.embed.size + 4 * 128 * 128);
  // A bound below the smallest tensor: a tensor (a LayerNorm pair) per bucket.
  CHECK(engine::BucketPlan(P, 10).layers.size() == 24);
}
