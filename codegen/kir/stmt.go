package kir

// Stmt is a statement node. The set is closed: the control statements Let,
// Assign, For, If, Comment, and one type per tt-metal API call (see api.go
// for the C++ name of each). Printer and executor switch over the same set.
type Stmt interface{ isStmt() }

// ---- control ----

// Let declares Var and initialises it with Value (`uint32_t v = value;`).
type Let struct {
	Var   Var
	Value Expr
}

// Assign stores Value into a declared Var.
type Assign struct {
	Var   Var
	Value Expr
}

// For is `for (uint32_t v = Start; v < End; v += Step) { Body }`; End and
// Step are re-evaluated every iteration as in C++. A nil Step means 1.
type For struct {
	Var        Var
	Start, End Expr
	Step       Expr
	Body       []Stmt
}

// If is `if (Cond) { Then } else { Else }` (Cond != 0 is true).
type If struct {
	Cond Expr
	Then []Stmt
	Else []Stmt
}

// Comment is printed as a C++ comment; it does nothing.
type Comment struct{ Text string }

// ---- circular buffers (any kernel) ----

// CBReserveBack is cb_reserve_back(CB, N): block until N pages are free.
type CBReserveBack struct {
	CB int
	N  Expr
}

// CBPushBack is cb_push_back(CB, N): publish N written pages.
type CBPushBack struct {
	CB int
	N  Expr
}

// CBWaitFront is cb_wait_front(CB, N): block until N pages are available
// (counted from the front; repeated waits without pops are cumulative).
type CBWaitFront struct {
	CB int
	N  Expr
}

// CBPopFront is cb_pop_front(CB, N): free N front pages.
type CBPopFront struct {
	CB int
	N  Expr
}

// ---- NoC and semaphores (data-movement kernels) ----

// NoCAsyncRead is noc_async_read(Src, Dst, Size): copy Size bytes from the
// U64 NoC address Src to L1 address Dst of this core.
type NoCAsyncRead struct{ Src, Dst, Size Expr }

// NoCAsyncWrite is noc_async_write(Src, Dst, Size): copy Size bytes from L1
// address Src of this core to the U64 NoC address Dst.
type NoCAsyncWrite struct{ Src, Dst, Size Expr }

// NoCAsyncWriteMulticast is noc_async_write_multicast(Src, Dst, Size,
// NumDests): copy to every core of the multicast rectangle Dst except the
// sender; NumDests must equal that number of cores.
type NoCAsyncWriteMulticast struct{ Src, Dst, Size, NumDests Expr }

// NoCAsyncReadBarrier is noc_async_read_barrier().
type NoCAsyncReadBarrier struct{}

// NoCAsyncWriteBarrier is noc_async_write_barrier().
type NoCAsyncWriteBarrier struct{}

// NoCAsyncWritesFlushed is noc_async_writes_flushed().
type NoCAsyncWritesFlushed struct{}

// NoCAsyncAtomicBarrier is noc_async_atomic_barrier(): wait until every
// non-posted atomic (noc_semaphore_inc) issued has been acknowledged. A
// kernel must not end with increments in flight.
type NoCAsyncAtomicBarrier struct{}

// NoCSemaphoreSet is noc_semaphore_set(Addr, Value) on a local L1 semaphore.
type NoCSemaphoreSet struct{ Addr, Value Expr }

// NoCSemaphoreWait is noc_semaphore_wait(Addr, Value): block until the local
// semaphore equals Value.
type NoCSemaphoreWait struct{ Addr, Value Expr }

// NoCSemaphoreWaitMin is noc_semaphore_wait_min(Addr, Value): block until
// the local semaphore is >= Value.
type NoCSemaphoreWaitMin struct{ Addr, Value Expr }

// NoCSemaphoreInc is noc_semaphore_inc(Addr, Incr): atomically add Incr to
// the semaphore at U64 NoC address Addr.
type NoCSemaphoreInc struct{ Addr, Incr Expr }

// NoCSemaphoreSetMulticast is noc_semaphore_set_multicast(Src, Dst,
// NumDests): copy the local semaphore word at L1 address Src to the
// multicast address Dst on every core of the rectangle except the sender.
type NoCSemaphoreSetMulticast struct{ Src, Dst, NumDests Expr }

// L1Write32 stores Value at L1 address Addr of this core
// (*(volatile tt_l1_ptr uint32_t*)Addr = Value).
type L1Write32 struct{ Addr, Value Expr }

// ---- compute ----

// ComputeKernelHWStartup is compute_kernel_hw_startup(ICB0, ICB1, OCB): the
// first call of every compute kernel; it configures unpacker source A with
// ICB0's format, source B with ICB1's, and the packer with OCB's. With
// SrcReverse it is compute_kernel_hw_startup<SrcOrder::Reverse>(...), the
// form matmul kernels use (in0 feeds source B, in1 source A).
type ComputeKernelHWStartup struct {
	ICB0, ICB1, OCB int
	SrcReverse      bool
}

