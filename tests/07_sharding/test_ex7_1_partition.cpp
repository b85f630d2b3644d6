// Tests for ex7.1: the flat buffer's layout and each rank's pieces, against
// an element-by-element oracle.
#include "catch2_compat.hpp"

#include "sharding.hpp"
#include "sharding_oracles.hpp"

namespace {

std::string describe(const ch07::Partition& p) {
  std::string s = fmt::format("numel {}, padded {}, shard {}, pieces:", p.numel, p.padded_numel, p.shard_numel);
  for (const ch07::ShardPiece& piece : p.pieces)
    s += fmt::format(" (parameter {}, from {}, at {}, {} elements)", piece.parameter, piece.parameter_offset,
                     piece.shard_offset, piece.count);
  return s;
}

}  // namespace

TEST_CASE("ex7.1 partition_parameters matches an element-by-element oracle", "[ex7.1]") {
  const std::vector<std::vector<int64_t>> layouts = {
      {10},             // one parameter, split between every rank
      {3, 4, 5},        // 12: divides by 1, 2, 3, 4, not by 5
      {9408, 12, 120, 10},  // TinyNet's shapes: 9550
      {1, 1},           // fewer elements than ranks: some shards are all padding
      {7, 0, 6},        // an empty tensor
      {}};              // no parameters at all
  for (const auto& sizes : layouts) {
    for (int world = 1; world <= 5; ++world) {
      for (int rank = 0; rank < world; ++rank) {
        const ch07::Partition got = ch07::partition_parameters(sizes, world, rank);
        const ch07::Partition expected = sharding_oracle::partition(sizes, world, rank);
        CAPTURE(sizes, world, rank);
        INFO("expected " << describe(expected));
        INFO("got      " << describe(got));
        INFO("offsets and sizes: parameters follow each other in the flat buffer, in order, with no gaps");
        REQUIRE(got.offsets == expected.offsets);
        REQUIRE(got.sizes == expected.sizes);
        REQUIRE(got.numel == expected.numel);
        INFO("padded_numel and shard_numel: world_size equal shards that hold every element, with as little "
             "padding as can be");
        REQUIRE(got.padded_numel == expected.padded_numel);
        REQUIRE(got.shard_numel == expected.shard_numel);
        REQUIRE(got.world_size == world);
        REQUIRE(got.rank == rank);
        INFO("pieces: the runs of each parameter inside this rank's shard, in order; a parameter that crosses "
             "a shard boundary gives one piece to each side; padding is in no piece");
        REQUIRE((got.pieces == expected.pieces));  // shown above, in full
      }
    }
  }
}

TEST_CASE("ex7.1 a parameter split between two shards is covered exactly once", "[ex7.1]") {
  // 3 + 8 + 2 = 13 elements on 2 ranks: padded to 14, shards of 7; the middle
  // parameter runs from element 3 to 10, across the boundary at 7.
  const std::vector<int64_t> sizes = {3, 8, 2};
  const ch07::Partition rank0 = ch07::partition_parameters(sizes, 2, 0);
  const ch07::Partition rank1 = ch07::partition_parameters(sizes, 2, 1);
  INFO("rank 0: " << describe(rank0) << "\nrank 1: " << describe(rank1));
  REQUIRE(rank0.padded_numel == 14);
  REQUIRE(rank0.owned_numel() == 7);
  REQUIRE(rank1.owned_numel() == 6);  // its last element is padding
  int64_t middle = 0;
  for (const auto& p : {rank0, rank1})
    for (const ch07::ShardPiece& piece : p.pieces)
      if (piece.parameter == 1) middle += piece.count;
  REQUIRE(middle == 8);
  REQUIRE((rank1.pieces.front() == ch07::ShardPiece{1, 4, 0, 4}));
}

TEST_CASE("ex7.1 a FlatGroup's parameters are views of its buffer", "[ex7.1]") {
  auto model = sharding_oracle::toy_model();
  const torch::Tensor before = sharding_oracle::weights(*model);
  ch07::FlatGroup group(ch07::trainable_parameters(*model), 3, 2);
  INFO("the model's values are unchanged by flattening");
  REQUIRE(torch::equal(sharding_oracle::weights(*model), before));
  INFO("writing the flat buffer writes the model (and the frozen bias is in no group)");
  REQUIRE(group.parameters().size() == 4);
  group.flat().fill_(0.5);
  REQUIRE(model->fc1->weight.eq(0.5).all().item<bool>());
  REQUIRE(model->fc2->bias.eq(0.5).all().item<bool>());
  INFO("9544 elements on 3 ranks: shards of 3182, the last with 2 elements of padding");
  REQUIRE(group.shard().numel() == 3182);
  REQUIRE(group.owned().numel() == 3180);
}
