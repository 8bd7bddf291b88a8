// Package fromcodegen presents a compiled build (codegen.Build) to the
// timing model as the little it needs (timing.Build: target, mesh,
// programs, buffers), so that sim/timing does not depend on the compiler.
package fromcodegen