// TileRegsAcquire is tile_regs_acquire(): math takes a zeroed DEST half.
type TileRegsAcquire struct{}

// TileRegsCommit is tile_regs_commit(): math hands the DEST half to pack.
type TileRegsCommit struct{}

// TileRegsWait is tile_regs_wait(): pack waits for the committed half.
type TileRegsWait struct{}

// TileRegsRelease is tile_regs_release(): pack frees the half.
type TileRegsRelease struct{}

// CopyTileInit is copy_tile_to_dst_init_short(CB).
type CopyTileInit struct{ CB int }

// CopyTile is copy_tile(CB, Tile, Dst): unpack tile Tile (counted from the
// CB front) into DEST[Dst].
type CopyTile struct {
	CB        int
	Tile, Dst Expr
}

// EltwiseOp is an FPU element-wise binary operation.
type EltwiseOp uint8

const (
	EltAdd EltwiseOp = iota
	EltSub
	EltMul
)

func (o EltwiseOp) String() string {
	switch o {
	case EltAdd:
		return "add"
	case EltSub:
		return "sub"
	}
	return "mul"
}

// BinaryInit is add_tiles_init / sub_tiles_init / mul_tiles_init(ICB0, ICB1).
type BinaryInit struct {
	Op         EltwiseOp
	ICB0, ICB1 int
}

// BinaryTiles is add_tiles / sub_tiles / mul_tiles(ICB0, ICB1, Tile0, Tile1,
// Dst): DEST[Dst] = in0[Tile0] op in1[Tile1].
type BinaryTiles struct {
	Op                EltwiseOp
	ICB0, ICB1        int
	Tile0, Tile1, Dst Expr
}

// BcastDim says which part of the second operand tile is broadcast.
type BcastDim uint8

const (
	// BcastRows broadcasts row 0 of in1 down all rows.
	BcastRows BcastDim = iota
	// BcastCols broadcasts column 0 of in1 across all columns.
	BcastCols
	// BcastScalar broadcasts element (0,0) of in1.
	BcastScalar
)

func (d BcastDim) String() string {
	switch d {
	case BcastRows:
		return "rows"
	case BcastCols:
		return "cols"
	}
	return "scalar"
}

// BcastInit is the short init of a broadcast binary op, e.g.
// add_bcast_rows_init_short(ICB0, ICB1) or mul_tiles_bcast_scalar_init_short.
type BcastInit struct {
	Op         EltwiseOp
	Dim        BcastDim
	ICB0, ICB1 int
}

// BcastTiles is e.g. add_tiles_bcast_rows / mul_tiles_bcast_cols /
// mul_tiles_bcast_scalar(ICB0, ICB1, Tile0, Tile1, Dst).
type BcastTiles struct {
	Op                EltwiseOp
	Dim               BcastDim
	ICB0, ICB1        int
	Tile0, Tile1, Dst Expr
}

// MatmulInit is matmul_init(In0, In1, Transpose), the short init of matmul_tiles.
// Transpose transposes each in1 tile before multiplying.
type MatmulInit struct {
	In0, In1  int
	Transpose bool
}

// MatmulTiles is matmul_tiles(In0, In1, Tile0, Tile1, Dst): DEST[Dst] +=
// in0[Tile0] x in1[Tile1] (one 32x32x32 tile product, accumulating).
type MatmulTiles struct {
	In0, In1          int
	Tile0, Tile1, Dst Expr
}

// MatmulBlockInit is matmul_block_init(In0, In1, Transpose, CtDim, RtDim, KtDim).
type MatmulBlockInit struct {
	In0, In1            int
	Transpose           bool
	CtDim, RtDim, KtDim Expr
}

// MatmulBlock is matmul_block(In0, In1, Tile0, Tile1, Dst, Transpose, CtDim,
// RtDim, KtDim): for r < RtDim, c < CtDim,
// DEST[Dst + r*CtDim + c] += in0[Tile0 + r*KtDim] x in1[Tile1 + c]
// (one inner-dimension step of an RtDim x CtDim output block).
type MatmulBlock struct {
	In0, In1            int
	Tile0, Tile1, Dst   Expr
	Transpose           bool
	CtDim, RtDim, KtDim Expr
}

// ReduceOp is the reduction function.
type ReduceOp uint8

const (
	ReduceSum ReduceOp = iota
	ReduceMax
)

func (o ReduceOp) String() string {
	if o == ReduceMax {
		return "max"
	}
	return "sum"
}

// ReduceDim is the reduced dimension.
type ReduceDim uint8

const (
	// ReduceRow reduces each row to one value (result in column 0).
	ReduceRow ReduceDim = iota
	// ReduceCol reduces each column to one value (result in row 0).
	ReduceCol
	// ReduceScalar reduces the tile to element (0,0).
	ReduceScalar
)

