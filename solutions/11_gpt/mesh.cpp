// mesh.cpp — ex11.3: the ranks as a data × pipeline × tensor mesh.
#include "mesh.hpp"

#include "workbook/errors.hpp"

namespace ch11 {

int rank_of(const MeshShape& shape, const MeshCoordinates& where) {
  // BEGIN SOLUTION ex11.3
  // Note: [tensor fastest, pipeline slowest] Consecutive ranks share a node,
  // so the coordinate that varies fastest keeps its groups inside one. The
  // tensor group's all-reduces run inside every layer, forward and backward:
  // fastest. A data group moves every gradient of its stage once a step; a
  // pipeline group one activation per micro-batch to one neighbour, fewer
  // bytes: the pipeline coordinate varies slowest and crosses the nodes
  // (Megatron-LM's default order is the same: tensor, data, pipeline).
  return (where.pipeline * shape.data + where.data) * shape.tensor + where.tensor;
  // END SOLUTION
}

MeshCoordinates coordinates_of(const MeshShape& shape, int rank) {
  // BEGIN SOLUTION ex11.3
  return {(rank / shape.tensor) % shape.data, rank / (shape.tensor * shape.data), rank % shape.tensor};
  // END SOLUTION
}

Mesh make_mesh(workbook::Communicator& world, const MeshShape& shape) {
  WB_CHECK(shape.data >= 1 && shape.pipeline >= 1 && shape.tensor >= 1 && shape.ranks() == world.size(),
           "a mesh of data {} × pipeline {} × tensor {} = {} ranks does not fit a world of {}", shape.data,
           shape.pipeline, shape.tensor, shape.ranks(), world.size());
  Mesh mesh;
  mesh.shape = shape;
  // BEGIN SOLUTION ex11.3
  // Each group: the ranks that share the other two coordinates (the color
  // numbers that pair), ordered by its own coordinate (the key).
  const MeshCoordinates c = coordinates_of(shape, world.rank());
  mesh.here = c;
  mesh.tensor = world.split(c.pipeline * shape.data + c.data, c.tensor, "tensor group");
  mesh.pipeline = world.split(c.data * shape.tensor + c.tensor, c.pipeline, "pipeline group");
  mesh.data = world.split(c.pipeline * shape.tensor + c.tensor, c.data, "data group");
  // END SOLUTION
  return mesh;
}

}  // namespace ch11
