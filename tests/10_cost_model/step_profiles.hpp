// step_profiles.hpp — a profile small enough to put on a timeline by hand,
// for the tests of ex10.5 and ex10.6.
#pragma once
#include "step_model.hpp"

namespace step_profiles {

// Four layers of unequal cost (forward order), one without parameters;
// Adam's step 2 ms. Forward 3 ms, backward 4.5 ms; 7,000,000 bytes of
// float32 gradients.
inline ch10::Profile uneven() {
  ch10::Profile profile;
  profile.layers = {{"first", 1e-3, 2e-3, 1000000},
                    {"second", 1e-3, 1e-3, 250000},
                    {"third", 0.5e-3, 1e-3, 500000},
                    {"activation", 0.5e-3, 0.5e-3, 0}};
  profile.optimizer_s = 2e-3;
  return profile;
}

// 0.1 ms per message, 1 ns per byte.
inline const ch10::Link kLink{1e-4, 1e-9};

}  // namespace step_profiles
