// Tests for ex10.5: DDP's buckets on a timeline, worked out by hand.
#include "catch2_compat.hpp"

#include "step_model.hpp"
#include "step_profiles.hpp"

using step_profiles::kLink;

TEST_CASE("ex10.5 buckets of at least 1 MB: ready as backward reaches them, reduced one after another", "[ex10.5]") {
  // Backward from the last layer, starting at 3 ms (after forward):
  //   activation  3.5 ms, no gradients
  //   third       4.5 ms, 2 MB: bucket 0 ready, reduced 4.5 → 6.7
  //   second      5.5 ms, 1 MB: bucket 1 ready, waits for the link: 6.7 → 7.9
  //   first       7.5 ms, 4 MB: bucket 2 ready, waits again:        7.9 → 12.1
  // Backward is over at 7.5 ms: the step waits 4.6 ms more.
  const ch10::StepPrediction p = ch10::predict_ddp_buckets(step_profiles::uneven(), kLink, 2, 1000000);
  CAPTURE(p.compute_s, p.communication_s, p.exposed_s);
  REQUIRE(p.compute_s == Approx(9.5e-3).epsilon(1e-9));
  REQUIRE(p.communication_s == Approx(7.6e-3).epsilon(1e-9));
  REQUIRE(p.exposed_s == Approx(4.6e-3).epsilon(1e-9));
  REQUIRE(p.total_s() == Approx(14.1e-3).epsilon(1e-9));
}

TEST_CASE("ex10.5 a bucket reduced as soon as ready, a slow link: the step waits for the link's queue", "[ex10.5]") {
  // At 4 ns per byte: bucket 0 (8.2 ms) 4.5 → 12.7, bucket 1 (4.2) → 16.9,
  // bucket 2 (16.2) → 33.1; backward over at 7.5: 25.6 ms exposed.
  const ch10::Link slow{1e-4, 4e-9};
  const ch10::StepPrediction p = ch10::predict_ddp_buckets(step_profiles::uneven(), slow, 2, 1000000);
  CAPTURE(p.communication_s, p.exposed_s);
  REQUIRE(p.communication_s == Approx(28.6e-3).epsilon(1e-9));
  REQUIRE(p.exposed_s == Approx(25.6e-3).epsilon(1e-9));
}

TEST_CASE("ex10.5 a fast link hides everything but the last bucket; one bucket is DDP after backward", "[ex10.5]") {
  // 3 MB cap at 4 ranks: bucket 0 = third and second (3 MB) ready at 5.5,
  // reduced in 5.1 ms → 10.6; bucket 1 = first (4 MB) ready at 7.5, reduced
  // 10.6 → 17.2.
  const ch10::StepPrediction p = ch10::predict_ddp_buckets(step_profiles::uneven(), kLink, 4, 3000000);
  CAPTURE(p.communication_s, p.exposed_s);
  REQUIRE(p.communication_s == Approx(11.7e-3).epsilon(1e-9));
  REQUIRE(p.exposed_s == Approx(9.7e-3).epsilon(1e-9));
  const ch10::StepPrediction one = ch10::predict_ddp_buckets(step_profiles::uneven(), kLink, 4, int64_t{1} << 40);
  const ch10::StepPrediction after = ch10::predict_ddp_after_backward(step_profiles::uneven(), kLink, 4);
  REQUIRE(one.total_s() == Approx(after.total_s()).epsilon(1e-12));
  REQUIRE(one.exposed_s == Approx(after.communication_s).epsilon(1e-12));
}

TEST_CASE("ex10.5 the best cap is one the model can tell apart from the others", "[ex10.5]") {
  const int64_t best = ch10::best_bucket_bytes(step_profiles::uneven(), kLink, 2);
  const double best_s = ch10::predict_ddp_buckets(step_profiles::uneven(), kLink, 2, best).total_s();
  for (int64_t cap : {int64_t{1}, int64_t{2000000}, int64_t{3000000}, int64_t{7000000}})
    REQUIRE(best_s <= ch10::predict_ddp_buckets(step_profiles::uneven(), kLink, 2, cap).total_s() + 1e-15);
}

namespace {

// Layers without parameters at both ends and in between (forward order):
// the first takes 2 ms of backward.
ch10::Profile ends_without_parameters() {
  ch10::Profile profile;
  profile.layers = {{"flatten", 0.2e-3, 2e-3, 0},
                    {"fc1", 1e-3, 1e-3, 500000},
                    {"relu", 0.1e-3, 0.1e-3, 0},
                    {"fc2", 1e-3, 1e-3, 250000},
                    {"softmax", 0.1e-3, 0.5e-3, 0}};
  profile.optimizer_s = 1e-3;
  return profile;
}

}  // namespace

TEST_CASE("ex10.5 layers without parameters first in forward and in backward order: each bucket is ready with its "
          "last gradient",
          "[ex10.5]") {
  // Recorded from the reference solution; any correct implementation gives
  // these to within 1e-9 (relative).
  struct Case {
    int ranks;
    int64_t cap;
    double communication_s, exposed_s;
  };
  for (const Case& c : {Case{2, 1, 3.4e-3, 0.3e-3}, Case{2, int64_t{1} << 40, 3.2e-3, 1.2e-3}, Case{4, 1, 5.7e-3, 2.6e-3}}) {
    const ch10::StepPrediction p = ch10::predict_ddp_buckets(ends_without_parameters(), kLink, c.ranks, c.cap);
    CAPTURE(c.ranks, c.cap, p.compute_s, p.communication_s, p.exposed_s);
    REQUIRE(p.compute_s == Approx(8.0e-3).epsilon(1e-9));
    REQUIRE(p.communication_s == Approx(c.communication_s).epsilon(1e-9));
    REQUIRE(p.exposed_s == Approx(c.exposed_s).epsilon(1e-9));
  }
}
