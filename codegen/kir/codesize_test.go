package kir_test

import (
	"strings"
	"testing"

	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/kir/kirtest"
)

// withReads returns addProgram with n extra 64-byte reads appended to
// kernel name's body (a reader or a writer), each from its own page of
// buffer a: unrolled, n statements as printed; looped, one read in a loop
// of n.
func withReads(name string, n int, looped bool) *kir.Program {
	p := addProgram()
	k := p.Kernel(name)
	addr := k.RuntimeArg("extra_addr")
	for i := range k.RuntimeValues {
		k.RuntimeValues[i].Values = append(k.RuntimeValues[i].Values, kir.ArgValue{Kind: kir.ValBufferAddr, Buffer: "a"})
	}
	b := k.Builder()
	stage := b.Let("stage", kir.GetWritePtr{CB: kirtest.CBIn0})
	read := func(page kir.Expr) {
		b.NoCAsyncRead(kir.InterleavedPageAddr(addr, page, 2048), stage, kir.C(64))
	}
	if looped {
		b.For("r", kir.C(0), kir.Ci(n), func(r kir.Var) { read(r) })
	} else {
		for r := range n {
			read(kir.Ci(r))
		}
	}
	b.NoCAsyncReadBarrier()
	return p
}

// readsFor is the smallest number of unrolled extra reads that takes
// kernel name's estimate above bytes.
func readsFor(name string, bytes int) int {
	n := 1
	for kir.EstimateCode(withReads(name, n, false).Kernel(name)).Bytes <= bytes {
		n *= 2
	}
	lo, hi := n/2, n
	for lo+1 < hi {
		m := (lo + hi) / 2
		if kir.EstimateCode(withReads(name, m, false).Kernel(name)).Bytes <= bytes {
			lo = m
		} else {
			hi = m
		}
	}
	return hi
}

// TestCodeSizeRule: a kernel whose unrolled statements take its estimate
// past its processor's budget, or a program whose kernels together
// overflow the kernel config ring, breaks rule code-size; the same reads
// in a loop do not.
func TestCodeSizeRule(t *testing.T) {
	overNCRISC := readsFor("reader", bh.NCRISCCodeBytes)
	// Reader and writer each just within their budgets: together with the
	// compute kernel's three images they overflow the ring.
	both := withReads("reader", readsFor("reader", bh.NCRISCCodeBytes-1024), false)
	{
		w := withReads("writer", readsFor("writer", bh.BRISCCodeBytes-1024), false).Kernel("writer")
		*both.Kernel("writer") = *w
	}
	tests := []struct {
		name string
		p    *kir.Program
		want []string // substrings of the error; nil: valid
	}{
		{"a few unrolled reads", withReads("reader", 16, false), nil},
		{"unrolled reads past the NCRISC budget", withReads("reader", overNCRISC, false),
			[]string{`program "eltwise_add", kernel "reader"`, "bytes of reader code exceed the 24576-byte limit of NCRISC", "noc_async_read", "[rule code-size]"}},
		{"the same reads in a loop", withReads("reader", overNCRISC, true), nil},
		{"ten thousand reads in a loop", withReads("reader", 10000, true), nil},
		{"reader and writer within budgets, ring overflowed", both,
			[]string{`program "eltwise_add": the kernel config ring needs an estimated`, "reader", "on NCRISC", "writer", "on BRISC", "compute", "the ring holds less than 70688", "[rule code-size]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := kir.Validate(tc.p, bh)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !kir.HasRule(err, kir.RuleCodeSize) {
				t.Fatalf("Validate = %v; want a code-size violation", err)
			}
			if rules := kir.RulesOf(err); len(rules) != 1 {
				t.Errorf("rules broken = %v; want only code-size", rules)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestEstimateCodeCountsPrintedStatements: a loop body counts once, an
// unrolled statement once per copy, and a compute kernel's CB calls only
// on the TRISC that builds them.
func TestEstimateCodeCountsPrintedStatements(t *testing.T) {
	one := kir.EstimateCode(withReads("reader", 1, true).Kernel("reader")).Bytes
	many := kir.EstimateCode(withReads("reader", 1000, true).Kernel("reader")).Bytes
	if one != many {
		t.Errorf("loop of 1 read: %d bytes, loop of 1000: %d; want equal (a loop body counts once)", one, many)
	}
	u10 := kir.EstimateCode(withReads("reader", 10, false).Kernel("reader")).Bytes
	u20 := kir.EstimateCode(withReads("reader", 20, false).Kernel("reader")).Bytes
	if u20 <= u10 {
		t.Errorf("10 unrolled reads: %d bytes, 20: %d; want more for more statements", u10, u20)
	}
	c := kir.EstimateCode(addProgram().Kernel("compute"))
	if len(c.Binaries) != 3 || c.Bytes != max(c.Binaries[0], c.Binaries[1], c.Binaries[2]) {
		t.Fatalf("compute estimate %+v: want three TRISC binaries and Bytes their maximum", c)
	}
	if c.Binaries[1] >= c.Binaries[0] || c.Binaries[1] >= c.Binaries[2] {
		t.Errorf("TRISC binaries %v: math (no CB calls) should be the smallest", c.Binaries)
	}
}
