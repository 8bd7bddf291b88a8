package cpp

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tcc-dev/tcc/codegen/cpp/samples"
	"github.com/tcc-dev/tcc/codegen/kir"
)

// kirKinds parses the kir package source and returns the names of the types
// with an isStmt method and those with an isExpr method: the closed sets of
// statement and expression kinds. A kind added to kir shows up here without
// anyone updating this test.
func kirKinds(t *testing.T) (stmts, exprs []string) {
	t.Helper()
	dir := filepath.Join("..", "kir")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading the kir sources: %v", err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			id, ok := recv.(*ast.Ident)
			if !ok {
				continue
			}
			switch fn.Name.Name {
			case "isStmt":
				stmts = append(stmts, id.Name)
			case "isExpr":
				exprs = append(exprs, id.Name)
			}
		}
	}
	sort.Strings(stmts)
	sort.Strings(exprs)
	// Sanity: the parse found the sets (they had 46 and 14 members when
	// this test was written; they only grow).
	if len(stmts) < 46 || len(exprs) < 14 {
		t.Fatalf("found %d statement and %d expression kinds in %s; the kir sources moved?", len(stmts), len(exprs), dir)
	}
	return stmts, exprs
}

func typeName(v any) string { return reflect.TypeOf(v).Name() }

// TestEveryKindCovered checks that the sample programs use every kir
// statement and expression kind, and every variant the printer spells
// differently, and that all of them print. A new instruction without a
// sample (and so without printer and compile coverage) fails here.
func TestEveryKindCovered(t *testing.T) {
	stmtKinds, exprKinds := kirKinds(t)
	seenStmt, seenExpr := map[string]bool{}, map[string]bool{}
	variants := map[string]bool{}
	for _, s := range samples.All() {
		for _, k := range s.Program.Kernels {
			if _, err := PrintKernel(s.Program, k); err != nil {
				t.Errorf("sample %s: %v", s.Name, err)
			}
			kir.Inspect(k.Body, func(st kir.Stmt) bool {
				seenStmt[typeName(st)] = true
				for _, v := range stmtVariants(st) {
					variants[v] = true
				}
				for _, e := range kir.StmtExprs(st) {
					kir.InspectExpr(e, func(e kir.Expr) bool {
						seenExpr[typeName(e)] = true
						if b, ok := e.(kir.Bin); ok {
							variants["binop "+b.Op.Symbol()] = true
						}
						return true
					})
				}
				return true
			})
		}
	}
	// A persistent program's phase barriers are printed by persist.go
	// (tcc_phase_begin / tcc_phase_end calls in kernel_main), not as
	// statements of a sample program (persist_test.go prints them).
	notPrinted := map[string]bool{"PhaseBegin": true, "PhaseEnd": true}
	var missing []string
	for _, n := range stmtKinds {
		if !seenStmt[n] && !notPrinted[n] {
			missing = append(missing, "statement "+n)
		}
	}
	for _, n := range exprKinds {
		if !seenExpr[n] {
			missing = append(missing, "expression "+n)
		}
	}
	for _, v := range wantVariants() {
		if !variants[v] {
			missing = append(missing, "variant "+v)
		}
	}
	if len(missing) > 0 {
		t.Errorf("no sample program (codegen/cpp/samples) uses:\n  %s\nadd them to a sample so they are printed, compiled and golden-tested",
			strings.Join(missing, "\n  "))
	}
}

// stmtVariants names the printed variants a statement exercises.
func stmtVariants(s kir.Stmt) []string {
	switch s := s.(type) {
	case kir.For:
		return []string{fmt.Sprintf("for step=%t", s.Step != nil)}
	case kir.If:
		return []string{fmt.Sprintf("if else=%t", len(s.Else) > 0)}
	case kir.ComputeKernelHWStartup:
		return []string{fmt.Sprintf("hw_startup reverse=%t", s.SrcReverse)}
	case kir.PackTile:
		return []string{fmt.Sprintf("pack_tile at=%t", s.OutTile != nil)}
	case kir.BinaryInit, kir.BinaryTiles, kir.BcastInit, kir.BcastTiles, kir.ReduceInit, kir.ReduceTile,
		kir.SFPUInit, kir.SFPU:
		return []string{kir.APIName(s) + tmplOf(s)}
	}
	return nil
}

func tmplOf(s kir.Stmt) string {
	switch s := s.(type) {
	case kir.ReduceInit:
		return fmt.Sprintf("<%s,%s>", s.Op, s.Dim)
	case kir.ReduceTile:
		return fmt.Sprintf("<%s,%s>", s.Op, s.Dim)
	}
	return ""
}

