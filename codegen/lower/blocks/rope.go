package blocks

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/ir"
)

// RopeMatrix is the rotate-half RoPE of the first R columns of a row
// vector, written as a matrix product: for y a row of Width columns (Width a
// multiple of 32, R <= Width),
//
//	(y M)[i] = y[i]*cos[i] + rotate_half(y[0:R])[i]*sin[i]   for i < R
//	(y M)[i] = y[i]                                          for R <= i < Width
//
// with rotate_half(y)[i] = -y[i+R/2] for i < R/2 and y[i-R/2] otherwise.
// M holds cos[i] at (i, i), the signed sin[i] at ((i+R/2) mod R, i) and 1
// at (i, i) for i >= R; every other entry is 0. A matmul on the FPU
// computes the two products of each element exactly (bf16 operands at
// HiFi4) and sums them in fp32 DEST, so the rotation costs one rounding,
// as the Doc lines' "fp32 math" says, and rotate-half needs no data
// movement of the rotated vector.
//
// M is Width/32 x Width/32 tiles, most of them zero; Tiles lists the
// nonzero ones in the order a compute kernel consumes them (by output tile
// column, then row), and a data-movement kernel builds each one with
// EmitTile from the cos and sin rows of one token.
type RopeMatrix struct {
	R, Width int
	Tiles    []RopeTile
}

// RopeTile is one nonzero 32x32 tile of a RopeMatrix: tile (Row, Col) and
// the runs of nonzero entries in it.
type RopeTile struct {
	Row, Col int
	runs     []ropeRun
}

// ropeSrc is where a run's values come from.
type ropeSrc uint8

const (
	ropeCos ropeSrc = iota
	ropeSin
	ropeOne
)

// ropeRun is a run of matrix columns [i0, i1) with entry (i+delta, i) =
// src[i], negated when neg.
type ropeRun struct {
	src    ropeSrc
	i0, i1 int
	delta  int
	neg    bool
}

// NewRopeMatrix plans the matrix for R rotary columns (even, >= 2) of a
// row of width columns (a multiple of 32, >= R).
func NewRopeMatrix(R, width int) (RopeMatrix, error) {
	if R < 2 || R%2 != 0 || width%TileDim != 0 || width < R {
		return RopeMatrix{}, fmt.Errorf("rule rope-matrix: %d rotary dims must be even, >= 2 and fit %d columns (a multiple of %d)", R, width, TileDim)
	}
	half := R / 2
	type key struct{ row, col int }
	byTile := map[key]*RopeTile{}
	add := func(src ropeSrc, i, j int, neg bool) {
		k := key{j / TileDim, i / TileDim}
		t := byTile[k]
		if t == nil {
			t = &RopeTile{Row: k.row, Col: k.col}
			byTile[k] = t
		}
		for k := range t.runs {
			if r := &t.runs[k]; r.src == src && r.neg == neg && r.i1 == i && r.delta == j-i {
				r.i1++
				return
			}
		}
		t.runs = append(t.runs, ropeRun{src: src, i0: i, i1: i + 1, delta: j - i, neg: neg})
	}
	for i := 0; i < width; i++ {
		if i >= R {
			add(ropeOne, i, i, false)
			continue
		}
		add(ropeCos, i, i, false)
		add(ropeSin, i, (i+half)%R, i < half)
	}
	m := RopeMatrix{R: R, Width: width}
	for col := 0; col < width/TileDim; col++ {
		for row := 0; row < width/TileDim; row++ {
			if t := byTile[key{row, col}]; t != nil {
				m.Tiles = append(m.Tiles, *t)
			}
		}
	}
	return m, nil
}

// RotateHalf is the signed permutation part of m alone: (y R)[i] =
// rotate_half(y[0:R])[i] for i < R and 0 for i >= R, entries -1, +1 and 0
// (no table values: EmitTile ignores cosAt and sinAt). A matmul with it
// moves bf16 values exactly, which rotates a row whose tables differ per
// row (prefill: one token per row) before an element-wise multiply.
func (m RopeMatrix) RotateHalf() RopeMatrix {
	out := RopeMatrix{R: m.R, Width: m.Width}
	for _, t := range m.Tiles {
		var runs []ropeRun
		for _, r := range t.runs {
			if r.src == ropeSin {
				r.src = ropeOne
				runs = append(runs, r)
			}
		}
		if len(runs) > 0 {
			out.Tiles = append(out.Tiles, RopeTile{Row: t.Row, Col: t.Col, runs: runs})
		}
	}
	return out
}

