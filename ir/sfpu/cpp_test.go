package sfpu

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	isa "github.com/tcc-dev/tcc/ir/sfpuisa"
)

// hostStub defines tt-llk's instruction macros for a host build: each
// pushes the 32-bit word ckernel_ops.h's TT_OP_* would encode (the same
// field layouts, written out here), so the test can compare the words the
// header's C++ issues with the programs' Insn.Word.
const hostStub = `#include <cstdint>
#include <cstdio>
#include <vector>
static std::vector<uint32_t> words;
#define TT_OP(op, params) ((uint32_t)(op) << 24 | (uint32_t)(params))
#define W(x) words.push_back(x)
#define ADDR_MOD_7 7
#define TTI_SFPLOAD(l, m, a, d) W(TT_OP(0x70, ((l) << 20) + ((m) << 16) + ((a) << 13) + (d)))
#define TT_SFPLOAD TTI_SFPLOAD
#define TTI_SFPSTORE(l, m, a, d) W(TT_OP(0x72, ((l) << 20) + ((m) << 16) + ((a) << 13) + (d)))
#define TT_SFPSTORE TTI_SFPSTORE
#define TTI_SFPLOADI(l, m, i) W(TT_OP(0x71, ((l) << 20) + ((m) << 16) + (i)))
#define TT_SFPLOADI(l, m, i) W(TT_OP(0x71, ((l) << 20) + ((m) << 16) + 0))
#define MAD(op, a, b, c, d, m) W(TT_OP(op, ((a) << 16) + ((b) << 12) + ((c) << 8) + ((d) << 4) + (m)))
#define TTI_SFPMAD(a, b, c, d, m) MAD(0x84, a, b, c, d, m)
#define TTI_SFPADD(a, b, c, d, m) MAD(0x85, a, b, c, d, m)
#define TTI_SFPMUL(a, b, c, d, m) MAD(0x86, a, b, c, d, m)
#define I16(op, i, d, m) W(TT_OP(op, ((i) << 8) + ((d) << 4) + (m)))
#define TTI_SFPMULI(i, d, m) I16(0x74, i, d, m)
#define TTI_SFPADDI(i, d, m) I16(0x75, i, d, m)
#define I12(op, i, c, d, m) W(TT_OP(op, ((i) << 12) + ((c) << 8) + ((d) << 4) + (m)))
#define TTI_SFPDIVP2(i, c, d, m) I12(0x76, i, c, d, m)
#define TTI_SFPEXEXP(i, c, d, m) I12(0x77, i, c, d, m)
#define TTI_SFPEXMAN(i, c, d, m) I12(0x78, i, c, d, m)
#define TTI_SFPIADD(i, c, d, m) I12(0x79, i, c, d, m)
#define TTI_SFPSHFT(i, c, d, m) I12(0x7a, i, c, d, m)
#define TTI_SFPSETCC(i, c, d, m) I12(0x7b, i, c, d, m)
#define TTI_SFPMOV(i, c, d, m) I12(0x7c, i, c, d, m)
#define TTI_SFPABS(i, c, d, m) I12(0x7d, i, c, d, m)
#define TTI_SFPAND(i, c, d, m) I12(0x7e, i, c, d, m)
#define TTI_SFPOR(i, c, d, m) I12(0x7f, i, c, d, m)
#define TTI_SFPNOT(i, c, d, m) I12(0x80, i, c, d, m)
#define TTI_SFPLZ(i, c, d, m) I12(0x81, i, c, d, m)
#define TTI_SFPSETEXP(i, c, d, m) I12(0x82, i, c, d, m)
#define TTI_SFPSETMAN(i, c, d, m) I12(0x83, i, c, d, m)
#define TTI_SFPPUSHC(i, c, d, m) I12(0x87, i, c, d, m)
#define TTI_SFPPOPC(i, c, d, m) I12(0x88, i, c, d, m)
#define TTI_SFPSETSGN(i, c, d, m) I12(0x89, i, c, d, m)
#define TTI_SFPENCC(i, c, d, m) I12(0x8a, i, c, d, m)
#define TTI_SFPCOMPC(i, c, d, m) I12(0x8b, i, c, d, m)
#define TTI_SFPXOR(i, c, d, m) I12(0x8d, i, c, d, m)
#define TTI_SFPSWAP(i, c, d, m) I12(0x92, i, c, d, m)
#define TTI_SFPARECIP(i, c, d, m) I12(0x99, i, c, d, m)
#define TTI_SFPCAST(c, d, m) W(TT_OP(0x90, ((c) << 8) + ((d) << 4) + (m)))
#define TTI_SFPNOP W(TT_OP(0x8f, 0))
#define TTI_INCRWC(cr, d, b, a) W(0xffffffff)
#define MATH(x)
`

