package opspec

var (
	dtypeAttr = Attr{Name: "dtype", Kind: AttrDType, Optional: true}
)

// coreOps are the eltwise, reduction, matmul, norm and data ops of small models.
var coreOps = []Op{
	// eltwise binary (numpy broadcasting over the trailing dimensions)
	{Name: "add", Go: "Add", Doc: "out = a + b, broadcasting", Operands: []string{"a", "b"}, Results: 1, Shape: "shapeBroadcast", Class: "eltwise"},
	{Name: "sub", Go: "Sub", Doc: "out = a - b, broadcasting", Operands: []string{"a", "b"}, Results: 1, Shape: "shapeBroadcast", Class: "eltwise"},
	{Name: "mul", Go: "Mul", Doc: "out = a * b, broadcasting", Operands: []string{"a", "b"}, Results: 1, Shape: "shapeBroadcast", Class: "eltwise"},
	// eltwise with a scalar attribute
	{Name: "add_scalar", Go: "AddScalar", Doc: "out = x + value; x float, or uint32/int32 with an integral value (integer add, e.g. a position advancing on the device)", Operands: []string{"x"}, Attrs: []Attr{{Name: "value", Kind: AttrFloat}}, Results: 1, Shape: "shapeAddScalar", Class: "eltwise", SFPU: true},
	{Name: "mul_scalar", Go: "MulScalar", Doc: "out = x * value", Operands: []string{"x"}, Attrs: []Attr{{Name: "value", Kind: AttrFloat}}, Results: 1, Shape: "shapeSame", Class: "eltwise", SFPU: true},
	// eltwise unary
	{Name: "silu", Go: "SiLU", Doc: "out = x * sigmoid(x)", Operands: []string{"x"}, Results: 1, Shape: "shapeSame", Class: "eltwise", SFPU: true},
	{Name: "sigmoid", Go: "Sigmoid", Doc: "out = 1 / (1 + exp(-x))", Operands: []string{"x"}, Results: 1, Shape: "shapeSame", Class: "eltwise", SFPU: true},
	{Name: "exp", Go: "Exp", Doc: "out = exp(x)", Operands: []string{"x"}, Results: 1, Shape: "shapeSame", Class: "eltwise", SFPU: true},
	{Name: "rsqrt", Go: "Rsqrt", Doc: "out = 1 / sqrt(x)", Operands: []string{"x"}, Results: 1, Shape: "shapeSame", Class: "eltwise", SFPU: true},
	{Name: "square", Go: "Square", Doc: "out = x * x", Operands: []string{"x"}, Results: 1, Shape: "shapeSame", Class: "eltwise", SFPU: true},
	// reductions
	{Name: "mean", Go: "Mean", Doc: "out[..., 0] = mean of x over the last dimension (kept as size 1)", Operands: []string{"x"}, Results: 1, Shape: "shapeReduceLast", Class: "reduce"},
	{Name: "argmax", Go: "Argmax", Doc: "out[..., 0] = index of the first maximum of x over the last dimension, uint32", Operands: []string{"x"}, Results: 1, Shape: "shapeArgmax", Class: "reduce"},
	// matmul
	{Name: "matmul", Go: "Matmul", Doc: "out[..., m, n] = sum_k a[..., m, k] * w[k, n]; w is [K, N]; accumulate in fp32, round to dtype (default a's dtype)", Operands: []string{"a", "w"}, Attrs: []Attr{dtypeAttr}, Results: 1, Shape: "shapeMatmul", Class: "matmul"},
	// norms: a model writes rms_norm (one program, as the composed path) or
	// writes it out, and the norm rules (passes/fuse_norm.go) fold that into it
	{Name: "rms_norm", Go: "RMSNorm", Doc: "out = x * rsqrt(mean(x^2 over the last dim) + eps) * (w + offset); w has as many elements as x's last dim and broadcasts over the rest; offset is 0 or 1 (zero-centred weights); fp32 math", Operands: []string{"x", "w"}, Attrs: []Attr{{Name: "eps", Kind: AttrFloat}, {Name: "offset", Kind: AttrFloat}}, Results: 1, Shape: "shapeNorm", Class: "norm"},
	// data movement
	{Name: "embedding", Go: "Embedding", Doc: "out[..., t, :] = table[ids[..., t], :]; ids are uint32 row indices", Operands: []string{"ids", "table"}, Results: 1, Shape: "shapeEmbedding", Class: "data"},
	{Name: "typecast", Go: "Typecast", Doc: "out = x converted to dtype (round to nearest even)", Operands: []string{"x"}, Attrs: []Attr{{Name: "dtype", Kind: AttrDType}}, Results: 1, Shape: "shapeTypecast", Class: "layout"},
	{Name: "reshape", Go: "Reshape", Doc: "out = x viewed with shape (same element count, row-major order)", Operands: []string{"x"}, Attrs: []Attr{{Name: "shape", Kind: AttrInts}}, Results: 1, Shape: "shapeReshape", Class: "layout"},
}
