// The skeleton generator: regions become WB_NOT_IMPLEMENTED; bad regions are reported.
#include "catch2_compat.hpp"

#include "skeleton.hpp"

using Catch::Matchers::ContainsSubstring;
using workbook::skeleton::make_skeleton;
using workbook::skeleton::RegionError;

TEST_CASE("a solution region becomes one WB_NOT_IMPLEMENTED line, indented like the marker", "[skeleton]") {
  const std::string solution =
      "#include \"workbook/errors.hpp\"\n"
      "int f() {\n"
      "  // BEGIN SOLUTION ex3.1\n"
      "  return 42;\n"
      "  // END SOLUTION\n"
      "}\n"
      "int g() {\n"
      "    // BEGIN SOLUTION ex3.2\n"
      "    return 7;\n"
      "    // END SOLUTION\n"
      "}\n";
  auto skeleton = make_skeleton(solution, "x.cpp");
  REQUIRE(skeleton.text ==
          "#include \"workbook/errors.hpp\"\n"
          "int f() {\n"
          "  WB_NOT_IMPLEMENTED(\"ex3.1\");  // TODO(ex3.1): your code here\n"
          "}\n"
          "int g() {\n"
          "    WB_NOT_IMPLEMENTED(\"ex3.2\");  // TODO(ex3.2): your code here\n"
          "}\n");
  REQUIRE(skeleton.regions.size() == 2);
  REQUIRE(skeleton.regions[0].exercise == "ex3.1");
  REQUIRE(skeleton.regions[0].begin_line == 3);
  REQUIRE(skeleton.regions[0].end_line == 5);
  REQUIRE(skeleton.regions[1].exercise == "ex3.2");
}

TEST_CASE("a file without regions is copied unchanged", "[skeleton]") {
  const std::string text = "int main() { return 0; }\n// a comment\n";
  REQUIRE(make_skeleton(text, "m.cpp").text == text);
  REQUIRE(make_skeleton(text, "m.cpp").regions.empty());
}

TEST_CASE("malformed regions are reported with file and line", "[skeleton]") {
  const std::string inc = "#include \"workbook/errors.hpp\"\n";
  REQUIRE_THROWS_WITH(make_skeleton(inc + "// BEGIN SOLUTION ex1.1\nx\n", "a.cpp"),
                      ContainsSubstring("a.cpp:2") && ContainsSubstring("never closed"));
  REQUIRE_THROWS_WITH(make_skeleton(inc + "// END SOLUTION\n", "b.cpp"), ContainsSubstring("b.cpp:2") && ContainsSubstring("without"));
  REQUIRE_THROWS_WITH(make_skeleton(inc + "// BEGIN SOLUTION ex1.1\n// BEGIN SOLUTION ex1.2\n", "c.cpp"),
                      ContainsSubstring("c.cpp:3") && ContainsSubstring("inside"));
  REQUIRE_THROWS_WITH(make_skeleton(inc + "// BEGIN SOLUTION\n// END SOLUTION\n", "d.cpp"),
                      ContainsSubstring("exercise id"));
  REQUIRE_THROWS_WITH(make_skeleton("// BEGIN SOLUTION ex1.1\n// END SOLUTION\n", "e.cpp"),
                      ContainsSubstring("workbook/errors.hpp"));
}

TEST_CASE("a solution note is cut from the skeleton, with nothing in its place", "[skeleton]") {
  const std::string text =
      "// ring.hpp\n"
      "// BEGIN SOLUTION NOTE ex4.1\n"
      "// at step s rank r sends segment (r - s) mod n\n"
      "// END SOLUTION NOTE\n"
      "void f();\n";
  const auto skeleton = make_skeleton(text, "ring.hpp");
  REQUIRE(skeleton.text == "// ring.hpp\nvoid f();\n");
  REQUIRE(skeleton.regions.empty());
  REQUIRE_THROWS_WITH(make_skeleton("// BEGIN SOLUTION NOTE ex4.1\nx\n", "a.hpp"),
                      ContainsSubstring("a.hpp:1") && ContainsSubstring("never closed"));
  REQUIRE_THROWS_WITH(make_skeleton("// END SOLUTION NOTE\n", "b.hpp"),
                      ContainsSubstring("b.hpp:1") && ContainsSubstring("without"));
  REQUIRE_THROWS_WITH(make_skeleton("// BEGIN SOLUTION NOTE\n// END SOLUTION NOTE\n", "c.hpp"),
                      ContainsSubstring("exercise id"));
}
