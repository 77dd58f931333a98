"""The ``kdtree-lab`` command line: ``main`` builds the parser, one module per command."""
