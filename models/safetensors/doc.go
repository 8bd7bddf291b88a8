// Package safetensors reads and writes Hugging Face safetensors files and
// sharded checkpoints.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes
// of JSON header, then the tensor data. The header maps each tensor name
// to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to
// the end of the header) and may hold a "__metadata__" object of string
// pairs. A sharded checkpoint is a directory with
// model.safetensors.index.json whose "weight_map" names the shard holding
// each tensor; a single-file checkpoint is model.safetensors.
//
// Opening a file reads and validates only its header: the header length is
// at most MaxHeaderBytes, every dtype is known, every tensor's byte length
// equals its element count times its element size, every range lies
// inside the file and no two ranges overlap. Tensor data is read lazily:
// on unix builds the file is mapped (mmap) and Bytes returns a view of the
// mapping, so opening a 60 GB checkpoint costs its headers and the pages
// a conversion touches; elsewhere Bytes reads the range with ReadAt.
// Errors name the file, the tensor and the field.
//
// Write and WriteSharded produce files in the same format (tests use them
// to build checkpoints from random weights).
package safetensors
