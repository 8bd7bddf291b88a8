// Package gogen emits the committed Go form of compiled models
// (kernels_gen/<model>) with jennifer, and reads it back.
//
// A model build for one mesh has hundreds of device programs per device, but
// decoder layers of one kind compile to the same program up to the buffers
// they touch (layer N's weights, the values of layer N). gogen therefore
// abstracts each program's host config (codegen/hostcfg) into a signature:
// buffer names become positional placeholders "$0", "$1", ... in the order
// the program declares its buffers, and kernel sources are referenced by
// content hash. The generated package holds one typed config per distinct
// signature, each kernel source once, and per mesh the list of program
// instances in execution order (signature, device, layer, and the buffer
// names that fill the placeholders). Table.Program resolves an instance to
// a full config at load time. The generated code carries the standard
// "Code generated ... DO NOT EDIT." header and a freshness test compares
// it with a regeneration.
package gogen