// The header's C++, built by g++ for the host with the macros pushing
// their encodings, issues exactly each program's words (Insn.Word, with
// runtime fields zero) 8 times per face, each iteration ending in INCRWC.
func TestHeaderIssuesProgramWords(t *testing.T) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("!!!!! g++ is not installed: SKIPPING the host build of tcc_sfpu.h !!!!!")
	}
	dir := t.TempDir()
	hdr := Header()
	// The tile calls need tt-llk; the face functions are what is checked.
	hdr = strings.Replace(hdr, "#pragma once", "", 1)
	hdr = hdr[:strings.Index(hdr, "}  // namespace tcc_sfpu")+len("}  // namespace tcc_sfpu")] + "\n"
	var main strings.Builder
	hdr = strings.Replace(hdr, "#include \"compute_kernel_api/common.h\"", "namespace ckernel {}", 1)
	main.WriteString(hostStub + hdr + "int main() {\n")
	for _, s := range Table {
		call := "()"
		switch {
		case s.Param:
			call = "(0)"
		case s.Binary:
			call = "(0, 0, 0)"
		}
		fmt.Fprintf(&main, "    words.clear(); tcc_sfpu::%s_face%s; printf(\"%s\"); for (auto w : words) printf(\" %%08x\", w); printf(\"\\n\");\n", s.Name, call, s.Name)
	}
	main.WriteString("}\n")
	src := filepath.Join(dir, "h.cc")
	require.NoError(t, os.WriteFile(src, []byte(main.String()), 0o644))
	bin := filepath.Join(dir, "h")
	if out, err := exec.Command(gxx, "-std=c++17", "-Wall", "-Werror", "-Wno-unknown-pragmas", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, len(Table))
	for i, s := range Table {
		t.Run(s.Name, func(t *testing.T) {
			var want []string
			for _, in := range Programs[s.Op].Setup {
				want = append(want, fmt.Sprintf("%08x", in.Word()))
			}
			for range 8 {
				for _, in := range Programs[s.Op].Body {
					want = append(want, fmt.Sprintf("%08x", in.Word()))
				}
				want = append(want, "ffffffff")
			}
			got := strings.Fields(lines[i])[1:]
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("words (-want +got):\n%s", d)
			}
		})
	}
}

// Every program runs on special values without a model error, uses only
// LREG0-7 as scratch, and balances its condition stack.
func TestPrograms(t *testing.T) {
	for _, s := range Table {
		t.Run(s.Name, func(t *testing.T) {
			p := Programs[s.Op]
			require.NotNil(t, p)
			depth := 0
			for _, in := range p.Body {
				switch in.Op {
				case isa.SFPPUSHC:
					depth++
				case isa.SFPPOPC:
					depth--
				}
				if depth < 0 || depth > 8 {
					t.Fatalf("condition stack depth %d at %v", depth, in)
				}
			}
			if depth != 0 {
				t.Errorf("condition stack ends %d deep", depth)
			}
			// A MAD-class result is read no sooner than two instructions
			// later (an SFPNOP between: SFPMAD's latency).
			for i := 1; i < len(p.Body); i++ {
				prev, in := p.Body[i-1], p.Body[i]
				if w, ok := prev.Writes(); ok && prev.IsMAD() {
					for _, r := range in.Reads() {
						if r == w {
							t.Errorf("%v reads LREG%d right after %v wrote it", in, r, prev)
						}
					}
				}
			}
			for _, x := range []float32{0, 1, -1, 1e-30, -1e30, 3.5} {
				_ = p.Eval(x, 2) // panics on a model error
			}
		})
	}
}

// A chain's C++ (ChainHeader), built by g++ for the host as
// TestHeaderIssuesProgramWords builds the header, issues exactly its
// program's words (ChainProgram) 8 times per face.
func TestChainHeaderIssuesProgramWords(t *testing.T) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("!!!!! g++ is not installed: SKIPPING the host build of the chains' C++ !!!!!")
	}
	for _, fp32 := range []bool{true, false} {
		hdr, err := ChainHeader(chainKinds, fp32)
		require.NoError(t, err)
		hdr = hdr[:strings.Index(hdr, "}  // namespace tcc_sfpu")+len("}  // namespace tcc_sfpu")] + "\n"
		var main strings.Builder
		main.WriteString(hostStub + "namespace ckernel {}\n" + hdr + "int main() {\n")
		for _, steps := range chainKinds {
			fmt.Fprintf(&main, "    words.clear(); tcc_sfpu::chain_%s_face(); for (auto w : words) printf(\" %%08x\", w); printf(\"\\n\");\n", ChainName(steps))
		}
		main.WriteString("}\n")
		dir := t.TempDir()
		src, bin := filepath.Join(dir, "c.cc"), filepath.Join(dir, "c")
		require.NoError(t, os.WriteFile(src, []byte(main.String()), 0o644))
		if out, err := exec.Command(gxx, "-std=c++17", "-Wall", "-Werror", "-Wno-unknown-pragmas", "-o", bin, src).CombinedOutput(); err != nil {
			t.Fatalf("g++: %v\n%s", err, out)
		}
		out, err := exec.Command(bin).Output()
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Len(t, lines, len(chainKinds))
		for i, steps := range chainKinds {
			p, err := ChainProgram(steps, fp32)
			require.NoError(t, err)
			var want []string
			for _, in := range p.Setup {
				want = append(want, fmt.Sprintf("%08x", in.Word()))
			}
			for range 8 {
				for _, in := range p.Body {
					want = append(want, fmt.Sprintf("%08x", in.Word()))
				}
				want = append(want, "ffffffff")
			}
			if d := cmp.Diff(want, strings.Fields(lines[i])); d != "" {
				t.Errorf("%s (fp32 %v) words (-want +got):\n%s", ChainName(steps), fp32, d)
			}
		}
	}
}
