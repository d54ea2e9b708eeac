# What `cmake --graphviz=FILE` draws (docs/design-notes.md, "Layers"): pdist's own library
# targets and how they link, one file, without tools, tests, benchmarks or external libraries.
set(GRAPHVIZ_GRAPH_NAME "pdist layers")
set(GRAPHVIZ_EXTERNAL_LIBS FALSE)
set(GRAPHVIZ_EXECUTABLES FALSE)
set(GRAPHVIZ_INTERFACE_LIBS FALSE)
set(GRAPHVIZ_GENERATE_PER_TARGET FALSE)
set(GRAPHVIZ_GENERATE_DEPENDERS FALSE)
set(GRAPHVIZ_IGNORE_TARGETS "pdist_testing" "pdist_tool_support")
