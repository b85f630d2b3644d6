// Tests for ex10.1: the link's α and β, fitted to timings whose α and β are known.
#include "catch2_compat.hpp"

#include "cost_model.hpp"
#include "workbook/errors.hpp"

namespace {

// 1 byte to 64 MiB, by fours: what the ping-pong measures.
std::vector<int64_t> ping_pong_sizes() {
  std::vector<int64_t> sizes;
  for (int64_t n = 1; n <= (int64_t{64} << 20); n *= 4) sizes.push_back(n);
  return sizes;
}

}  // namespace

TEST_CASE("ex10.1 timings on a line give back its α and β", "[ex10.1]") {
  const double alpha = 50e-6, beta = 8.0 / 1e9;  // 50 µs, 1 Gbit/s
  std::vector<ch10::Timing> timings;
  for (int64_t n : ping_pong_sizes()) timings.push_back({n, alpha + static_cast<double>(n) * beta});
  const ch10::Link link = ch10::fit_link(timings);
  CAPTURE(link.alpha_s, link.beta_s_per_byte);
  REQUIRE(link.beta_s_per_byte == Approx(beta).epsilon(1e-9));
  REQUIRE(link.alpha_s == Approx(alpha).epsilon(1e-6));
  REQUIRE(link.bits_per_s() == Approx(1e9).epsilon(1e-9));
}

TEST_CASE("ex10.1 noise of ±3 % of α on every timing, sizes repeated: α and β within 5 %", "[ex10.1]") {
  const double alpha = 200e-6, beta = 8.0 / 100e6;  // 100 Mbit/s
  std::vector<ch10::Timing> timings;
  const double noise[] = {1.03, 0.97, 1.01, 0.99, 1.02, 0.98};
  int k = 0;
  for (int repeat = 0; repeat < 3; ++repeat)
    for (int64_t n : ping_pong_sizes()) timings.push_back({n, alpha * noise[k++ % 6] + static_cast<double>(n) * beta});
  const ch10::Link link = ch10::fit_link(timings);
  CAPTURE(link.alpha_s, link.beta_s_per_byte);
  REQUIRE(link.beta_s_per_byte == Approx(beta).epsilon(0.05));
  REQUIRE(link.alpha_s == Approx(alpha).epsilon(0.05));
}

TEST_CASE("ex10.1 the fit is in seconds, not in logarithms: a burst that carries the first 64 KiB free leaves β alone",
          "[ex10.1]") {
  // A shaped link (tbf) lets a burst through at no rate: up to 64 KiB cost
  // only α here, larger messages α + (n − 64 KiB)·β. β is the slope where
  // bytes dominate. Least squares on the seconds finds it (within 0.1 %); a
  // fit of relative errors (what a line through log t weighs) follows the
  // many small messages and finds a twentieth of it.
  const double alpha = 50e-6, beta = 8.0 / 1e9;
  std::vector<ch10::Timing> timings;
  for (int64_t n : ping_pong_sizes())
    timings.push_back({n, alpha + static_cast<double>(std::max<int64_t>(0, n - 65536)) * beta});
  const ch10::Link link = ch10::fit_link(timings);
  CAPTURE(link.alpha_s, link.beta_s_per_byte);
  REQUIRE(link.beta_s_per_byte == Approx(beta).epsilon(0.01));
}

TEST_CASE("ex10.1 one size is not a line", "[ex10.1]") {
  REQUIRE(ch10::fit_link({{0, 1e-3}, {1000, 2e-3}}).beta_s_per_byte == Approx(1e-6));
  REQUIRE_THROWS_AS(ch10::fit_link({{1024, 1e-3}, {1024, 1.1e-3}}), workbook::UserError);
  REQUIRE_THROWS_AS(ch10::fit_link({}), workbook::UserError);
}