// wantVariants enumerates every variant: both forms of the control
// statements, every element-wise op, every broadcast op and dimension,
// every reduce op and dimension, every SFPU op and every binary operator.
func wantVariants() []string {
	v := []string{
		"for step=true", "for step=false", "if else=true", "if else=false",
		"hw_startup reverse=true", "hw_startup reverse=false", "pack_tile at=true", "pack_tile at=false",
	}
	for _, op := range []kir.EltwiseOp{kir.EltAdd, kir.EltSub, kir.EltMul} {
		v = append(v, kir.APIName(kir.BinaryInit{Op: op}), kir.APIName(kir.BinaryTiles{Op: op}))
		for _, d := range []kir.BcastDim{kir.BcastRows, kir.BcastCols, kir.BcastScalar} {
			if kir.APIName(kir.BcastInit{Op: op, Dim: d}) == "" {
				continue // not in the pinned release (Validate rejects it)
			}
			v = append(v, kir.APIName(kir.BcastInit{Op: op, Dim: d}), kir.APIName(kir.BcastTiles{Op: op, Dim: d}))
		}
	}
	for _, op := range []kir.ReduceOp{kir.ReduceSum, kir.ReduceMax} {
		for _, d := range []kir.ReduceDim{kir.ReduceRow, kir.ReduceCol, kir.ReduceScalar} {
			v = append(v, "reduce_init"+tmplOf(kir.ReduceInit{Op: op, Dim: d}), "reduce_tile"+tmplOf(kir.ReduceTile{Op: op, Dim: d}))
		}
	}
	for _, op := range kir.SFPUOps {
		v = append(v, kir.APIName(kir.SFPUInit{Op: op}), kir.APIName(kir.SFPU{Op: op}))
	}
	for op := kir.BinOp(0); !strings.HasPrefix(op.Symbol(), "binop("); op++ {
		v = append(v, "binop "+op.Symbol())
	}
	return v
}

// TestHeaderTableCoversAPINames checks that every compute API name kir can
// produce has a header and every data-movement name a declaration.
func TestHeaderTableCoversAPINames(t *testing.T) {
	var dm []kir.Stmt
	compute := []kir.Stmt{
		kir.ComputeKernelHWStartup{}, kir.TileRegsAcquire{}, kir.TileRegsCommit{}, kir.TileRegsWait{}, kir.TileRegsRelease{},
		kir.CopyTileInit{}, kir.CopyTile{}, kir.MatmulInit{}, kir.MatmulTiles{}, kir.MatmulBlockInit{}, kir.MatmulBlock{},
		kir.ReduceInit{}, kir.ReduceTile{}, kir.ReduceUninit{}, kir.TransposeInit{}, kir.TransposeTile{}, kir.PackTile{},
		kir.ReconfigDataFormat{}, kir.PackReconfigDataFormat{},
		kir.CBReserveBack{}, kir.CBPushBack{}, kir.CBWaitFront{}, kir.CBPopFront{},
	}
	for _, op := range []kir.EltwiseOp{kir.EltAdd, kir.EltSub, kir.EltMul} {
		compute = append(compute, kir.BinaryInit{Op: op}, kir.BinaryTiles{Op: op})
		for _, d := range []kir.BcastDim{kir.BcastRows, kir.BcastCols, kir.BcastScalar} {
			if kir.APIName(kir.BcastInit{Op: op, Dim: d}) == "" {
				continue // not in the pinned release
			}
			compute = append(compute, kir.BcastInit{Op: op, Dim: d}, kir.BcastTiles{Op: op, Dim: d})
		}
	}
	for _, op := range kir.SFPUOps {
		compute = append(compute, kir.SFPUInit{Op: op}, kir.SFPU{Op: op})
	}
	dm = []kir.Stmt{
		kir.CBReserveBack{}, kir.CBPushBack{}, kir.CBWaitFront{}, kir.CBPopFront{},
		kir.NoCAsyncRead{}, kir.NoCAsyncWrite{}, kir.NoCAsyncWriteMulticast{}, kir.NoCAsyncReadBarrier{},
		kir.NoCAsyncWriteBarrier{}, kir.NoCAsyncWritesFlushed{}, kir.NoCSemaphoreSet{}, kir.NoCSemaphoreWait{},
		kir.NoCSemaphoreWaitMin{}, kir.NoCSemaphoreInc{}, kir.NoCSemaphoreSetMulticast{},
	}
	var missing []string
	for _, s := range compute {
		if _, ok := computeHeaders[kir.APIName(s)]; !ok {
			missing = append(missing, fmt.Sprintf("compute %T -> %q", s, kir.APIName(s)))
		}
	}
	for _, s := range dm {
		if !dataflowNames[kir.APIName(s)] {
			missing = append(missing, fmt.Sprintf("data movement %T -> %q", s, kir.APIName(s)))
		}
	}
	for _, e := range []kir.Expr{kir.GetWritePtr{}, kir.GetReadPtr{}, kir.GetTileSize{}, kir.GetSemaphore{},
		kir.NoCAddr{}, kir.DRAMBankAddr{}, kir.MulticastAddr{}, kir.MyNoCX{}, kir.MyNoCY{}} {
		if !dataflowNames[kir.ExprAPIName(e)] {
			missing = append(missing, fmt.Sprintf("expression %T -> %q", e, kir.ExprAPIName(e)))
		}
	}
	for _, s := range []kir.Stmt{kir.EthSendBytes{}, kir.EthWaitForReceiverDone{}, kir.EthWaitForBytes{}, kir.EthReceiverDone{}} {
		if !ethNames[kir.APIName(s)] {
			missing = append(missing, fmt.Sprintf("ethernet %T -> %q", s, kir.APIName(s)))
		}
	}
	if !dataflowNames[kir.ExprAPIName(kir.GetEthSemaphore{})] {
		missing = append(missing, "expression kir.GetEthSemaphore")
	}
	if _, ok := computeHeaders[kir.ExprAPIName(kir.ReadTileValue{})]; !ok {
		missing = append(missing, "compute expression kir.ReadTileValue")
	}
	if diff := cmp.Diff([]string(nil), missing); diff != "" {
		t.Errorf("API names without a header or declaration in headers.go (-want +got):\n%s", diff)
	}
}
