package opspec

// Attributes shared by the model ops.
var (
	axisAttr    = Attr{Name: "axis", Kind: AttrInt}
	devicesAttr = Attr{Name: "devices", Kind: AttrInt}
	epsAttr     = Attr{Name: "eps", Kind: AttrFloat}
)

// modelOps are the ops of the Qwen-style hybrid models: layout and data
// movement of the composed path, GDN and attention pieces, collectives.
//
// Conventions of the Doc lines: shapes are per device; an axis attribute may
// be negative and then counts from the end (-1 is the last dim); "fp32 math"
// means the op computes in float32 and rounds once to the result dtype
// (round to nearest even); unless a Doc line says otherwise the result has
// the first operand's dtype.
var modelOps = []Op{
	// data movement and layout
	{Name: "slice", Go: "Slice", Doc: "out = x[begin[0]:end[0], ..., begin[r-1]:end[r-1]]: one (begin, end) pair per dim of x, 0 <= begin < end <= dim, end exclusive, step 1", Operands: []string{"x"}, Attrs: []Attr{{Name: "begin", Kind: AttrInts}, {Name: "end", Kind: AttrInts}}, Results: 1, Shape: "shapeSlice", Class: "data"},
	{Name: "concat", Go: "Concat", Doc: "out = a, b and any further operands joined along axis in order: out[.., i, ..] = a[.., i, ..] for i < a.shape[axis], else b[.., i - a.shape[axis], ..] for i < a.shape[axis] + b.shape[axis], and so on; all other dims and the dtypes equal (models build two operands, FlattenConcat joins chains)", Operands: []string{"a", "b"}, Variadic: true, Attrs: []Attr{axisAttr}, Results: 1, Shape: "shapeConcat", Class: "data"},
	{Name: "pad", Go: "Pad", Doc: "out has the given shape (every dim >= x's): out[i] = x[i] where index i lies inside x's shape, else value (x sits at the low corner)", Operands: []string{"x"}, Attrs: []Attr{{Name: "shape", Kind: AttrInts}, {Name: "value", Kind: AttrFloat}}, Results: 1, Shape: "shapePad", Class: "data"},
	{Name: "repeat_interleave", Go: "RepeatInterleave", Doc: "out[.., i, ..] = x[.., i / repeats (integer division), ..] along axis: each slice of x repeated repeats times in a row, out.shape[axis] = repeats * x.shape[axis]", Operands: []string{"x"}, Attrs: []Attr{{Name: "repeats", Kind: AttrInt}, axisAttr}, Results: 1, Shape: "shapeRepeatInterleave", Class: "data"},
	{Name: "transpose", Go: "Transpose", Doc: "out = x with dims dim0 and dim1 swapped: out[.., j, .., i, ..] = x[.., i, .., j, ..] (dim0 != dim1)", Operands: []string{"x"}, Attrs: []Attr{{Name: "dim0", Kind: AttrInt}, {Name: "dim1", Kind: AttrInt}}, Results: 1, Shape: "shapeTranspose", Class: "layout"},
	{Name: "to_memory", Go: "ToMemory", Doc: "out = x, values unchanged, moved to placement mem (a MemKind name, e.g. l1_height_sharded); sharded kinds take grid [x0, y0, x1, y1] and shard [rows, cols], the others take neither", Operands: []string{"x"}, Attrs: []Attr{{Name: "mem", Kind: AttrString}, {Name: "grid", Kind: AttrInts, Optional: true}, {Name: "shard", Kind: AttrInts, Optional: true}}, Results: 1, Shape: "shapeToMemory", Class: "layout"},
	// eltwise and reductions
	{Name: "softplus", Go: "Softplus", Doc: "out = log(1 + exp(x)) where x <= 20, else x (beta 1, threshold 20)", Operands: []string{"x"}, Results: 1, Shape: "shapeSame", Class: "eltwise", SFPU: true},
	{Name: "sum", Go: "Sum", Doc: "out[.., 0, ..] = sum of x over axis, the axis kept with size 1; fp32 accumulation, result in x's dtype", Operands: []string{"x"}, Attrs: []Attr{axisAttr}, Results: 1, Shape: "shapeSum", Class: "reduce"},
	{Name: "cumsum", Go: "Cumsum", Doc: "out[.., i, ..] = sum of x[.., j, ..] over j = 0..i along axis (inclusive prefix sum); fp32 accumulation", Operands: []string{"x"}, Attrs: []Attr{axisAttr}, Results: 1, Shape: "shapeSumLike", Class: "reduce"},
	{Name: "tril", Go: "Tril", Doc: "out[.., i, j] = x[.., i, j] where j - i <= diagonal, else 0, over the last two dims", Operands: []string{"x"}, Attrs: []Attr{{Name: "diagonal", Kind: AttrInt}}, Results: 1, Shape: "shapeTrailingMatrix", Class: "eltwise"},
	// the weightless norm as the composed path issues it (one program; not a fused op)
	{Name: "rms_norm_plain", Go: "RMSNormPlain", Doc: "out = x * rsqrt(mean(x^2 over the last dim) + eps) (no weight); fp32 math", Operands: []string{"x"}, Attrs: []Attr{epsAttr}, Results: 1, Shape: "shapeSame", Class: "norm"},
	// batched matmul (activation x activation)
	{Name: "bmm", Go: "BMM", Doc: "out[.., m, n] = sum_k a[.., m, k] * b[.., k, n]: a [.., M, K] and b [.., K, N] of equal rank >= 2 and equal leading dims; fp32 accumulation, result in dtype (default a's dtype)", Operands: []string{"a", "b"}, Attrs: []Attr{dtypeAttr}, Results: 1, Shape: "shapeBMM", Class: "matmul"},
	{Name: "tril_inverse", Go: "TrilInverse", Doc: "out = (I + L)^-1 for every trailing [n, n] matrix of x, L = x's strictly lower triangular part (entries on and above the diagonal are ignored); out is unit lower triangular; fp32 math (forward substitution)", Operands: []string{"x"}, Results: 1, Shape: "shapeSquareMatrix", Class: "matmul"},
	// convolution
	{Name: "conv_depthwise", Go: "ConvDepthwise", Doc: "out[.., t, c] = sum over j = 0..K-1 of w[j, c] * x[.., t + j, c] for t = 0..T-K: valid depthwise 1-D convolution along x's second-to-last dim (x [.., T, C], w [K, C], out [.., T-K+1, C]); fp32 math", Operands: []string{"x", "w"}, Results: 1, Shape: "shapeConvDepthwise", Class: "eltwise"},
	// attention pieces
	{Name: "rotary", Go: "Rotary", Doc: "out = x * cos + rotate_half(x) * sin with rotate_half(x)[.., i] = -x[.., i + R/2] for i < R/2 and x[.., i - R/2] for i >= R/2, R = x's last dim (even); cos and sin have last dim R and broadcast to x (numpy rules); fp32 math", Operands: []string{"x", "cos", "sin"}, Results: 1, Shape: "shapeRotary", Class: "attention"},
	{Name: "update_cache", Go: "UpdateCache", Doc: "out = cache [B, Hc, L, D] except out[b, h, p_b, :] = new[b, h, :] for every b and h < Hc; new is [B, Hn, D] with Hn >= Hc (rows h >= Hc are padding, ignored); pos is [1] uint32 (p_b = pos[0]: every user at one position) or [B] uint32 (p_b = pos[b]: a position per user), each < L; written in place when cache is state", Operands: []string{"cache", "new", "pos"}, Results: 1, Shape: "shapeUpdateCache", Class: "data"},
	{Name: "sdpa_decode", Go: "SDPADecode", Doc: "out[b, h, :] = sum over t = 0..p_b of p[t] * v[b, h/G, t, :] (h/G: integer division), p = softmax over t = 0..p_b of scale * dot(q[b, h, :], k[b, h/G, t, :]); q [B, Hq, D], k and v [B, Hkv, L, D], G = Hq/Hkv, pos [1] uint32 (p_b = pos[0] for every user) or [B] uint32 (p_b = pos[b], a position per user), each < L; fp32 math", Operands: []string{"q", "k", "v", "pos"}, Attrs: []Attr{{Name: "scale", Kind: AttrFloat}}, Results: 1, Shape: "shapeSDPADecode", Class: "attention"},
	{Name: "fill_cache", Go: "FillCache", Doc: "out = cache [B, H, L, D] except out[b, h, pos[0] + s, :] = new[b, h, s, :] for s = 0..S-1; new is [B, H, S, D]; pos is [1] uint32 with pos[0] + S <= L; written in place when cache is state", Operands: []string{"cache", "new", "pos"}, Results: 1, Shape: "shapeFillCache", Class: "data"},
	{Name: "sdpa_prefill", Go: "SDPAPrefill", Doc: "out[b, h, s, :] = sum over t = 0..pos[0]+s of p[t] * v[b, h/G, t, :] (h/G: integer division), p = softmax over t = 0..pos[0]+s of scale * dot(q[b, h, s, :], k[b, h/G, t, :]) (causal); q [B, Hq, S, D], k and v [B, Hkv, L, D], G = Hq/Hkv, pos [1] uint32, pos[0] + S <= L; fp32 math", Operands: []string{"q", "k", "v", "pos"}, Attrs: []Attr{{Name: "scale", Kind: AttrFloat}}, Results: 1, Shape: "shapeSDPAPrefill", Class: "attention"},
	// collectives over the devices of a 1xN mesh row (a ring); devices is N
	{Name: "all_reduce", Go: "AllReduce", Doc: "out = elementwise sum of x over the devices devices of the mesh row; every device gets the whole sum (result replicated), same shape and dtype as x", Operands: []string{"x"}, Attrs: []Attr{devicesAttr}, Results: 1, Shape: "shapeAllReduce", Class: "collective"},
	{Name: "reduce_scatter", Go: "ReduceScatter", Doc: "s = elementwise sum of x over the devices devices; device d gets out = s[.., d*n : (d+1)*n, ..] along axis, n = x.shape[axis] / devices (result split on axis)", Operands: []string{"x"}, Attrs: []Attr{axisAttr, devicesAttr}, Results: 1, Shape: "shapeReduceScatter", Class: "collective"},
	{Name: "all_gather", Go: "AllGather", Doc: "out = the x of devices 0..devices-1 joined along axis in device order, out.shape[axis] = devices * x.shape[axis]; every device gets the same result (replicated)", Operands: []string{"x"}, Attrs: []Attr{axisAttr, devicesAttr}, Results: 1, Shape: "shapeAllGather", Class: "collective"},
}
