// mesh.cpp — ex11.3: the ranks as data × pipeline × tensor.
#include "mesh.hpp"

#include "workbook/errors.hpp"

namespace ch11 {

int rank_of(const MeshShape& shape, const MeshCoordinates& where) {
  // BEGIN SOLUTION ex11.3
  // Note: [tensor fastest] Consecutive ranks share a node, so the tensor
  // coordinate varies fastest (a tensor group is consecutive ranks), then the
  // pipeline's, and the data coordinate slowest: data groups, which talk
  // least often, are the ones that cross nodes.
  return (where.data * shape.pipeline + where.pipeline) * shape.tensor + where.tensor;
  // END SOLUTION
}

MeshCoordinates coordinates_of(const MeshShape& shape, int rank) {
  // BEGIN SOLUTION ex11.3
  return {rank / (shape.tensor * shape.pipeline), (rank / shape.tensor) % shape.pipeline, rank % shape.tensor};
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
  mesh.tensor = world.split(c.data * shape.pipeline + c.pipeline, c.tensor, "tensor group");
  mesh.pipeline = world.split(c.data * shape.tensor + c.tensor, c.pipeline, "pipeline group");
  mesh.data = world.split(c.pipeline * shape.tensor + c.tensor, c.data, "data group");
  // END SOLUTION
  return mesh;
}

}  // namespace ch11
