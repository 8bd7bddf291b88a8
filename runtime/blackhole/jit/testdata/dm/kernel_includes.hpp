#include "/tmp/jit-tinymlp/kernels/reader_04b8dbb8364d.cpp"
