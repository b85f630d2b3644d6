// The translation unit that owns the precompiled header (see CMakeLists.txt).