func (d ReduceDim) String() string {
	switch d {
	case ReduceRow:
		return "row"
	case ReduceCol:
		return "col"
	}
	return "scalar"
}

// ReduceInit is reduce_init<Op, Dim>(ICB, ScalerCB, OCB).
type ReduceInit struct {
	Op                 ReduceOp
	Dim                ReduceDim
	ICB, ScalerCB, OCB int
}

// ReduceTile is reduce_tile<Op, Dim>(ICB, ScalerCB, Tile, ScalerTile, Dst):
// DEST[Dst] accumulates (sum) or maxes the reduction of in[Tile] scaled by
// the scaler tile's first element.
type ReduceTile struct {
	Op                    ReduceOp
	Dim                   ReduceDim
	ICB, ScalerCB         int
	Tile, ScalerTile, Dst Expr
}

// ReduceUninit is reduce_uninit().
type ReduceUninit struct{}

// TransposeInit is transpose_wh_init_short(CB).
type TransposeInit struct{ CB int }

// TransposeTile is transpose_wh_tile(CB, Tile, Dst).
type TransposeTile struct {
	CB        int
	Tile, Dst Expr
}

// SFPUInit is the op's init, e.g. exp_tile_init().
type SFPUInit struct{ Op SFPUOp }

// SFPU is the op on DEST[Dst], e.g. exp_tile(Dst). Param holds the float32
// bits of the scalar for ops with HasParam; Src is the second operand's
// DEST index for IsBinary ops (add_binary_tile(Dst, Src, Dst): DEST[Dst]
// = DEST[Dst] op DEST[Src]), nil otherwise.
type SFPU struct {
	Op    SFPUOp
	Dst   Expr
	Param uint32
	Src   Expr
}

// PackTile is pack_tile(Dst, CB): pack DEST[Dst] into the next reserved page
// of CB (the page after the ones packed since the last cb_push_back). When
// OutTile is non-nil it is pack_tile<true>(Dst, CB, OutTile): pack into
// reserved page OutTile.
type PackTile struct {
	Dst     Expr
	CB      int
	OutTile Expr
}

// ReconfigDataFormat is reconfig_data_format(SrcA, SrcB): reconfigure the
// unpacker for the formats of CBs SrcA and SrcB.
type ReconfigDataFormat struct{ SrcA, SrcB int }

// PackReconfigDataFormat is pack_reconfig_data_format(CB).
type PackReconfigDataFormat struct{ CB int }

func (Let) isStmt()                      {}
func (Assign) isStmt()                   {}
func (For) isStmt()                      {}
func (If) isStmt()                       {}
func (Comment) isStmt()                  {}
func (CBReserveBack) isStmt()            {}
func (CBPushBack) isStmt()               {}
func (CBWaitFront) isStmt()              {}
func (CBPopFront) isStmt()               {}
func (NoCAsyncRead) isStmt()             {}
func (NoCAsyncWrite) isStmt()            {}
func (NoCAsyncWriteMulticast) isStmt()   {}
func (NoCAsyncReadBarrier) isStmt()      {}
func (NoCAsyncWriteBarrier) isStmt()     {}
func (NoCAsyncWritesFlushed) isStmt()    {}
func (NoCAsyncAtomicBarrier) isStmt()    {}
func (NoCSemaphoreSet) isStmt()          {}
func (NoCSemaphoreWait) isStmt()         {}
func (NoCSemaphoreWaitMin) isStmt()      {}
func (NoCSemaphoreInc) isStmt()          {}
func (NoCSemaphoreSetMulticast) isStmt() {}
func (L1Write32) isStmt()                {}
func (ComputeKernelHWStartup) isStmt()   {}
func (TileRegsAcquire) isStmt()          {}
func (TileRegsCommit) isStmt()           {}
func (TileRegsWait) isStmt()             {}
func (TileRegsRelease) isStmt()          {}
func (CopyTileInit) isStmt()             {}
func (CopyTile) isStmt()                 {}
func (BinaryInit) isStmt()               {}
func (BinaryTiles) isStmt()              {}
func (BcastInit) isStmt()                {}
func (BcastTiles) isStmt()               {}
func (MatmulInit) isStmt()               {}
func (MatmulTiles) isStmt()              {}
func (MatmulBlockInit) isStmt()          {}
func (MatmulBlock) isStmt()              {}
func (ReduceInit) isStmt()               {}
func (ReduceTile) isStmt()               {}
func (ReduceUninit) isStmt()             {}
func (TransposeInit) isStmt()            {}
func (TransposeTile) isStmt()            {}
func (SFPUInit) isStmt()                 {}
func (SFPU) isStmt()                     {}
func (PackTile) isStmt()                 {}
func (ReconfigDataFormat) isStmt()       {}
func (PackReconfigDataFormat) isStmt()   {}