TEST_CASE("ex10.1 noise of ±5 % on every timing, each size timed twice: α and β within 1 %", "[ex10.1]") {
  // Every timing is 5 % above or below its time on the line. Each size's two
  // timings are one above and one below, except at the two smallest sizes:
  // both above at 1 byte, both below at 4 bytes.
  const double alpha = 100e-6, beta = 8.0 / 10e9;  // 10 Gbit/s
  const std::vector<int64_t> sizes = ping_pong_sizes();
  std::vector<ch10::Timing> timings;
  for (int repeat = 0; repeat < 2; ++repeat)
    for (size_t i = 0; i < sizes.size(); ++i) {
      const double noise = i == 0 ? 1.05 : i == 1 ? 0.95 : (i + repeat) % 2 == 0 ? 1.05 : 0.95;
      timings.push_back({sizes[i], (alpha + static_cast<double>(sizes[i]) * beta) * noise});
    }
  const ch10::Link link = ch10::fit_link(timings);
  CAPTURE(link.alpha_s, link.beta_s_per_byte);
  INFO("fitted to all " << timings.size() << " timings, the ±5 % noise must not move α or β by 1 %");
  REQUIRE(link.beta_s_per_byte == Approx(beta).epsilon(0.01));
  REQUIRE(link.alpha_s == Approx(alpha).epsilon(0.01));
}

namespace {

// A ping-pong over a shaped link: sizes 1 byte to 64 MiB by fours, each
// timed three times with ±4 % of noise, the first `burst` bytes of a
// message free of β.
std::vector<ch10::Timing> shaped_timings(double alpha, double beta, int64_t burst) {
  const double noise[] = {1.04, 0.96, 1.0};
  std::vector<ch10::Timing> timings;
  for (int repeat = 0; repeat < 3; ++repeat)
    for (int64_t n : ping_pong_sizes())
      timings.push_back(
          {n, (alpha + static_cast<double>(std::max<int64_t>(0, n - burst)) * beta) * noise[(repeat + n) % 3]});
  return timings;
}

}  // namespace

TEST_CASE("ex10.1 a shaped link: both ends within a few per cent, with a burst of 64 KiB, 16 KiB or none",
          "[ex10.1]") {
  struct Shaped {
    double alpha, bits_per_s;
    int64_t burst;
  };
  for (const Shaped e : {Shaped{50e-6, 1e9, 65536}, Shaped{6e-6, 1e9, 65536}, Shaped{200e-6, 100e6, 65536},
                         Shaped{20e-6, 10e9, 16384}, Shaped{100e-6, 10e9, 0}}) {
    const double beta = 8.0 / e.bits_per_s;
    const ch10::Link link = ch10::fit_shaped_link(shaped_timings(e.alpha, beta, e.burst));
    CAPTURE(e.alpha, e.bits_per_s, e.burst, link.alpha_s, link.beta_s_per_byte);
    INFO("α must be what a small message costs and β what each byte of a large one costs, each within 5 %");
    REQUIRE(link.alpha_s == Approx(e.alpha).epsilon(0.05));
    REQUIRE(link.beta_s_per_byte == Approx(beta).epsilon(0.05));
  }
}

TEST_CASE("ex10.1 a shaped link predicts a 1-byte and a 64 MiB message where the line through every size cannot",
          "[ex10.1]") {
  const double alpha = 6e-6, beta = 8.0 / 1e9;
  const std::vector<ch10::Timing> timings = shaped_timings(alpha, beta, 65536);
  const ch10::Link line = ch10::fit_link(timings), shaped = ch10::fit_shaped_link(timings);
  CAPTURE(line.alpha_s, line.beta_s_per_byte, shaped.alpha_s, shaped.beta_s_per_byte);
  REQUIRE(line.alpha_s < 0.0);  // the burst, seen by a line
  REQUIRE(shaped.seconds(1) == Approx(alpha).epsilon(0.05));
  const double n = 64.0 * (1 << 20);
  REQUIRE(shaped.seconds(n) == Approx(alpha + (n - 65536) * beta).epsilon(0.02));
}
