// pch.hpp — the heavy headers every LibTorch target shares, compiled once.
#pragma once
#include <torch/torch.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "pch_vtables.hpp"  // Note [the header's vtables]