// ColTiles is the number of tile columns (and rows) of M.
func (m RopeMatrix) ColTiles() int { return m.Width / TileDim }

// RowsFor lists the tile rows of the nonzero tiles in tile column col, in
// the order of Tiles.
func (m RopeMatrix) RowsFor(col int) []int {
	var rows []int
	for _, t := range m.Tiles {
		if t.Col == col {
			rows = append(rows, t.Row)
		}
	}
	return rows
}

// EmitTile emits, in a data-movement kernel, the entries of tile t into
// the tile at L1 address dst (elements of dt, bf16 or fp32), which the
// caller has zeroed. cosAt(i) and sinAt(i) are the L1 addresses of the
// table elements of column i (in dt's format); i is a run-time value inside
// a loop over one tile column.
func (t RopeTile) EmitTile(b *kir.Builder, dst kir.Expr, dt ir.DType, cosAt, sinAt func(i kir.Expr) kir.Expr) {
	eb := ElemBytes(dt)
	sign := uint32(0x8000)
	if eb == 4 {
		sign = 0x80000000
	}
	one := Bits(dt, 1)
	for _, r := range t.runs {
		b.For("ri", kir.Ci(r.i0), kir.Ci(r.i1), func(i kir.Var) {
			row := offsetBy(i, r.delta-TileDim*t.Row) // (i + delta) % 32
			col := offsetBy(i, -TileDim*t.Col)
			var v kir.Expr
			switch r.src {
			case ropeOne:
				v = kir.C(one)
			case ropeCos:
				v = LoadElem(cosAt(i), eb)
			default:
				v = LoadElem(sinAt(i), eb)
			}
			if r.neg {
				v = kir.Bin{Op: kir.OpXor, X: v, Y: kir.C(sign)}
			}
			StoreElem(b, kir.Add(dst, FaceOffset(row, col, eb)), v, eb)
		})
	}
}

// offsetBy is e + k for a constant k of either sign (the sum is
// non-negative).
func offsetBy(e kir.Expr, k int) kir.Expr {
	switch {
	case k > 0:
		return kir.Add(e, kir.Ci(k))
	case k < 0:
		return kir.Sub(e, kir.Ci(-k))
	}
	return e
}

// CopyTileRow copies row srcRow of the tile at L1 address src to row
// dstRow of the tile at dst (rows are expressions; elements of eb bytes, 2
// or 4): two face-row runs of 16 elements, local NoC reads. The caller
// issues the read barrier.
func CopyTileRow(b *kir.Builder, src, srcRow, dst, dstRow kir.Expr, eb int) {
	for c := 0; c < TileDim; c += FaceDim {
		CopyRun(b, kir.Add(src, FaceOffset(srcRow, kir.Ci(c), eb)), kir.Add(dst, FaceOffset(dstRow, kir.Ci(c), eb)), FaceDim, eb, FaceDim*eb)
	}
}

// RowTile produces one page of CB cb (bf16 or fp32 tiles of dt) holding
// value in every element of tile row `row` and 0 elsewhere. With row 0 it
// is the right operand that turns a matmul into a column broadcast: (A x
// RowTile)[r][c] = A[r][0]. Produces one page of cb.
func RowTile(b *kir.Builder, cb int, dt ir.DType, row int, value float32) {
	eb := ElemBytes(dt)
	p := Reserve(b, cb, kir.C(1), "rowtile")
	FillWords(b, p, dt.TileBytes(), 0)
	w := FillWord(dt, value)
	for c := 0; c < TileDim; c += FaceDim {
		off := FaceOffsetConst(row, c, eb)
		for k := 0; k < FaceDim*eb/4; k++ {
			b.L1Write32(kir.Add(p, kir.Ci(off+4*k)), kir.C(w))
		}
	}
	b.CBPushBack(cb, kir.C(1))
}
