// Package ref is tcc's graph reference evaluator: it runs an ir.Graph op by
// op on the host, in float32, and is the ground truth that generated device
// programs (on the simulator or on cards) are measured against with PCC and
// maximum relative error.
//
// # Reference at the same formats
//
// A device never holds a tensor as float32 unless its dtype is fp32: a bf16
// activation is rounded when it is packed, a bfp8_b weight
// shares one exponent per 16-value face row, and so on. A reference that
// kept every intermediate in float32 would differ from a correct device
// program by all of these roundings, so a real bug and a legitimate storage
// rounding would look alike. The reference therefore rounds at exactly the
// points the device stores a value, and nowhere else:
//
//   - inputs, weights and states are rounded through their declared dtype
//     when they enter Eval, as the host packs them (bf16 to nearest even; a
//     bfp8_b weight is evaluated with its bfp8_b values, as the device sees
//     it after upload);
//   - every op result is rounded through its declared result dtype (the
//     TensorType of the result value), as the device packs it to its output
//     buffer: bf16 as the packer rounds an fp32 DEST value, half away from
//     zero (numerics.PackerBF16), bfp8_b/bfp4_b by packing the
//     flattened [Rows2D, last dim] matrix into zero-padded tiles as the
//     packer packs an fp32 DEST and unpacking it
//     (numerics.QuantizeMatrixDevice), fp32 unchanged, int32/uint32
//     checked to be integers in range;
//   - inside an op nothing is rounded to a storage format: eltwise results
//     are computed in float32 (the precision of an fp32 DEST) except adds
//     and subtracts of bf16 values, which are the FPU's (numerics.FPUAdd:
//     the smaller operand aligned to the larger in 11 bits), reductions
//     (sum, mean) and norms follow their lowering's FPU and SFPU steps
//     (reduce.go, norm.go: tf32 source reads, float32 running sums), and SFPU
//     functions are the shared numerics helpers (float64 formula, one
//     rounding to float32). The exception is matmul, whose products go
//     through numerics.Matmul: source-register reduction (fp32 operands to
//     tf32), math-fidelity-limited products (Options.Fidelity, HiFi4 by
//     default) and the FPU datapath's accumulation, because those effects are a
//     property of the format and fidelity the program chooses, not of the
//     kernel's implementation.
//
// This is "the reference at the same formats" (Options.StorageFormats, on
// in DefaultOptions). A correct device program differs from it only by
// accumulation order and in-kernel intermediate precision, so tight
// thresholds catch real errors. With StorageFormats off (ExactOptions) the
// evaluator is the pure math in float32: no storage rounding, typecasts to
// float dtypes are the identity and matmul sums exact products in float64;
// comparing the two modes measures what the chosen formats cost.
//
// # Fused ops
//
// A fused op (add_rmsnorm, ...) has its own evaluator, computed from its
// equation with one rounding of the result. EvalDecomposition evaluates the
// ops it replaced (op.Decomp) with their own rounding points, so tests can
// check that the fused form computes what the decomposed form did.
//
// # Model ops
//
// The ops of the Qwen-style hybrid models follow the same rules: data
// movement (slice, concat, pad, repeat_interleave, transpose, to_memory,
// tril; layout.go, gdn.go) and the cache writes (update_cache,
// fill_cache) copy values. With StorageFormats every arithmetic op is
// computed as its device program computes it, rounding point by rounding
// point, so that a correct program agrees with the reference bit for bit
// (sdpa_decode_gated's online softmax within rounding, see
// attender.attendGatedFPU; sdpa_prefill_gated's bit for bit too, see
// attender.attendFlashFPU):
// sum, mean, rms_norm and rms_norm_plain (reduce.go, norm.go), cumsum,
// conv_depthwise and tril_inverse (gdn.go), rotary (rotaryFPU) and
// sdpa_decode and sdpa_prefill (attender.attendFPU, attention.go); bmm
// uses the FPU products of numerics.Matmul, as matmul does. Without it
// these "fp32 math" ops are computed in float64 and rounded once per
// element to float32. A cache
// position pos is one [1] uint32 value shared by every user; every
// position it addresses must lie inside the cache.
//
// # Meshes and collectives
//
// A graph is one device's program. Eval runs it for one device: a
// collective (all_reduce, reduce_scatter, all_gather) whose devices
// attribute is 1 is the identity there, and one over more devices is an
// error, since it needs the other devices' operands. EvalMesh runs the
// graph on every device of g.Mesh in lockstep, op by op, with one env per
// device; a collective combines the operands of the devices of one mesh
// row (its devices attribute must equal g.Mesh.Cols) as its Doc line says,
// summing in float64 in device order with one rounding, and every
// device's result is then stored in the result's dtype (collective.go,
// mesh.go).
//
// # Adding an op
//
// The evaluator is a table from ir.OpKind to an evalFunc, filled by one
// register call per op class file (eltwise.go, reduce.go, matmul.go,
// norm.go, data.go, layout.go, modelmath.go, gdn.go, attention.go,
// collective.go); a collective also has a meshFunc in meshEvaluators. A new op is one entry: a function that validates the
// shapes and attributes it uses, computes float32 results before storage
// rounding and returns errors without panicking. A test fails for every op
// kind of the ir op table that has no entry.
package ref
