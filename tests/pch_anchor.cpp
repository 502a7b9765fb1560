// The source of the tests' precompiled-header target (tests/CMakeLists.txt): it holds nothing.
