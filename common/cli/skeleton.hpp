// skeleton.hpp — solution regions and the skeletons made from them.
//
// In solutions/, the code between
//     // BEGIN SOLUTION ex1.2
//     ...
//     // END SOLUTION
// is what the learner writes. The skeleton in chapters/ has each region
// replaced by one line, indented like the marker:
//     WB_NOT_IMPLEMENTED("ex1.2");  // TODO(ex1.2): your code here
// which throws workbook::NotImplemented naming the exercise, file and line.
//
// A comment that says how an exercise is done, between
//     // BEGIN SOLUTION NOTE ex4.1
//     ...
//     // END SOLUTION NOTE
// stays in the solution and is cut from the skeleton, with nothing in its
// place: the lesson and the skeleton state the problem, not its answer.
#pragma once
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace workbook::skeleton {

struct Region {
  std::string exercise;  // "ex1.2"
  int begin_line;        // 1-based line of BEGIN SOLUTION
  int end_line;          // 1-based line of END SOLUTION
};

struct Skeleton {
  std::string text;             // the skeleton file's contents
  std::vector<Region> regions;  // the regions found, in order
};

// A malformed region (unclosed, nested, no exercise id, a file with regions
// that does not include workbook/errors.hpp): the message says file and line.
class RegionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

Skeleton make_skeleton(const std::string& solution_text, const std::string& file_name);

// One file of a chapter: solutions/<chapter>/<relative> and its skeleton.
struct FileStatus {
  std::filesystem::path solution;  // solutions/NN_x/file
  std::filesystem::path skeleton;  // chapters/NN_x/file
  std::vector<Region> regions;
  std::string expected;            // the skeleton's contents, generated
  bool up_to_date = false;         // chapters/ holds exactly `expected`
};

// Every file under solutions/ (source_dir/solutions), with its generated skeleton.
std::vector<FileStatus> scan(const std::filesystem::path& source_dir);

// Code files in chapters/ that have no counterpart in solutions/.
std::vector<std::filesystem::path> orphans(const std::filesystem::path& source_dir);

}  // namespace workbook::skeleton
