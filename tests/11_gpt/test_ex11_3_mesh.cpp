// Tests for ex11.3: the mesh's two maps, its groups, and where its groups lie
// on nodes (every shape of 8 ranks, on nodes of 2 and of 4).
#include "catch2_compat.hpp"

#include <algorithm>
#include <set>

#include "mesh.hpp"
#include "mpi_test.hpp"
#include "workbook/errors.hpp"

namespace {

std::vector<ch11::MeshShape> shapes_of(int ranks) {
  std::vector<ch11::MeshShape> shapes;
  for (int d = 1; d <= ranks; ++d)
    for (int p = 1; p <= ranks; ++p)
      for (int t = 1; t <= ranks; ++t)
        if (d * p * t == ranks) shapes.push_back({d, p, t});
  return shapes;
}

}  // namespace

TEST_CASE("ex11.3 rank_of and coordinates_of are inverse maps onto the whole mesh", "[ex11.3]") {
  for (int ranks = 1; ranks <= 8; ++ranks)
    for (const ch11::MeshShape& shape : shapes_of(ranks)) {
      CAPTURE(shape.data, shape.pipeline, shape.tensor);
      std::set<int> seen;
      for (int d = 0; d < shape.data; ++d)
        for (int p = 0; p < shape.pipeline; ++p)
          for (int t = 0; t < shape.tensor; ++t) {
            const int rank = ch11::rank_of(shape, {d, p, t});
            REQUIRE((rank >= 0 && rank < ranks));
            REQUIRE(ch11::coordinates_of(shape, rank) == ch11::MeshCoordinates{d, p, t});
            seen.insert(rank);
          }
      REQUIRE(static_cast<int>(seen.size()) == ranks);
    }
}

// The nodes the group through `where` along one axis spans: `along` sets that coordinate.
template <typename Along>
int nodes_spanned(const ch11::MeshShape& shape, ch11::MeshCoordinates where, int size, int per_node, Along along) {
  std::set<int> nodes;
  for (int i = 0; i < size; ++i) {
    along(where, i);
    nodes.insert(ch11::rank_of(shape, where) / per_node);
  }
  return static_cast<int>(nodes.size());
}

TEST_CASE("ex11.3 a tensor group lies on as few nodes as can be, then a data group", "[ex11.3]") {
  for (int per_node : {2, 4})
    for (const ch11::MeshShape& shape : shapes_of(8)) {
      CAPTURE(per_node, shape.data, shape.pipeline, shape.tensor);
      // Sizes are powers of two: a tensor group fills whole nodes or shares
      // one with per_node / tensor others.
      const int tensor_fewest = (shape.tensor + per_node - 1) / per_node;
      const int groups_per_node = std::max(1, per_node / shape.tensor);
      const int data_fewest = (shape.data + groups_per_node - 1) / groups_per_node;
      for (int d = 0; d < shape.data; ++d)
        for (int p = 0; p < shape.pipeline; ++p)
          for (int t = 0; t < shape.tensor; ++t) {
            const ch11::MeshCoordinates where{d, p, t};
            const int tensor_nodes = nodes_spanned(shape, where, shape.tensor, per_node,
                                                   [](ch11::MeshCoordinates& c, int i) { c.tensor = i; });
            INFO("the tensor group through (data " << d << ", pipeline " << p << ") spans " << tensor_nodes
                                                   << " nodes; " << tensor_fewest << " can hold it");
            REQUIRE(tensor_nodes == tensor_fewest);
            const int data_nodes = nodes_spanned(shape, where, shape.data, per_node,
                                                 [](ch11::MeshCoordinates& c, int i) { c.data = i; });
            INFO("the data group through (pipeline " << p << ", tensor " << t << ") spans " << data_nodes
                                                     << " nodes; with every tensor group on the fewest nodes, "
                                                     << data_fewest << " can hold it");
            REQUIRE(data_nodes == data_fewest);
          }
    }
}

TEST_CASE("ex11.3 make_mesh: each group holds the ranks that differ in its coordinate only, numbered by it",
          "[ex11.3][np4]") {
  auto world = mpi_test::communicator();
  for (const ch11::MeshShape& shape : shapes_of(world->size())) {
    CAPTURE(shape.data, shape.pipeline, shape.tensor);
    const ch11::Mesh mesh = ch11::make_mesh(*world, shape);
    REQUIRE(mesh.here == ch11::coordinates_of(shape, world->rank()));
    REQUIRE(mpi_test::all_ranks(mesh.tensor->size() == shape.tensor && mesh.tensor->rank() == mesh.here.tensor));
    REQUIRE(mpi_test::all_ranks(mesh.pipeline->size() == shape.pipeline &&
                                mesh.pipeline->rank() == mesh.here.pipeline));
    REQUIRE(mpi_test::all_ranks(mesh.data->size() == shape.data && mesh.data->rank() == mesh.here.data));
    // Each group gathers its members' world ranks: they must be the ones the maps name.
    const torch::Tensor me = torch::full({1}, world->rank(), torch::kInt64);
    const torch::Tensor in_tensor = mesh.tensor->all_gather(me).view(-1);
    for (int t = 0; t < shape.tensor; ++t)
      REQUIRE(in_tensor[t].item<int64_t>() == ch11::rank_of(shape, {mesh.here.data, mesh.here.pipeline, t}));
    const torch::Tensor in_data = mesh.data->all_gather(me).view(-1);
    for (int d = 0; d < shape.data; ++d)
      REQUIRE(in_data[d].item<int64_t>() == ch11::rank_of(shape, {d, mesh.here.pipeline, mesh.here.tensor}));
    const torch::Tensor in_pipeline = mesh.pipeline->all_gather(me).view(-1);
    for (int p = 0; p < shape.pipeline; ++p)
      REQUIRE(in_pipeline[p].item<int64_t>() == ch11::rank_of(shape, {mesh.here.data, p, mesh.here.tensor}));
  }
  REQUIRE_THROWS_AS(ch11::make_mesh(*world, {world->size() + 1, 1, 1}), workbook::UserError);
}
