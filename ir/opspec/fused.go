package opspec

// Fused ops, one list per fusion family; each is produced only by a rule
// in passes/fuse_<family>.go and records the decomposition it replaced.

// fusedGDNOps are produced by passes/fuse_gdn.go.
var fusedGDNOps = []Op{}

// fusedAttentionOps are produced by passes/fuse_attention.go.
var fusedAttentionOps = []Op{}

// fusedCommonOps are produced by the layout, matmul, MLP, residual,
// collective and eltwise families.
var fusedCommonOps = []Op{}
