// mesh.cpp — ex11.3: the ranks as a data × pipeline × tensor mesh.
#include "mesh.hpp"

#include "workbook/errors.hpp"

namespace ch11 {

int rank_of(const MeshShape& shape, const MeshCoordinates& where) {
  WB_NOT_IMPLEMENTED("ex11.3");  // TODO(ex11.3): your code here
}

MeshCoordinates coordinates_of(const MeshShape& shape, int rank) {
  WB_NOT_IMPLEMENTED("ex11.3");  // TODO(ex11.3): your code here
}

Mesh make_mesh(workbook::Communicator& world, const MeshShape& shape) {
  WB_CHECK(shape.data >= 1 && shape.pipeline >= 1 && shape.tensor >= 1 && shape.ranks() == world.size(),
           "a mesh of data {} × pipeline {} × tensor {} = {} ranks does not fit a world of {}", shape.data,
           shape.pipeline, shape.tensor, shape.ranks(), world.size());
  Mesh mesh;
  mesh.shape = shape;
  WB_NOT_IMPLEMENTED("ex11.3");  // TODO(ex11.3): your code here
  return mesh;
}

}  // namespace ch11
