// mesh.hpp — Chapter 11: the ranks as a three-dimensional mesh, data ×
// pipeline × tensor, and a communicator for each line through it.
//
//   8 ranks, data 2 × pipeline 2 × tensor 2, on 2 nodes of 4 ranks:
//
//     node 1: ranks 0 1 2 3          node 2: ranks 4 5 6 7
//     ? which rank holds which (data, pipeline, tensor) is the exercise's
//       choice; what it must give is below.
//
// Why the order matters: a tensor group all-reduces inside every layer,
// forward and backward; a data group all-reduces every gradient of its stage
// once a step; a pipeline group sends activations and their gradients to its
// neighbours, per micro-batch. The slowest link, between nodes, should carry
// the least.
#pragma once
#include <memory>
#include <string>

#include "workbook/communicator.hpp"

namespace ch11 {

struct MeshShape {
  int data = 1, pipeline = 1, tensor = 1;
  int ranks() const { return data * pipeline * tensor; }
};

struct MeshCoordinates {
  int data = 0, pipeline = 0, tensor = 0;
  bool operator==(const MeshCoordinates& other) const {
    return data == other.data && pipeline == other.pipeline && tensor == other.tensor;
  }
};

// ex11.3. The rank at `where` and the coordinates of `rank`: inverse maps
// between [0, shape.ranks()) and the mesh. With ranks placed on nodes in
// order (ranks 0 to k-1 on the first node, and so on), the ranks of a tensor
// group must lie on as few nodes as can be; then, of the layouts that do
// that, the ranks of a data group on as few nodes as can be (for this
// chapter's default model a data group moves more bytes a step than a
// pipeline group: the lesson asks you to count why, and when it would not).
int rank_of(const MeshShape& shape, const MeshCoordinates& where);
MeshCoordinates coordinates_of(const MeshShape& shape, int rank);

struct Mesh {
  MeshShape shape;
  MeshCoordinates here;  // this rank's coordinates
  // The ranks that differ from this one in one coordinate only, numbered by
  // that coordinate: tensor->rank() == here.tensor, and so on.
  std::unique_ptr<workbook::Communicator> data, pipeline, tensor;
};

// ex11.3. Splits `world` (world.size() == shape.ranks(), checked: a
// UserError naming both) into this rank's three groups. Collective.
Mesh make_mesh(workbook::Communicator& world, const MeshShape& shape);

}  // namespace ch11
