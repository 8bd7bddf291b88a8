// Package fromcodegen presents a compiled build (codegen.Build) to the
// timing model as the little it needs (timing.Build: target, mesh,
// programs, buffers, the DRAM per device), so that sim/timing does not
// depend on the compiler. BuildAt also gives the step's position: the
// position buffers' contents, which the kernels read at run time.
package fromcodegen
